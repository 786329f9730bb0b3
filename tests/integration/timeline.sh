#!/bin/sh
# heapalloc timeline (tools/ha_timeline.py) on a real run of 11 dumps: the
# table has one row per log line with the log's exact in_use and allocated,
# the kind of each reason and the first highest in_use marked peak; without
# the log the same rows come from the dumps and their .stats; -o x.svg is
# XML whose text names the prefix, -o x.png a PNG; no log and no dumps, one
# stderr line and exit 1.  The chart checks skip (77) without matplotlib.
. "$top_srcdir/tests/lib/prof_lib.sh"
py=${PYTHON3:-}
[ -n "$py" ] || py=$(command -v python3 2>/dev/null)
[ -n "$py" ] && "$py" -c 'pass' 2>/dev/null || { echo "SKIP: python3 not available"; exit 77; }
tl() { "$py" "$top_srcdir/tools/ha_timeline.py" "$@"; }

# rows FILE — the table's rows as "seq in_use allocated kind peak"
rows() { awk '!/^#/ && $1 != "seq" { print $1, $3, $4, $6, $7 }' "$1"; }

mkdir "$tmp/a"
HEAPPROFILE="$tmp/a/p" HEAP_PROFILE_ALLOCATION_INTERVAL=102400 HEAP_PROFILE_PEAK_INTERVAL=102400 \
	"$W" pattern 100 10240 keepfree 2>"$tmp/a.err" || fail "pattern exited $?"
