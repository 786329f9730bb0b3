#!/bin/sh
# Ages of live memory and lifetimes of freed memory in the pprof profile
# (docs/heap-profile-spec.md, "Ages and lifetimes"), read back through go
# pprof's -tagfocus as a user would.  Recording every allocation the values
# are exact: the 2 s old sites (small blocks and big ones) are all of what
# age=2s: keeps, the new site all of age=:1s, with the age label the
# program's own clock says; the churning site all of lifetime=:1ms, the
# 30 ms one all of lifetime=10ms: (on a loaded or emulated machine "at
# once" may outlast 1 ms: then what the program's clock saw, below).  A dump file, the served profile
# (heapalloc_profile_pprof, the HTTP endpoint) and `heapalloc dump PID` alike.
# Sampled (every 64 bytes, calibrated; small samples keep their record in
# the block), the same split holds site by site.
PROF_WORK="$top_builddir/tests/integration/prof_ages"
. "$top_srcdir/tests/lib/prof_lib.sh"
need_go

# tagged INDEX FOCUS FILE NAME — flat, keeping only samples whose label
# matches FOCUS (go pprof's -tagfocus)
tagged() {
	"$GO" tool pprof -top -unit=B -nodefraction=0 -edgefraction=0 -nodecount=100000 \
		-sample_index="$1" -tagfocus="$2" "$W" "$3" >"$tmp/pprof.out" 2>"$tmp/pprof.err" ||
		{ fail "go tool pprof -tagfocus=$2 $3: $(tail -1 "$tmp/pprof.err")"; echo error; return; }
	awk -v n="$4" '$NF == n { v = $1; sub(/B$/, "", v); print v; found = 1; exit }
		END { if (!found) print 0 }' "$tmp/pprof.out"
}

# churn_lived NAME FILE LIVED [SAMPLED] — churn_site's lifetimes in FILE
# against LIVED, the program's "lived FAST SLOW MS" line: its clock reads
# around each malloc and free enclose the profiler's, so every block it saw
# live under 1 ms (FAST bytes) is in lifetime=:1ms and lifetime=10ms: holds
# no more than it saw live that long (SLOW).  A quiet machine: FAST 300000,
# SLOW 0, the split exact.  SAMPLED: calibrated bytes, scaled to the site's
# flat value within 10%.
churn_lived() {
	[ -n "$3" ] || { fail "$1: the program printed no lived line"; return; }
	set -- "$1" "$2" $3 "${4:-}"
	lt1=$(tagged alloc_space lifetime=:1ms "$2" churn_site)
	ge10=$(tagged alloc_space lifetime=10ms: "$2" churn_site)
	if [ -n "${6:-}" ]; then
		all=$(flat alloc_space "$2" churn_site)
	else
		all=300000
		eq "$1: churn alloc_space" "$(flat alloc_space "$2" churn_site)" 300000
	fi
	awk -v l="$lt1" -v g="$ge10" -v a="$all" -v f="$3" -v s="$4" -v p="${6:+10}" 'BEGIN {
		p = p / 100; exit !(l != "" && l >= a * f / 300000 * (1 - p) && l <= a &&
				   g <= a * s / 300000 * (1 + p)) }' ||
		fail "$1: churn lifetime=:1ms $lt1 and 10ms: $ge10 of $all bytes, where the program saw $3 of 300000 live under 1 ms and $4 10 ms or more"
}

mkdir "$tmp/a"
HEAPPROFILE="$tmp/a/p" HEAP_PROFILE_FORMAT=pprof HEAP_PROFILE_SAMPLE_INTERVAL=1 \
	"$W" "$tmp/a/served.pb.gz" >"$tmp/a.out" 2>"$tmp/a.err" || fail "exact: exited $?: $(cat "$tmp/a.err")"
