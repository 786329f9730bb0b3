#!/bin/sh
# Calibration (prof/output/calibrate.c): a sampled profile's totals equal the
# figures the dump prints beside it (message, .stats, log) in both formats;
# a HeapProfilerStart session mid-run counts only what was allocated since
# it started, and says so when blocks older than it were freed;
# HEAP_PROFILE_CALIBRATE=0 gives pprof's raw estimates, HEAP_PROFILE_SEED
# the same ones each time; recording every
# allocation gives the same figure, in requested bytes, everywhere.
. "$top_srcdir/tests/lib/prof_lib.sh"
need_go

# total INDEX FILE — go pprof's total of sample index INDEX, in bytes
total() {
	"$GO" tool pprof -top -unit=B -sample_index="$1" "$W" "$2" 2>/dev/null |
		sed -n 's/^Showing nodes accounting for .* of \([0-9]*\)B total$/\1/p'
}
# logcol LOG SEQ COLUMN — the dump log's column (3 allocated, 5 in use) of dump SEQ
logcol() { awk -F'\t' -v s="$2" -v c="$3" '$1 == s { print $c }' "$1"; }
# header FILE K — the text header's K-th number (1 IO, 2 IB, 3 AO, 4 AB)
header() { head -1 "$1" | tr '[]:@' '    ' | awk -v k="$2" '{ print $(k + 2) }'; }
# stat FILE NAME — a .stats line's value
stat() { awk -v n="$2" '$1 == n { print $2 }' "$1"; }
# agree WHAT PREFIX SEQ — both files of dump SEQ add up to its log line, its
# .stats and its message
agree() {
	p=$2.$(printf %04d "$3")
	in=$(logcol "$2.log" "$3" 5)
	al=$(logcol "$2.log" "$3" 3)
	[ -n "$in" ] && [ -n "$al" ] || { fail "$1: no log line $3"; return; }
	eq "$1 pprof inuse total" "$(total inuse_space "$p.pb.gz")" "$in"
	eq "$1 pprof alloc total" "$(total alloc_space "$p.pb.gz")" "$al"
	eq "$1 text header in use" "$(header "$p.heap" 2)" "$in"
	eq "$1 text header allocated" "$(header "$p.heap" 4)" "$al"
	eq "$1 go pprof on the text file" "$(total inuse_space "$p.heap")" "$in"
	eq "$1 .stats heap.in_use" "$(stat "$p.stats" heap.in_use)" "$in"
}

# 1. a sampled run: every figure the same, to the byte
HEAPPROFILE="$tmp/s" HEAP_PROFILE_FORMAT=both HEAP_PROFILE_SAMPLE_INTERVAL=65536 \
	HEAP_PROFILE_SEED=3 "$W" sampled 2>"$tmp/s.err" || fail "prof_work sampled exited $?"
[ -f "$tmp/s.0001.pb.gz" ] || { cat "$tmp/s.err"; fail "no $tmp/s.0001.pb.gz"; finish; }
shape "$tmp/s.0001.heap"
agree sampled "$tmp/s" 1
in=$(logcol "$tmp/s.log" 1 5)
grep -q "^Dumping heap profile to $tmp/s.0001.heap (Exiting, $((in >> 20)) MB in use)$" "$tmp/s.err" ||
	fail "message does not say $((in >> 20)) MB: $(cat "$tmp/s.err")"
eq "sampled header" "$(head -1 "$tmp/s.0001.heap" | sed 's/.*@ //')" heapprofile
"$GO" tool pprof -comments "$tmp/s.0001.pb.gz" >"$tmp/s.comments" 2>&1
grep -q "estimates calibrated to the allocator's exact totals" "$tmp/s.comments" ||
	fail "no calibration comment: $(cat "$tmp/s.comments")"
grep -q "^inuse_space: $in bytes in use (exact" "$tmp/s.comments" ||
	fail "in-use comment does not give $in: $(cat "$tmp/s.comments")"
"$GO" tool pprof -tags "$tmp/s.0001.pb.gz" 2>/dev/null | grep -q '^ *sampling_error: Total' ||
	fail "pprof -tags shows no sampling_error"
# site_small_many holds all but a few KiB of what is in use (stdio's buffer
# may be sampled too), so it gets nearly the exact total
near "site_small_many inuse_space" "$(flat inuse_space "$tmp/s.0001.pb.gz" site_small_many)" "$in" 2

# 2. the off switch: pprof's raw estimates, interval in the header, off the books
HEAPPROFILE="$tmp/o" HEAP_PROFILE_FORMAT=both HEAP_PROFILE_SAMPLE_INTERVAL=65536 \
	HEAP_PROFILE_SEED=3 HEAP_PROFILE_CALIBRATE=0 "$W" sampled 2>"$tmp/o.err" || fail "off exited $?"
