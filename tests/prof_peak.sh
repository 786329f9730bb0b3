#!/bin/sh
# PREFIX.peak.heap: the profile at the highest in-use total, written with the
# dumps.  Recording every allocation, 40 MiB allocated at peak_site_a and
# freed before 5 MiB at peak_site_b: the peak shows exactly the 40 MiB and
# nothing of b, the exit dump the reverse; with the default step too (the
# copy is taken at the turn, before the first free); both formats; a fork child's own name; 0 turns it off;
# a stale peak file of an earlier run goes at start.
PROF_WORK="$top_builddir/tests/prof_peak"
. "$top_srcdir/tests/prof_lib.sh"
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
mkdir "$tmp/f"
HEAPPROFILE="$tmp/f/p" HEAP_PROFILE_SAMPLE_INTERVAL=1 HEAP_PROFILE_PEAK_INTERVAL=1 \
	"$W" fork 40 5 2>"$tmp/f.err" || fail "fork: exited $?"
kid=$(ls "$tmp/f" | sed -n 's/^p_\([0-9]*\)\.peak\.heap$/\1/p')
[ -n "$kid" ] || fail "fork: no child peak file: $(ls "$tmp/f" | tr '\n' ' ')"
[ -n "$kid" ] && eq "fork: child peak a" "$(flat inuse_space "$tmp/f/p_$kid.peak.heap" peak_site_a)" $((40 * MIB))
[ -e "$tmp/f/p.peak.heap" ] && fail "fork: the parent wrote a peak it never had"

# 0: no peak profile; a stale one from an earlier run is removed at start
mkdir "$tmp/z"
echo stale >"$tmp/z/p.peak.heap"
HEAPPROFILE="$tmp/z/p" HEAP_PROFILE_SAMPLE_INTERVAL=1 HEAP_PROFILE_PEAK_INTERVAL=0 \
	"$W" 40 5 2>"$tmp/z.err" || fail "off: exited $?"
eq "off: files" "$(ls "$tmp/z" | grep -Ev '\.(log|stats)$' | tr '\n' ' ')" "p.0001.heap "
grep -q 'peak' "$tmp/z.err" && fail "off: a peak line: $(cat "$tmp/z.err")"
finish