e=$(sed -n 's/^elapsed //p' "$tmp/a.out")
lived=$(sed -n 's/^lived //p' "$tmp/a.out")
# young_split NAME FILE SITE_BYTES — new_site all of age=:1s and none of
# age=2s: when the program saw it younger than 1 s when the served profile
# was made (YOUNG ms, its "ages" line), none of age=2s: under 2 s; older
# (a loaded or emulated machine) the split is not the profile's to keep
young_split() {
	if [ "${young:-99999}" -lt 2000 ]; then
		eq "$1: new_site age=2s:" "$(tagged inuse_space age=2s: "$2" new_site)" 0
	fi
	if [ "${young:-99999}" -lt 1000 ]; then
		eq "$1: new_site age=:1s" "$(tagged inuse_space age=:1s "$2" new_site)" "$3"
	else
		echo "$1: new_site was ${young:-?} ms old by the served profile: age=:1s not checked"
	fi
}
set -- $(sed -n 's/^ages //p' "$tmp/a.out")
alo=${1:-0} ahi=${2:-0} young=${3:-}
echo "exact: the program's clock: churn bytes under 1 ms, 10 ms or more, slow_site's ms: ${lived:-none}"
[ "${e:-0}" -ge 2 ] || fail "exact: the program says it ran ${e:-?} s, not 2"
for f in "$tmp/a/p.0001.pb.gz" "$tmp/a/served.pb.gz"; do
	n=${f##*/}
	eq "$n: old_site age=2s:" "$(tagged inuse_space age=2s: "$f" old_site)" 10240
	eq "$n: old_big age=2s:" "$(tagged inuse_space age=2s: "$f" old_big)" 400000
	eq "$n: old_site objects age=2s:" "$(tagged inuse_objects age=2s: "$f" old_site)" 20
	young_split "$n" "$f" 10240
	eq "$n: old_site age=:1s" "$(tagged inuse_space age=:1s "$f" old_site)" 0
	eq "$n: old_site age=3600s:" "$(tagged inuse_space age=3600s: "$f" old_site)" 0
	churn_lived "$n" "$f" "$lived"
	eq "$n: slow lifetime=:1ms" "$(tagged alloc_space lifetime=:1ms "$f" slow_site)" 0
	eq "$n: slow lifetime=10ms:" "$(tagged alloc_space lifetime=10ms: "$f" slow_site)" 5000
	# the label itself: old_site's age lies between the seconds the program
	# saw from its last old_site block to the dump and from its first to
	# the served profile's end
	ages=$("$GO" tool pprof -tags -tagfocus=age=2s: -focus=old_site "$W" "$f" 2>/dev/null |
		sed -n 's/^ *[0-9.]*[kMG]*B *([ 0-9.]*%): *\([0-9]*\)s$/\1/p' | tr '\n' ' ')
	[ "${ages% }" -ge "$alo" ] 2>/dev/null && [ "${ages% }" -le "$ahi" ] ||
		fail "$n: old_site's age labels '$ages', want one in $alo..$ahi"
	# the lived range label names the bin (when the 30 ms sleep ended
	# within 100 ms by the program's clock)
	[ "${lived##* }" -lt 100 ] 2>/dev/null || continue
	"$GO" tool pprof -tags -focus=slow_site "$W" "$f" 2>/dev/null | grep -q "10ms-100ms" ||
		fail "$n: slow_site has no lived 10ms-100ms label"
done

# sampled: every site's in-use is all in its ages' samples, old or new.
# Seed 17 leaves one old_site block unsampled, and calibration then makes
# that site's in use exceed its allocated (9743 against 9738 bytes): its ages
# must be written all the same (they were not, once).
mkdir "$tmp/s"
HEAPPROFILE="$tmp/s/p" HEAP_PROFILE_FORMAT=pprof HEAP_PROFILE_SAMPLE_INTERVAL=64 HEAP_PROFILE_SEED=17 \
	"$W" "$tmp/s/served.pb.gz" >"$tmp/s.out" 2>"$tmp/s.err" || fail "sampled: exited $?: $(cat "$tmp/s.err")"
f="$tmp/s/p.0001.pb.gz"
lived=$(sed -n 's/^lived //p' "$tmp/s.out")
set -- $(sed -n 's/^ages //p' "$tmp/s.out")
young=${3:-}
for site in old_site old_big; do
	all=$(flat inuse_space "$f" $site)
	[ "$all" -gt 0 ] || fail "sampled: $site has no in-use bytes"
	eq "sampled: $site age=2s:" "$(tagged inuse_space age=2s: "$f" $site)" "$all"
done
all=$(flat inuse_space "$f" new_site)
[ "$all" -gt 0 ] || fail "sampled: new_site has no in-use bytes"
young_split sampled "$f" "$all"
churn_lived sampled "$f" "$lived" sampled

# From outside: `heapalloc dump PID` of the same heap (every allocation
# recorded, the endpoint served too) gives the same
# exact split; `heapalloc top PID --older 2s` puts old_site's bytes in its
# old column, and a second view names neither old site as growing.
H="$top_builddir/tools/heapalloc"
rm -f "$tmp/in"
mkfifo "$tmp/in"
HEAP_PROFILE_SAMPLE_INTERVAL=1 HEAP_PROFILE_HTTP=127.0.0.1:0 HEAP_PROFILE_HTTP_ADDR_FILE="$tmp/addr" \
	"$W" --wait "$tmp/ready" <"$tmp/in" >"$tmp/w.out" 2>"$tmp/w.err" &
pid=$!
exec 7>"$tmp/in"
wait_ready "$tmp/ready" $pid
lived=$(sed -n 's/^lived //p' "$tmp/ready")
f="$tmp/outside.pb.gz"
timeout 60 "$H" dump $pid -o "$f" 2>"$tmp/dump.err" || fail "outside: dump exited $?: $(cat "$tmp/dump.err")"
# the reader runs a moment after the program got ready (longer on a busy
# machine): the two sites' ages are 2.1 s apart, whatever that moment
age_of() {     # the first value of the age section of go pprof -tags (0 has no unit)
	"$GO" tool pprof -tags -focus="^$1\$" "$W" "$f" 2>/dev/null |
		awk '/^ *age:/ { a = 1; next } a && NF { v = $NF; sub(/s$/, "", v); print v; exit }'
}
o=$(age_of old_site)
n=$(age_of new_site)
case "$((${o:-0} - ${n:-99}))" in 2|3) ;; *) fail "outside: old_site's age '$o', new_site's '$n': not 2.1 s apart" ;; esac
eq "outside: old_site age=${o}s:" "$(tagged inuse_space age=${o}s: "$f" old_site)" 10240
eq "outside: old_big age=${o}s:" "$(tagged inuse_space age=${o}s: "$f" old_big)" 400000
eq "outside: new_site age=${o}s:" "$(tagged inuse_space age=${o}s: "$f" new_site)" 0
eq "outside: new_site age=:${n}s" "$(tagged inuse_space age=:${n}s "$f" new_site)" 10240
eq "outside: old_site age=:${n}s" "$(tagged inuse_space age=:${n}s "$f" old_site)" 0
# the endpoint of the same process (HEAP_PROFILE_HTTP) splits alike
timeout 60 "$GO" tool pprof -proto "http://$(cat "$tmp/addr")/debug/pprof/heap" >"$tmp/served.pb.gz" \
	2>"$tmp/http.err" || fail "endpoint: go tool pprof exited $?: $(tail -1 "$tmp/http.err")"
