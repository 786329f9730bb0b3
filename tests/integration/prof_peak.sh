#!/bin/sh
# PREFIX.peak.heap: the profile at the highest in-use total, written with the
# dumps.  Recording every allocation, 40 MiB allocated at peak_site_a and
# freed before 5 MiB at peak_site_b: the peak shows exactly the 40 MiB and
# nothing of b, the exit dump the reverse; with the default step too (the
# copy is taken at the turn, before the first free); both formats; a fork child's own name; 0 turns it off;
# a stale peak file of an earlier run goes at start.
PROF_WORK="$top_builddir/tests/integration/prof_peak"
. "$top_srcdir/tests/lib/prof_lib.sh"
need_go
MIB=1048576

mkdir "$tmp/a"
HEAPPROFILE="$tmp/a/p" HEAP_PROFILE_SAMPLE_INTERVAL=1 HEAP_PROFILE_PEAK_INTERVAL=1 \
	"$W" 40 5 2>"$tmp/a.err" || fail "run exited $?"
eq "files" "$(ls "$tmp/a" | grep -Ev '\.(log|stats)$' | tr '\n' ' ')" "p.0001.heap p.peak.heap "
shape "$tmp/a/p.peak.heap"
eq "peak: a bytes" "$(flat inuse_space "$tmp/a/p.peak.heap" peak_site_a)" $((40 * MIB))
eq "peak: a objects" "$(flat inuse_objects "$tmp/a/p.peak.heap" peak_site_a)" 40
eq "peak: b bytes" "$(flat inuse_space "$tmp/a/p.peak.heap" peak_site_b)" 0
eq "exit: a bytes" "$(flat inuse_space "$tmp/a/p.0001.heap" peak_site_a)" 0
eq "exit: b bytes" "$(flat inuse_space "$tmp/a/p.0001.heap" peak_site_b)" $((5 * MIB))
eq "exit: a allocated" "$(flat alloc_space "$tmp/a/p.0001.heap" peak_site_a)" $((40 * MIB))
grep -qx "Writing the peak heap profile to $tmp/a/p.peak.heap (40 MB in use at the peak)" "$tmp/a.err" ||
	fail "no peak line on stderr: $(cat "$tmp/a.err")"

# the default step: the copy at the turn holds all 40 MiB
mkdir "$tmp/d"
HEAPPROFILE="$tmp/d/p" HEAP_PROFILE_SAMPLE_INTERVAL=1 "$W" 40 5 2>"$tmp/d.err" ||
	fail "default step: exited $?"
eq "default step: a bytes" "$(flat inuse_space "$tmp/d/p.peak.heap" peak_site_a)" $((40 * MIB))

# both formats: the pprof file holds the same peak
mkdir "$tmp/b"
HEAPPROFILE="$tmp/b/p" HEAP_PROFILE_SAMPLE_INTERVAL=1 HEAP_PROFILE_PEAK_INTERVAL=1 \
	HEAP_PROFILE_FORMAT=both "$W" 40 5 2>"$tmp/b.err" || fail "both: exited $?"
eq "both: files" "$(ls "$tmp/b" | grep -Ev '\.(log|stats)$' | tr '\n' ' ')" \
	"p.0001.heap p.0001.pb.gz p.peak.heap p.peak.pb.gz "
eq "both: pprof peak a" "$(flat inuse_space "$tmp/b/p.peak.pb.gz" peak_site_a)" $((40 * MIB))

# a fork child peaks: its own PREFIX_PID.peak.heap; the parent has none
# (not under qemu-user 7.2, which aborts in a fork of a threaded process)
if [ -n "${HA_EMULATED:-}" ]; then
	echo "fork case not run: $HA_EMULATED aborts in a fork of a threaded process"
else
mkdir "$tmp/f"
HEAPPROFILE="$tmp/f/p" HEAP_PROFILE_SAMPLE_INTERVAL=1 HEAP_PROFILE_PEAK_INTERVAL=1 \
	"$W" fork 40 5 2>"$tmp/f.err" || fail "fork: exited $?"
kid=$(ls "$tmp/f" | sed -n 's/^p_\([0-9]*\)\.peak\.heap$/\1/p')
[ -n "$kid" ] || fail "fork: no child peak file: $(ls "$tmp/f" | tr '\n' ' ')"
[ -n "$kid" ] && eq "fork: child peak a" "$(flat inuse_space "$tmp/f/p_$kid.peak.heap" peak_site_a)" $((40 * MIB))
[ -e "$tmp/f/p.peak.heap" ] && fail "fork: the parent wrote a peak it never had"
fi

# header FILE — the in-use bytes of a text profile's header (raw sums)
header() { awk 'NR == 1 { print $4; exit }' "$1"; }
# logpeak DIR — "HIGH COPY" from the dump log's last peak line
logpeak() { sed -n 's/^# peak: \([0-9]*\) bytes in use at the peak; p\.peak\.heap holds \([0-9]*\)$/\1 \2/p' "$1/p.log" | tail -1; }

