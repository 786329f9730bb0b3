#!/bin/sh
# HEAP_PROFILE_RSS_INTERVAL: the helper thread (polling every 100 ms) dumps
# when the resident set grew by more than N since the last RSS dump, the
# first at start RSS + N.  prof_work rss touches 24 MiB of fresh pages per
# step and sleeps 800 ms (8 polls) after each.  A poll may land in the
# middle of a step (on a loaded machine touching 24 MiB can outlast a poll
# period), so the intervals are chosen for counts that do not depend on
# where: with N = 60M over six steps (144 MiB) the first dump comes at
# 60-72 MiB of growth, the second more than 60 MiB after that (by 144 at
# the latest), a third would need more than 180.
. "$top_srcdir/tests/lib/prof_lib.sh"

# count WHAT ERRFILE REGEX WANT — exact number of stderr lines, the whole
# stderr shown when it differs
count() {
	n=$(grep -c "$3" "$2")
	[ "$n" = "$4" ] || fail "$1: got $n, want $4: $(cat "$2")"
}

# other dumps off: the file list is the RSS dumps and the exit dump
export HEAP_PROFILE_INUSE_INTERVAL=0 HEAP_PROFILE_OOM_FRACTION=0

mkdir "$tmp/a"
HEAPPROFILE="$tmp/a/p" HEAP_PROFILE_RSS_INTERVAL=60M "$W" rss 6 24 800 2>"$tmp/a.err" ||
	fail "rss exited $?"
count "RSS dumps, 24 MiB steps over 60M" "$tmp/a.err" \
	"^Dumping heap profile to $tmp/a/p\.000[12]\.heap (RSS [0-9]* MB, grew [0-9]* MB)$" 2
eq "files" "$(lsd "$tmp/a" | tr '\n' ' ')" "p.0001.heap p.0002.heap p.0003.heap p.log "
grep -q "^Dumping heap profile to $tmp/a/p\.0003\.heap (Exiting" "$tmp/a.err" || fail "no exit dump: $(cat "$tmp/a.err")"
# each dump grew by more than N (and at most a step more, plus noise: the
# poll after the step that crossed sees it), and its RSS is the previous
# one plus that growth
sed -n 's/.*(RSS \([0-9]*\) MB, grew \([0-9]*\) MB)$/\1 \2/p' "$tmp/a.err" |
	awk '{ if ($2 < 60 || $2 > 86 || (NR > 1 && $1 - p != $2 && $1 - p != $2 + 1)) bad = 1; p = $1 }
	END { exit bad }' || fail "RSS/grew values: $(cat "$tmp/a.err")"
shape "$tmp/a/p.0002.heap"

# 72 MiB in all over N = 100M: none
mkdir "$tmp/b"
HEAPPROFILE="$tmp/b/p" HEAP_PROFILE_RSS_INTERVAL=100M "$W" rss 3 24 800 2>"$tmp/b.err" ||
	fail "rss exited $?"
count "RSS dumps, 72 MiB over 100M" "$tmp/b.err" "(RSS " 0
eq "files" "$(lsd "$tmp/b" | tr '\n' ' ')" "p.0001.heap p.log "

# threads of a profiled "prof_work sleep": the helper runs only when asked
# for: RSS dumps, or the default mode's threshold dumps (the allocation and
# in-use intervals are on by default), which it writes.  Counted once the
# program is in its sleep (it creates its READY file then; a busy or
# emulated machine may take seconds to get there).  threads VAR=VALUE...
# (none: unprofiled)
threads() {
	rm -f "$tmp/ready"
	if [ $# -eq 0 ]; then set -- -u HEAPPROFILE; else set -- HEAPPROFILE="$tmp/t" "$@"; fi
	env "$@" "$W" sleep 1500 "$tmp/ready" 2>/dev/null & pid=$!
	wait_ready "$tmp/ready" $pid
	ls "/proc/$pid/task" | wc -l | tr -d ' '
	wait "$pid" || fail "sleep exited $?"
}
# under qemu-user the process holds the emulator's thread(s) too: as many
# as an unprofiled "prof_work sleep" has beyond its one are added
emu=0
if [ -n "${HA_EMULATED:-}" ]; then
	emu=$(($(threads) - 1))
	echo "thread counts: $HA_EMULATED adds $emu of its own"
fi
off="HEAP_PROFILE_ALLOCATION_INTERVAL=0 HEAP_PROFILE_INUSE_INTERVAL=0"
eq "threads with RSS dumps" "$(threads $off HEAP_PROFILE_RSS_INTERVAL=1G)" $((2 + emu))
eq "threads without" "$(threads $off)" $((1 + emu))
eq "threads for threshold dumps" "$(threads HEAP_PROFILE_RSS_INTERVAL=0)" $((2 + emu))
eq "threads for the deallocation interval" "$(threads $off HEAP_PROFILE_DEALLOCATION_INTERVAL=1G)" $((2 + emu))
eq "threads in compatibility mode" "$(threads HEAP_PROFILE_EXACT_TOTALS=1)" $((1 + emu))

# 0: none
mkdir "$tmp/c"
HEAPPROFILE="$tmp/c/p" HEAP_PROFILE_RSS_INTERVAL=0 "$W" rss 2 24 800 2>"$tmp/c.err" || fail "rss exited $?"
eq "RSS dumps with 0" "$(grep -c '(RSS ' "$tmp/c.err")" 0

# junk: one line naming it, and the default (off)
mkdir "$tmp/d"
HEAPPROFILE="$tmp/d/p" HEAP_PROFILE_RSS_INTERVAL=lots "$W" rss 1 24 800 2>"$tmp/d.err" || fail "rss exited $?"
eq "junk line" "$(grep -c '^heapalloc: HEAP_PROFILE_RSS_INTERVAL="lots" is not a size in bytes; using 0$' "$tmp/d.err")" 1
eq "RSS dumps with junk" "$(grep -c '(RSS ' "$tmp/d.err")" 0
finish
