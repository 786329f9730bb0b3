#!/bin/sh
# Ages of live memory and lifetimes of freed memory in the pprof profile
# (docs/heap-profile-spec.md, "Ages and lifetimes"), read back through go
# pprof's -tagfocus as a user would.  Recording every allocation the values
# are exact: the 2 s old sites (small blocks and big ones) are all of what
# age=2s: keeps, the new site all of age=:1s, with the age label the
# program's own clock says; the churning site all of lifetime=:1ms, the
# 30 ms one all of lifetime=10ms:.  A dump file and the served profile alike.
# Sampled (every 64 bytes, calibrated; small samples keep their record in
# the block), the same split holds site by site.
PROF_WORK="$top_builddir/tests/prof_ages"
. "$top_srcdir/tests/prof_lib.sh"
need_go

# tagged INDEX FOCUS FILE NAME — flat, keeping only samples whose label
# matches FOCUS (go pprof's -tagfocus)
tagged() {
	"$GO" tool pprof -top -unit=B -nodefraction=0 -edgefraction=0 -nodecount=100000 \
		-sample_index="$1" -tagfocus="$2" "$W" "$3" 2>"$tmp/pprof.err" |
		awk -v n="$4" '$NF == n { v = $1; sub(/B$/, "", v); print v; found = 1; exit }
			END { if (!found) print 0 }'
}

mkdir "$tmp/a"
HEAPPROFILE="$tmp/a/p" HEAP_PROFILE_FORMAT=pprof HEAP_PROFILE_SAMPLE_INTERVAL=1 \
	"$W" "$tmp/a/served.pb.gz" >"$tmp/a.out" 2>"$tmp/a.err" || fail "exact: exited $?: $(cat "$tmp/a.err")"
e=$(sed -n 's/^elapsed //p' "$tmp/a.out")
eq "exact: elapsed" "$e" 2
for f in "$tmp/a/p.0001.pb.gz" "$tmp/a/served.pb.gz"; do
	n=${f##*/}
	eq "$n: old_site age=2s:" "$(tagged inuse_space age=2s: "$f" old_site)" 10240
	eq "$n: old_big age=2s:" "$(tagged inuse_space age=2s: "$f" old_big)" 400000
	eq "$n: old_site objects age=2s:" "$(tagged inuse_objects age=2s: "$f" old_site)" 20
	eq "$n: new_site age=2s:" "$(tagged inuse_space age=2s: "$f" new_site)" 0
	eq "$n: new_site age=:1s" "$(tagged inuse_space age=:1s "$f" new_site)" 10240
	eq "$n: old_site age=:1s" "$(tagged inuse_space age=:1s "$f" old_site)" 0
	eq "$n: old_site age=3600s:" "$(tagged inuse_space age=3600s: "$f" old_site)" 0
	eq "$n: churn lifetime=:1ms" "$(tagged alloc_space lifetime=:1ms "$f" churn_site)" 300000
	eq "$n: slow lifetime=:1ms" "$(tagged alloc_space lifetime=:1ms "$f" slow_site)" 0
	eq "$n: slow lifetime=10ms:" "$(tagged alloc_space lifetime=10ms: "$f" slow_site)" 5000
	eq "$n: churn lifetime=10ms:" "$(tagged alloc_space lifetime=10ms: "$f" churn_site)" 0
	# the label itself: old_site's age is the program's elapsed seconds, or
	# one more when the dump's clock read crossed a second
	ages=$("$GO" tool pprof -tags -tagfocus=age=2s: -focus=old_site "$W" "$f" 2>/dev/null |
		sed -n 's/^ *[0-9.]*[kMG]*B *([ 0-9.]*%): *\([0-9]*\)s$/\1/p' | tr '\n' ' ')
	case "$ages" in "$e " | "$((e + 1)) ") ;; *) fail "$n: old_site's age labels '$ages', want $e or $((e + 1))" ;; esac
	# the lived range label names the bin
	"$GO" tool pprof -tags -focus=slow_site "$W" "$f" 2>/dev/null | grep -q "10ms-100ms" ||
		fail "$n: slow_site has no lived 10ms-100ms label"
done

# sampled: every site's in-use is all in its ages' samples, old or new
mkdir "$tmp/s"
HEAPPROFILE="$tmp/s/p" HEAP_PROFILE_FORMAT=pprof HEAP_PROFILE_SAMPLE_INTERVAL=64 \
	"$W" "$tmp/s/served.pb.gz" >"$tmp/s.out" 2>"$tmp/s.err" || fail "sampled: exited $?: $(cat "$tmp/s.err")"
f="$tmp/s/p.0001.pb.gz"
for site in old_site old_big; do
	all=$(flat inuse_space "$f" $site)
	[ "$all" -gt 0 ] || fail "sampled: $site has no in-use bytes"
	eq "sampled: $site age=2s:" "$(tagged inuse_space age=2s: "$f" $site)" "$all"
done
all=$(flat inuse_space "$f" new_site)
[ "$all" -gt 0 ] || fail "sampled: new_site has no in-use bytes"
eq "sampled: new_site age=:1s" "$(tagged inuse_space age=:1s "$f" new_site)" "$all"
eq "sampled: new_site age=2s:" "$(tagged inuse_space age=2s: "$f" new_site)" 0
near "sampled: churn lifetime=:1ms" "$(tagged alloc_space lifetime=:1ms "$f" churn_site)" \
	"$(flat alloc_space "$f" churn_site)" 10
eq "sampled: churn lifetime=10ms:" "$(tagged alloc_space lifetime=10ms: "$f" churn_site)" 0
finish