# The copy is taken at the turn: climbing to exactly N bytes (nothing else
# allocated) and freeing, with every allocation recorded the peak profile
# holds N exactly, in several shapes: one climb of small blocks; three
# rising teeth of 1 MiB and of 4 KiB blocks (each dump on the way, every
# 8 MiB of growth, below the peak); threads that free at once from the top
# (their books, and so the message, within 1%: other threads' caches are
# counted as of their last count).
N=$((48 * MIB))
for run in "climb $N 4096" "saw $N 1048576" "saw $N 4096" "threads 2 $N 65536" "threads 4 $N 4096"; do
	d="$tmp/t$(echo "$run" | tr -cd 'a-z0-9')"
	mkdir "$d"
	HEAPPROFILE="$d/p" HEAP_PROFILE_SAMPLE_INTERVAL=1 HEAP_PROFILE_INUSE_INTERVAL=8M \
		"$W" $run 2>"$d.err" || fail "$run: exited $?"
	eq "$run: climb_site at the peak" "$(flat inuse_space "$d/p.peak.heap" climb_site)" $N
	case $run in
	threads*)
		# the books count other threads' caches as of their last count
		set -- $(logpeak "$d")
		near "$run: the dump log's peak" "${1:-}" $N 1 ;;
	*)
		eq "$run: the peak profile's total" "$(header "$d/p.peak.heap")" $N
		eq "$run: the dump log's peak" "$(logpeak "$d")" "$N $N"
		grep -qx "Writing the peak heap profile to $d/p.peak.heap (48 MB in use at the peak)" "$d.err" ||
			fail "$run: peak line: $(grep peak "$d.err")" ;;
	esac
	peak=$(header "$d/p.peak.heap")
	for f in "$d"/p.[0-9]*.heap; do
		[ "$(header "$f")" -le "$peak" ] || fail "$run: $f holds $(header "$f"), above the peak's $peak"
	done
done
"$HEAPALLOC_CMD" check "$tmp/tsaw"*1048576/p.log >"$tmp/log.check" 2>&1 ||
	fail "the dump log with its peak line: $(cat "$tmp/log.check")"
# four crossings on the way: each a dump, or folded into the next one while
# a dump was still queued (a busy machine): the reason says how many
folded=$(sed -n 's/^Dumping heap profile to .*; \([0-9]*\) crossings* folded)$/\1/p' "$tmp/tsaw"*1048576.err |
	awk '{ n += $1 } END { print n + 0 }')
[ $(($(ls "$tmp/tsaw"*1048576/p.[0-9]*.heap | wc -l) + folded)) -ge 4 ] ||
	fail "saw: dumps on the way: $(ls "$tmp/tsaw"*1048576 | tr '\n' ' '), $folded crossings folded"

# compatibility mode (every free goes its way): the same, four threads
mkdir "$tmp/x"
HEAPPROFILE="$tmp/x/p" HEAP_PROFILE_EXACT_TOTALS=1 HEAP_PROFILE_SAMPLE_INTERVAL=1 \
	"$W" threads 4 $N 4096 2>"$tmp/x.err" || fail "compat: exited $?"
eq "compat: climb_site at the peak" "$(flat inuse_space "$tmp/x/p.peak.heap" climb_site)" $N

# sampled (the default interval): the copy's in use is within 1% of the
# true peak, which the message and the log give from the books
mkdir "$tmp/s"
HEAPPROFILE="$tmp/s/p" "$W" saw $((96 * MIB)) 4096 2>"$tmp/s.err" || fail "sampled: exited $?"
set -- $(logpeak "$tmp/s")
near "sampled: the true peak" "${1:-}" $((96 * MIB)) 1
near "sampled: the copy's in use" "${2:-}" $((96 * MIB)) 1
grep -qx "Writing the peak heap profile to $tmp/s/p.peak.heap ($(( ${1:-0} >> 20 )) MB in use at the peak)" "$tmp/s.err" ||
	fail "sampled: peak line: $(grep peak "$tmp/s.err")"

# 0: no peak profile; a stale one from an earlier run is removed at start
mkdir "$tmp/z"
echo stale >"$tmp/z/p.peak.heap"
HEAPPROFILE="$tmp/z/p" HEAP_PROFILE_SAMPLE_INTERVAL=1 HEAP_PROFILE_PEAK_INTERVAL=0 \
	"$W" 40 5 2>"$tmp/z.err" || fail "off: exited $?"
eq "off: files" "$(ls "$tmp/z" | grep -Ev '\.(log|stats)$' | tr '\n' ' ')" "p.0001.heap "
grep -q 'peak' "$tmp/z.err" && fail "off: a peak line: $(cat "$tmp/z.err")"
finish
