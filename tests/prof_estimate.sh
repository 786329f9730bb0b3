#!/bin/sh
# HEAP_PROFILE_EXACT_TOTALS=0: dump totals estimated from the samples.
# - At R = 1 every allocation is a sample, so the ground truth of
#   prof_truth.sh holds exactly, and prof_sampled.sh's estimates per site
#   hold at R = 16 KiB: the profile lines do not depend on the mode.
# - The totals themselves: 40 MB kept in 1000-byte blocks, R = 16 KiB
#   (~2400 samples, sigma ~2%): the exit line's in-use figure is within 10%
#   of the exact one; after allocating and freeing 60 MB it is near 0.
# - A bad value gets one line naming it and the default (exact) is used.
. "$top_srcdir/tests/prof_lib.sh"
for d in prof_truth prof_sampled; do
	PROF_ESTIMATE=1 ${SHELL:-/bin/sh} "$top_srcdir/tests/$d.sh" >"$tmp/$d.out" 2>&1
	rc=$?
	case $rc in
	0) ;;
	77) echo "SKIP: $d: $(tail -1 "$tmp/$d.out")"; exit 77 ;;
	*) sed 's/^/  /' "$tmp/$d.out" | head -20; fail "$d.sh with HEAP_PROFILE_EXACT_TOTALS=0 exited $rc" ;;
	esac
done
# the "Exiting, N UNIT in use" figure of a run's stderr, as "N UNIT"
in_use() { sed -n 's/.*(Exiting, \([0-9]*\) \([a-zA-Z]*\) in use)$/\1 \2/p' "$1" | tail -1; }
HEAPPROFILE="$tmp/x" HEAP_PROFILE_SAMPLE_INTERVAL=16384 \
	"$W" pattern 40000 1000 keep 2>"$tmp/x.err" || fail "prof_work pattern keep (exact) exited $?"
eq "exact in use at exit (40 MB kept)" "$(in_use "$tmp/x.err")" "38 MB"
HEAPPROFILE="$tmp/k" HEAP_PROFILE_EXACT_TOTALS=0 HEAP_PROFILE_SAMPLE_INTERVAL=16384 \
	"$W" pattern 40000 1000 keep 2>"$tmp/k.err" || fail "prof_work pattern keep exited $?"
got=$(in_use "$tmp/k.err")
case "$got" in
*" MB") near "estimated MB in use at exit (40 MB kept)" "${got% MB}" 38 10 ;;
*) fail "estimated in use at exit (40 MB kept): got '$got', want about 38 MB" ;;
esac
HEAPPROFILE="$tmp/f" HEAP_PROFILE_EXACT_TOTALS=0 HEAP_PROFILE_SAMPLE_INTERVAL=16384 \
	"$W" pattern 60000 1000 keepfree 2>"$tmp/f.err" || fail "prof_work pattern keepfree exited $?"
got=$(in_use "$tmp/f.err")
case "$got" in
*" kB" | *" bytes" | "0 MB" | "1 MB" | "2 MB") ;;
*) fail "estimated in use after freeing everything: got '$got', want at most 2 MB" ;;
esac
HEAPPROFILE="$tmp/b" HEAP_PROFILE_EXACT_TOTALS=maybe "$W" pattern 10 100 keep 2>"$tmp/b.err" ||
	fail "prof_work with a junk HEAP_PROFILE_EXACT_TOTALS exited $?"
eq "lines about HEAP_PROFILE_EXACT_TOTALS=maybe" "$(grep -c 'HEAP_PROFILE_EXACT_TOTALS' "$tmp/b.err")" 1
finish
