#!/bin/sh
# HEAP_PROFILE_OOM_FRACTION (default 0.9): one dump when memory use reaches
# that fraction of a limit, before the process dies of it.  RLIMIT_AS set
# here with ulimit -v (compared with the address space); a cgroup v2 child
# group with memory.max when this machine lets the test make one.
. "$top_srcdir/tests/lib/emu.sh"
emu_skip "RLIMIT_AS caps qemu-user's own reservations, and the process's thread count includes qemu-user's"
. "$top_srcdir/tests/lib/prof_lib.sh"
export HEAP_PROFILE_INUSE_INTERVAL=0   # the file lists below: no other dumps
LIM_KB=400000                          # 390 MB of address space
LIM_MB=$((LIM_KB / 1024))

# pct_in FILE LO HI — the one "NN% of" of FILE's pre-OOM line lies in LO..HI
pct_in() {
	p=$(sed -n 's/.* \([0-9]*\)% of .*/\1/p' "$1")
	[ -n "$p" ] && [ "$p" -ge "$2" ] && [ "$p" -le "$3" ] || fail "$1: percent '$p' not in $2..$3: $(cat "$1")"
}

# grow by 8 MiB every 50 ms until malloc fails, then hold it 500 ms: the
# 100 ms poll sees it between 90% and the limit, once
mkdir "$tmp/a"
(ulimit -v $LIM_KB && HEAPPROFILE="$tmp/a/p" exec "$W" grow 8 50) 2>"$tmp/a.err" || fail "grow exited $?"
eq "pre-OOM dumps" "$(grep -c "^Dumping heap profile to $tmp/a/p\.0001\.heap (address space [0-9]* MB, [0-9]*% of RLIMIT_AS $LIM_MB MB)$" "$tmp/a.err")" 1
eq "RLIMIT_AS lines" "$(grep -c 'RLIMIT_AS' "$tmp/a.err")" 1
pct_in "$tmp/a.err" 90 100
eq "files" "$(lsd "$tmp/a" | tr '\n' ' ')" "p.0001.heap p.0002.heap p.log "
grep -q "^Dumping heap profile to $tmp/a/p\.0002\.heap (Exiting" "$tmp/a.err" || fail "no exit dump: $(cat "$tmp/a.err")"
shape "$tmp/a/p.0001.heap"

# 0 disables it
mkdir "$tmp/b"
(ulimit -v $LIM_KB && HEAPPROFILE="$tmp/b/p" HEAP_PROFILE_OOM_FRACTION=0 exec "$W" grow 8 50) 2>"$tmp/b.err" ||
	fail "grow exited $?"
eq "pre-OOM dumps with 0" "$(grep -c 'RLIMIT_AS' "$tmp/b.err")" 0
eq "files with 0" "$(lsd "$tmp/b" | tr '\n' ' ')" "p.0001.heap p.log "

# a percentage: at half the limit, still once
mkdir "$tmp/c"
(ulimit -v $LIM_KB && HEAPPROFILE="$tmp/c/p" HEAP_PROFILE_OOM_FRACTION=50% exec "$W" grow 8 50) 2>"$tmp/c.err" ||
	fail "grow exited $?"
eq "pre-OOM dumps at 50%" "$(grep -c 'RLIMIT_AS' "$tmp/c.err")" 1
pct_in "$tmp/c.err" 50 89

# junk: one line, then the default
mkdir "$tmp/d"
(ulimit -v $LIM_KB && HEAPPROFILE="$tmp/d/p" HEAP_PROFILE_OOM_FRACTION=90 exec "$W" grow 8 50) 2>"$tmp/d.err" ||
	fail "grow exited $?"
eq "junk line" "$(grep -c '^heapalloc: HEAP_PROFILE_OOM_FRACTION="90" is not a fraction such as 0.9 or 90%; using 0.9$' "$tmp/d.err")" 1
eq "pre-OOM dumps after junk" "$(grep -c 'RLIMIT_AS' "$tmp/d.err")" 1
pct_in "$tmp/d.err" 90 100