log="$tmp/a/p.log"
eq "log lines" "$(grep -vc '^#' "$log")" 11
tl "$tmp/a/p" >"$tmp/t.out" 2>"$tmp/t.err" || fail "table exited $?: $(cat "$tmp/t.err")"
eq "table: stderr" "$(cat "$tmp/t.err")" ""
want=$(grep -v '^#' "$log" | awk -F'\t' '
	{ seq[NR] = $1; use[NR] = $5; al[NR] = $3; r[NR] = $8; if ($5 > max) { max = $5; p = NR } }
	END { for (i = 1; i <= NR; i++)
		print seq[i], use[i], al[i], r[i] ~ /^Exiting/ ? "exit" : "alloc", i == p ? "peak" : "-" }')
eq "table: rows" "$(rows "$tmp/t.out")" "$want"
eq "table: peak is not the exit dump" "$(rows "$tmp/t.out" | awk '$5 == "peak" { print $1 }')" 10
eq "table: header" "$(grep -v '^#' "$tmp/t.out" | head -1 | tr -s ' ')" \
	"seq time_s in_use allocated rss kind peak reason"
eq "table: first time" "$(awk '$1 == "1" { print $2 }' "$tmp/t.out")" "0.000"
eq "table: reasons" "$(grep -v '^#' "$tmp/t.out" | tail -n +2 | sed 's/.*  //')" \
	"$(grep -v '^#' "$log" | cut -f8)"
peak_books=$(awk '$1 == "heap.peak_in_use" { print $2 }' "$tmp/a/p.0011.stats")
eq "table: peak.heap line" "$(grep '\.peak\.heap:' "$tmp/t.out")" \
	"# $tmp/a/p.peak.heap: $peak_books bytes in use ($(awk -v b="$peak_books" 'BEGIN { printf "%.1f KiB", b / 1024 }'); the books, from p.0011.stats)"

# timeline rows between dumps (the suite runs with them off): 40 MiB
# taken in 2 MiB steps 50 ms apart, held 500 ms, freed; at 100 ms the
# helper logs the climb, its rows' in_use is allocated - freed, and the
# table's peak is a row holding the whole 40 MiB
mkdir "$tmp/r"
HEAPPROFILE="$tmp/r/p" HEAP_PROFILE_TIMELINE_MS=100 "$W" grow 2 50 40 2>"$tmp/r.err" ||
	fail "grow exited $?"
rlog="$tmp/r/p.log"
nrow=$(grep -c '	timeline$' "$rlog")
[ "$nrow" -ge 8 ] || fail "timeline rows: $nrow, want >= 8: $(cat "$rlog")"
eq "timeline rows: in_use = allocated - freed" \
	"$(awk -F'\t' '$8 == "timeline" && $5 != $3 - $4' "$rlog")" ""
eq "timeline rows come before the exit dump" \
	"$(grep -v '^#' "$rlog" | tail -1 | cut -f8 | cut -c1-7)" "Exiting"
tl "$tmp/r/p" >"$tmp/r.out" 2>"$tmp/r.err2" || fail "table exited $?: $(cat "$tmp/r.err2")"
eq "timeline: header counts" "$(head -1 "$tmp/r.out" | sed 's/.*p: \([^f]*\) from.*/\1/')" \
	"1 dumps and $nrow timeline rows"
eq "timeline: the peak is a row with 40 MiB" \
	"$(rows "$tmp/r.out" | awk '$5 == "peak" { print $4, ($2 >= 40 * 1048576) }')" "row 1"

# no log: the rows from the dumps, in_use exact from the .stats sidecars
mkdir "$tmp/n"
cp -p "$tmp/a"/p.0* "$tmp/n/"
tl "$tmp/n/p" >"$tmp/n.out" 2>"$tmp/n.err" || fail "no log: exited $?: $(cat "$tmp/n.err")"
eq "no log: seq in_use kind peak" "$(rows "$tmp/n.out" | cut -d' ' -f1,2,4,5)" \
	"$(echo "$want" | cut -d' ' -f1,2,4,5)"
grep -q "^# heapalloc timeline $tmp/n/p: 11 dumps from $tmp/n/p.NNNN.heap headers and mtimes," "$tmp/n.out" ||
	fail "no log: source line: $(head -1 "$tmp/n.out")"

# nothing to chart: one line, exit 1, no table
for what in missing empty; do
	[ $what = empty ] && printf '# heapalloc dump log: bytes, seconds since the epoch\n' >"$tmp/e.log"
	tl "$tmp/e" >"$tmp/e.out" 2>"$tmp/e.err"
	eq "$what: exit" $? 1
	eq "$what: stderr" "$(cat "$tmp/e.err")" \
		"heapalloc timeline: no dumps: $tmp/e.log is missing or empty and there is no $tmp/e.NNNN.heap"
	eq "$what: stdout" "$(cat "$tmp/e.out")" ""
done

[ "$fails" -eq 0 ] || finish
"$py" -c "import sys; sys.path.insert(0, '$top_srcdir/tools'); import ha_timeline; sys.exit(not ha_timeline.have_matplotlib())" ||
	{ echo "SKIP: the table passed; the charts need matplotlib (python3-matplotlib)"; exit 77; }

tl "$tmp/a/p" -o "$tmp/x.svg" --width 900 >"$tmp/s.out" 2>"$tmp/s.err" || fail "svg exited $?: $(cat "$tmp/s.err")"
eq "svg: same table" "$(cat "$tmp/s.out")" "$(cat "$tmp/t.out")"
"$py" - "$tmp/x.svg" "heapalloc timeline: $tmp/a/p" >"$tmp/svg.check" 2>&1 <<'EOF' || fail "svg: $(cat "$tmp/svg.check")"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
assert root.get("width") == "648pt", root.get("width")   # 900 px at 72 pt per 100 px
texts = ["".join(e.itertext()) for e in root.iter("{http://www.w3.org/2000/svg}text")]
assert sys.argv[2] in texts, texts[:5]
assert "time since the first row (s)" in texts, texts
assert "dump: allocation interval" in texts and "dump: exit" in texts, texts
EOF
[ -e "$tmp/x.svg.tmp" ] && fail "svg: x.svg.tmp left behind"

tl "$tmp/a/p" -o "$tmp/x.png" >/dev/null 2>"$tmp/p.err" || fail "png exited $?: $(cat "$tmp/p.err")"
eq "png: magic" "$(head -c 8 "$tmp/x.png" | od -An -tx1 | tr -d ' \n')" "89504e470d0a1a0a"

tl "$tmp/a/p" -o "$tmp/x.pdf" >/dev/null 2>"$tmp/f.err"
eq "pdf: exit" $? 2
eq "pdf: stderr" "$(cat "$tmp/f.err")" "heapalloc timeline: $tmp/x.pdf: the chart is .svg or .png"
finish