eq "endpoint: old_site age=2s:" "$(tagged inuse_space age=2s: "$tmp/served.pb.gz" old_site)" 10240
churn_lived endpoint "$tmp/served.pb.gz" "$lived"
churn_lived outside "$f" "$lived"
eq "outside: slow lifetime=10ms:" "$(tagged alloc_space lifetime=10ms: "$f" slow_site)" 5000
timeout 60 "$H" top $pid -n 2 --interval 0.2 --older 2s --rows 50 >"$tmp/top.out" 2>"$tmp/top.err" ||
	fail "outside: top exited $?: $(cat "$tmp/top.err")"
# the second view's row of a site: in use, change (two words each), then
# objects, median age, older than 2s; the old column agrees with the age
# (a busy machine may start top late enough for new_site to pass 2 s too)
row() { awk -v s="$1" '/^heapalloc top/ { n++ } n == 2 && $9 == s { print $1 " " $2 " " $5 " " $6 " " $7 " " $8; exit }' "$tmp/top.out"; }
r=$(row old_site)
case "$r" in "10.0 KiB 20 "[2-9]"s 10.0 KiB"|"10.0 KiB 20 "[1-9][0-9]"s 10.0 KiB") ;; *) fail "outside: top's old_site row '$r', want 10.0 KiB, 20 objects, 2s or more, 10.0 KiB old" ;; esac
to=$(echo "$r" | awk '{ sub(/s$/, "", $4); print $4 }')
r=$(row new_site)
tn=$(echo "$r" | awk '{ sub(/s$/, "", $4); print $4 }')
case "$((${to:-0} - ${tn:-99}))" in 2|3) ;; *) fail "outside: top's ages old $to, new $tn: not 2.1 s apart" ;; esac
if [ "${tn:-0}" -lt 2 ]; then want="10.0 KiB 20 ${tn}s 0 B"; else want="10.0 KiB 20 ${tn}s 10.0 KiB"; fi
eq "outside: top's new_site row" "$r" "$want"
# nothing old_site or old_big hold grows (new_site, or stdio's buffer, may
# pass 2 s between the views on a busy machine, and then grow rightly)
grep -q "^growing: " "$tmp/top.out" || fail "outside: top printed no growing line"
grep "^growing: " "$tmp/top.out" | grep -q "old_site\|old_big" &&
	fail "outside: top named a site that stays put: $(grep '^growing' "$tmp/top.out")"
"$H" top $pid --once --older 2x >/dev/null 2>"$tmp/bad.err" && fail "outside: top --older 2x accepted"
eq "outside: --older 2x" "$(cat "$tmp/bad.err")" "heapalloc: top: --older '2x' is not an age (seconds, or a number with s, m, h or d) (see heapalloc top --help)"
exec 7>&-
wait $pid || fail "outside: the program exited $? after the reads"

# growing: a site that keeps a new block every 50 ms has more bytes older
# than 1 s at each view, and top names it; the old sites stay put
rm -f "$tmp/in" "$tmp/ready"
mkfifo "$tmp/in"
HEAP_PROFILE_SAMPLE_INTERVAL=1 "$W" --grow "$tmp/ready" <"$tmp/in" >"$tmp/g.out" 2>"$tmp/g.err" &
pid=$!
exec 7>"$tmp/in"
wait_ready "$tmp/ready" $pid
timeout 60 "$H" top $pid -n 3 --interval 1.2 --older 1s --rows 50 >"$tmp/gtop.out" 2>"$tmp/gtop.err" ||
	fail "growing: top exited $?: $(cat "$tmp/gtop.err")"
g=$(grep '^growing: ' "$tmp/gtop.out" | tail -1)
case "$g" in *grow_site*) ;; *) fail "growing: the last view's line '$g' does not name grow_site" ;; esac
case "$g" in *old_site*|*old_big*) fail "growing: '$g' names a site that stays put" ;; esac
exec 7>&-
wait $pid || fail "growing: the program exited $?"
finish