eq "off header" "$(head -1 "$tmp/o.0001.heap" | sed 's/.*@ //')" heap_v2/65536
oin=$(logcol "$tmp/o.log" 1 5)
pin=$(total inuse_space "$tmp/o.0001.pb.gz")
near "off: pprof total of the .pb.gz against the .heap's" "$pin" "$(total inuse_space "$tmp/o.0001.heap")" 0.001
[ -n "$pin" ] && [ "$pin" != "$oin" ] || fail "off: pprof in-use total $pin is the books' $oin"
"$GO" tool pprof -comments "$tmp/o.0001.pb.gz" 2>&1 | grep -q "unsampled estimates (not calibrated)" ||
	fail "off: no 'not calibrated' comment"
# HEAP_PROFILE_SEED: the same seed samples the same run alike
HEAPPROFILE="$tmp/o2" HEAP_PROFILE_SAMPLE_INTERVAL=65536 HEAP_PROFILE_SEED=3 \
	HEAP_PROFILE_CALIBRATE=0 "$W" sampled 2>/dev/null || fail "seed rerun exited $?"
eq "same seed, same samples" "$(head -1 "$tmp/o2.0001.heap")" "$(head -1 "$tmp/o.0001.heap")"

# 3. HeapProfilerStart mid-run: 20 MB before, 24.6 MB kept and 10.2 MB freed after
mkdir "$tmp/m"
HEAP_PROFILE_FORMAT=both HEAP_PROFILE_SAMPLE_INTERVAL=65536 HEAP_PROFILE_SEED=5 \
	"$W" midrun "$tmp/m/p" 2>"$tmp/m.err" || fail "prof_work midrun exited $?"
[ -f "$tmp/m/p.0002.pb.gz" ] || { cat "$tmp/m.err"; fail "no midrun dumps"; finish; }
agree midrun "$tmp/m/p" 1
eq "midrun allocated since the start" "$(logcol "$tmp/m/p.log" 1 3)" $((3000 * 8192 + 2000 * 5120))
eq "midrun in use since the start" "$(logcol "$tmp/m/p.log" 1 5)" $((3000 * 8192))
eq "site_before in the session's profile" "$(flat alloc_space "$tmp/m/p.0001.pb.gz" site_before)" 0
# older blocks freed: the books' figure (4.1 MB) is not the session's in use;
# the estimate stays within its exact bounds and the comment says why
in2=$(logcol "$tmp/m/p.log" 2 5)
t2=$(total inuse_space "$tmp/m/p.0002.pb.gz")
awk -v t="$t2" -v lo="$in2" -v hi="$(logcol "$tmp/m/p.log" 2 3)" 'BEGIN { exit !(t > lo && t <= hi) }' ||
	fail "midrun dump 2: in use $t2 not within ($in2, allocated]"
near "midrun dump 2 site_after_keep" "$(flat inuse_space "$tmp/m/p.0002.pb.gz" site_after_keep)" $((3000 * 8192)) 25
"$GO" tool pprof -comments "$tmp/m/p.0002.pb.gz" 2>&1 | grep -q "blocks older than the session were freed" ||
	fail "midrun dump 2: no comment on the older blocks"

# 4. every allocation recorded: lines, header, message, log and .stats in requested bytes
HEAPPROFILE="$tmp/t" HEAP_PROFILE_FORMAT=both HEAP_PROFILE_SAMPLE_INTERVAL=1 "$W" truth 2>"$tmp/t.err" ||
	fail "prof_work truth exited $?"
agree "interval 1" "$tmp/t" 1
lines=$(awk '/^$/ { exit } NR > 1 { s += $2 } END { print s + 0 }' "$tmp/t.0001.heap")
eq "interval 1: the lines' sum" "$lines" "$(logcol "$tmp/t.log" 1 5)"
tin=$(logcol "$tmp/t.log" 1 5)
grep -q "(Exiting, $((tin >> 20)) MB in use)$" "$tmp/t.err" || fail "interval 1: message is not $((tin >> 20)) MB"
# requested bytes: site_tiny's 1000 blocks of 1 byte are 1000 bytes (their class holds 16)
eq "site_tiny inuse_space" "$(flat inuse_space "$tmp/t.0001.pb.gz" site_tiny)" 1000
"$GO" tool pprof -comments "$tmp/t.0001.pb.gz" 2>&1 | grep -q "in requested bytes" ||
	fail "interval 1: the unit is not stated"
finish
