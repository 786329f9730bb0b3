#!/bin/sh
# HEAP_PROFILE_RSS_INTERVAL: the helper thread (polling every 100 ms) dumps
# when the resident set grew by more than N since the last RSS dump, the
# first at start RSS + N.  prof_work rss touches fresh pages in steps and
# sleeps 300 ms after each, so every step is seen on its own.
. "$top_srcdir/tests/prof_lib.sh"

# other dumps off: the file list is the RSS dumps and the exit dump
export HEAP_PROFILE_INUSE_INTERVAL=0 HEAP_PROFILE_OOM_FRACTION=0

# steps of 24 MiB over N = 16M: every step dumps
mkdir "$tmp/a"
HEAPPROFILE="$tmp/a/p" HEAP_PROFILE_RSS_INTERVAL=16M "$W" rss 4 24 300 2>"$tmp/a.err" ||
	fail "rss exited $?"
eq "RSS dumps, 24 MiB steps over 16M" \
	"$(grep -c "^Dumping heap profile to $tmp/a/p\.000[1-4]\.heap (RSS [0-9]* MB, grew 2[45] MB)$" "$tmp/a.err")" 4
eq "files" "$(ls "$tmp/a" | tr '\n' ' ')" "p.0001.heap p.0002.heap p.0003.heap p.0004.heap p.0005.heap "
grep -q "^Dumping heap profile to $tmp/a/p\.0005\.heap (Exiting" "$tmp/a.err" || fail "no exit dump: $(cat "$tmp/a.err")"
# the RSS figures climb by a step each time
grep -o '(RSS [0-9]* MB' "$tmp/a.err" | awk '{ r = $2; if (NR > 1 && (r - p < 23 || r - p > 26)) bad = 1; p = r }
	END { exit bad }' || fail "RSS values do not climb by 24 MB: $(cat "$tmp/a.err")"
shape "$tmp/a/p.0002.heap"

# over N = 40M: the growth since the last RSS dump counts, so steps 2, 4, 6
mkdir "$tmp/b"
HEAPPROFILE="$tmp/b/p" HEAP_PROFILE_RSS_INTERVAL=40M "$W" rss 6 24 300 2>"$tmp/b.err" ||
	fail "rss exited $?"
eq "RSS dumps, 24 MiB steps over 40M" \
	"$(grep -c "^Dumping heap profile to $tmp/b/p\.000[1-3]\.heap (RSS [0-9]* MB, grew 4[89] MB)$" "$tmp/b.err")" 3
eq "files" "$(ls "$tmp/b" | tr '\n' ' ')" "p.0001.heap p.0002.heap p.0003.heap p.0004.heap "

# threads of a profiled "prof_work sleep": the helper runs only when asked for
threads() {
	"$W" sleep 1500 2>/dev/null & pid=$!
	sleep 0.7
	ls "/proc/$pid/task" | wc -l | tr -d ' '
	wait "$pid" || fail "sleep exited $?"
}
eq "threads with RSS dumps" "$(HEAPPROFILE="$tmp/t" HEAP_PROFILE_RSS_INTERVAL=1G threads)" 2
eq "threads without" "$(HEAPPROFILE="$tmp/t" threads)" 1

# 0: none
mkdir "$tmp/c"
HEAPPROFILE="$tmp/c/p" HEAP_PROFILE_RSS_INTERVAL=0 "$W" rss 2 24 300 2>"$tmp/c.err" || fail "rss exited $?"
eq "RSS dumps with 0" "$(grep -c '(RSS ' "$tmp/c.err")" 0

# junk: one line naming it, and the default (off)
mkdir "$tmp/d"
HEAPPROFILE="$tmp/d/p" HEAP_PROFILE_RSS_INTERVAL=lots "$W" rss 1 24 300 2>"$tmp/d.err" || fail "rss exited $?"
eq "junk line" "$(grep -c '^heapalloc: HEAP_PROFILE_RSS_INTERVAL="lots" is not a size in bytes; using 0$' "$tmp/d.err")" 1
eq "RSS dumps with junk" "$(grep -c '(RSS ' "$tmp/d.err")" 0
finish
