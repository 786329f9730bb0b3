#!/bin/sh
# A small sampling interval (R = 16 KiB): go tool pprof's unsampled
# estimates per site fall within sampling error (relative sigma is about
# sqrt(R / bytes): 3.6% for 12.8 MB, 2.9% for 20 MB; we allow 20%), lines
# are heap_v2/16384; google-pprof reads the same file and agrees.  The
# estimates as pprof makes them: not calibrated (prof_calibrate.sh).
. "$top_srcdir/tests/lib/prof_lib.sh"
need_go
HEAPPROFILE="$tmp/s" HEAP_PROFILE_CALIBRATE=0 HEAP_PROFILE_SAMPLE_INTERVAL=16384 "$W" sampled 2>"$tmp/err" || fail "prof_work sampled exited $?"
f="$tmp/s.0001.heap"
[ -f "$f" ] || { cat "$tmp/err"; fail "no $f"; finish; }
shape "$f"
head -1 "$f" | grep -q '@ heap_v2/16384$' || fail "header is not heap_v2/16384: $(head -1 "$f")"
near "site_small_many inuse_space" "$(flat inuse_space "$f" site_small_many)" 12800000 20
near "site_small_many alloc_objects" "$(flat alloc_objects "$f" site_small_many)" 200000 20
near "site_big_freed alloc_space" "$(flat alloc_space "$f" site_big_freed)" 20000000 20
near "site_big_freed alloc_objects" "$(flat alloc_objects "$f" site_big_freed)" 100 20
eq "site_big_freed inuse_space" "$(flat inuse_space "$f" site_big_freed)" 0
near "site_mixed alloc_space" "$(flat alloc_space "$f" site_mixed)" 278528000 20
near "site_mixed alloc_objects" "$(flat alloc_objects "$f" site_mixed)" 8000 20
# one line per size: site_mixed's 4 KiB and 64 KiB objects are not mixed
n=$(awk '/^$/ { exit } NR > 1 { print $4 / 1 " " $5 / 1 }' "$f" | awk '$1 > 0 { s = $2 / $1; if (s > 4000 && s < 70000) print s }' |
	awk '{ if ($1 != 4096 && $1 != 65536 && $1 != 200000) bad++ } END { print bad + 0 }')
eq "lines mixing object sizes" "$n" 0
if [ -n "$GOOGLE_PPROF" ] && [ -x "$GOOGLE_PPROF" ]; then
	mb=$("$GOOGLE_PPROF" --text --inuse_space "$W" "$f" 2>/dev/null | awk '$NF == "site_small_many" { print $1 }')
	near "google-pprof site_small_many MB" "$mb" 12.2 20
fi
finish
