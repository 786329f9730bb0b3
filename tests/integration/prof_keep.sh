#!/bin/sh
# HEAP_PROFILE_KEEP=N: a process keeps its first dump and its newest N,
# removing each older one as a new one lands.  Only files this process
# wrote go: an earlier run's (also under a number this run failed to
# write), another process's and another format's stay.  A fork child keeps
# its own set and leaves the parent's alone.  The dump log keeps every
# line; junk gets one line and 0 (keep all).  A removed dump takes its
# .stats sidecar with it.
. "$top_srcdir/tests/lib/prof_lib.sh"
files() { lsd "$1" | tr '\n' ' '; }

# 11 dumps: 10 allocation-interval crossings and the exit dump
mkdir "$tmp/a"
HEAPPROFILE="$tmp/a/p" HEAP_PROFILE_ALLOCATION_INTERVAL=102400 HEAP_PROFILE_KEEP=3 \
	"$W" pattern 100 10240 free 2>"$tmp/a.err" || fail "pattern exited $?"
eq "keep 3 of 11" "$(files "$tmp/a")" "p.0001.heap p.0009.heap p.0010.heap p.0011.heap p.log "
eq "keep 3: stats go with their dumps" "$(ls "$tmp/a" | grep '\.stats$' | tr '\n' ' ')" \
	"p.0001.stats p.0009.stats p.0010.stats p.0011.stats "
eq "keep 3: log lines" "$(grep -vc '^#' "$tmp/a/p.log")" 11
eq "keep 3: dump lines" "$(grep -c '^Dumping heap profile' "$tmp/a.err")" 11

# other runs' and processes' files, with cleanup off; dump 2 cannot be
# written (a directory holds its temporary name), so the earlier run's
# p.0002.heap is not this run's to remove
mkdir "$tmp/b" "$tmp/b/p.0002.heap.tmp"
for n in p.0002.heap p.0002.pb.gz p.0015.heap p_77.0003.heap q.0004.heap p.0005.heap.old; do
	echo old >"$tmp/b/$n"
done
HEAPPROFILE="$tmp/b/p" HEAP_PROFILE_CLEANUP=f HEAP_PROFILE_ALLOCATION_INTERVAL=102400 HEAP_PROFILE_KEEP=3 \
	"$W" pattern 100 10240 free 2>"$tmp/b.err" || fail "pattern exited $?"
eq "dump 2 failed" "$(grep -c "^Failed dumping heap profile to $tmp/b/p.0002.heap:" "$tmp/b.err")" 1
eq "others untouched" "$(files "$tmp/b")" \
	"p.0001.heap p.0002.heap p.0002.heap.tmp p.0002.pb.gz p.0005.heap.old p.0009.heap p.0010.heap p.0011.heap p.0015.heap p.log p_77.0003.heap q.0004.heap "
for n in p.0002.heap p.0002.pb.gz p.0015.heap p_77.0003.heap q.0004.heap p.0005.heap.old; do
	eq "$n unchanged" "$(cat "$tmp/b/$n")" old
done

# a fork child: its own first + newest 2; the parent's files as they were
mkdir "$tmp/f"
HEAPPROFILE="$tmp/f/p" HEAP_PROFILE_KEEP=2 "$W" forkdumps 5 >"$tmp/f.out" 2>"$tmp/f.err" ||
	fail "forkdumps exited $?: $(cat "$tmp/f.err")"
c=$(sed -n 's/^child //p' "$tmp/f.out")
eq "root's files while the child ran" "$(sed -n 's/^root files after the child: //p' "$tmp/f.out")" "1 4 5"
eq "fork: files" "$(files "$tmp/f")" \
	"p.0001.heap p.0006.heap p.0007.heap p.log p_$c.0001.heap p_$c.0005.heap p_$c.0006.heap p_$c.log "

# KEEP=1 keeps the first and the last; 0 and junk keep all
mkdir "$tmp/o" "$tmp/z" "$tmp/j"
HEAPPROFILE="$tmp/o/p" HEAP_PROFILE_KEEP=1 "$W" forkdumps 3 >/dev/null 2>&1 || fail "keep 1 exited $?"
eq "keep 1: root files" "$(files "$tmp/o" | tr ' ' '\n' | grep '^p\.' | tr '\n' ' ')" "p.0001.heap p.0005.heap p.log "
HEAPPROFILE="$tmp/z/p" HEAP_PROFILE_KEEP=0 HEAP_PROFILE_ALLOCATION_INTERVAL=102400 \
	"$W" pattern 100 10240 free 2>/dev/null || fail "keep 0 exited $?"
eq "keep 0: all" "$(lsd "$tmp/z" | grep -c '\.heap$')" 11
HEAPPROFILE="$tmp/j/p" HEAP_PROFILE_KEEP=-2 HEAP_PROFILE_ALLOCATION_INTERVAL=102400 \
	"$W" pattern 100 10240 free 2>"$tmp/j.err" || fail "junk keep exited $?"
eq "junk keep: message" "$(grep -c '^heapalloc: HEAP_PROFILE_KEEP="-2" is not a whole number; using 0$' "$tmp/j.err")" 1
eq "junk keep: all" "$(lsd "$tmp/j" | grep -c '\.heap$')" 11
finish