# the heap exhausted (1 MiB, then 4 KiB blocks until malloc fails) and held:
# the dump at 99% needs nothing from it, in both formats (seen while filling,
# 99%, or once the address space is the whole limit, 100%)
mkdir "$tmp/e"
(ulimit -v $LIM_KB && HEAPPROFILE="$tmp/e/p" HEAP_PROFILE_OOM_FRACTION=0.99 HEAP_PROFILE_FORMAT=both \
	exec "$W" fill 600) 2>"$tmp/e.err" || fail "fill exited $?"
eq "pre-OOM dumps, heap exhausted" "$(grep -c "^Dumping heap profile to $tmp/e/p\.0001\.\(heap\|pb\.gz\) (address space [0-9]* MB, \(99\|100\)% of RLIMIT_AS $LIM_MB MB)$" "$tmp/e.err")" 2
eq "failures" "$(grep -c '^Failed' "$tmp/e.err")" 0
[ -s "$tmp/e/p.0001.heap" ] && shape "$tmp/e/p.0001.heap"
gzip -t "$tmp/e/p.0001.pb.gz" 2>/dev/null || fail "p.0001.pb.gz is not gzip"
[ -n "$GO" ] && [ -x "$GO" ] && { "$GO" tool pprof -top "$W" "$tmp/e/p.0001.pb.gz" >/dev/null 2>&1 ||
	fail "go pprof cannot read p.0001.pb.gz"; }

# the helper thread: started for a limit, not with the option at 0 (the
# threshold intervals off: their dumps would start it too, prof_rss.sh)
threads() {
	(ulimit -v $LIM_KB && HEAP_PROFILE_ALLOCATION_INTERVAL=0 HEAP_PROFILE_INUSE_INTERVAL=0 \
		exec "$W" sleep 1500) 2>/dev/null & pid=$!
	sleep 0.7
	ls "/proc/$pid/task" | wc -l | tr -d ' '
	wait "$pid" || fail "sleep exited $?"
}
eq "threads under RLIMIT_AS" "$(HEAPPROFILE="$tmp/t" threads)" 2
eq "threads under RLIMIT_AS, fraction 0" "$(HEAPPROFILE="$tmp/t" HEAP_PROFILE_OOM_FRACTION=0 threads)" 1

# cgroup v2: a child of our own group with memory.max 300M; the program
# stops itself at 280 MiB (95% with its own pages; held 500 ms) so the OOM
# killer never runs.  Anything missing: SKIP this part only.
cgroup_test() {
	root=/sys/fs/cgroup
	[ -f "$root/cgroup.controllers" ] || root=/sys/fs/cgroup/unified
	[ -f "$root/cgroup.controllers" ] || { why="no cgroup v2 hierarchy"; return; }
	own=$(sed -n 's/^0:://p' /proc/self/cgroup)
	parent="$root${own%/}"
	grep -qw memory "$parent/cgroup.subtree_control" 2>/dev/null ||
		{ why="memory controller not enabled below $parent"; return; }
	cg="$parent/heapalloc_prof_oom.$$"
	mkdir "$cg" 2>/dev/null || { why="cannot create a group in $parent"; return; }
	if ! echo 300M >"$cg/memory.max" 2>/dev/null; then
		rmdir "$cg"; why="cannot write $cg/memory.max"; return
	fi
	[ -f "$cg/memory.swap.max" ] && echo 0 >"$cg/memory.swap.max" 2>/dev/null
	mkdir "$tmp/g"
	HEAPPROFILE="$tmp/g/p" sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2" grow 8 50 280' sh "$cg" "$W" \
		2>"$tmp/g.err"
	rc=$?
	rmdir "$cg" 2>/dev/null
	grep -q "cgroup.procs" "$tmp/g.err" && { why="cannot move a process into $cg"; return; }
	why=""
	[ $rc -eq 0 ] || fail "grow in the cgroup exited $rc: $(cat "$tmp/g.err")"
	eq "cgroup pre-OOM dumps" "$(grep -c "^Dumping heap profile to $tmp/g/p\.0001\.heap (cgroup usage [0-9]* MB, [0-9]*% of the cgroup limit 300 MB)$" "$tmp/g.err")" 1
	eq "cgroup lines" "$(grep -c 'cgroup limit' "$tmp/g.err")" 1
	pct_in "$tmp/g.err" 90 99
}
why=""
cgroup_test
[ -z "$why" ] || echo "SKIP: cgroup: $why"
finish
