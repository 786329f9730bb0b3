#!/bin/sh
# Number and numbering of automatic dumps for a known pattern (100 blocks of
# 10 KiB), as gperftools makes them; the exit dump; _exit writes no dump.
# Every run also writes its dump log, p.log (tests/integration/prof_log.sh).
. "$top_srcdir/tests/lib/prof_lib.sh"

# run NAME ARGS... — fresh dir, prints the dump lines of stderr
run() {
	name=$1; shift
	rm -rf "$tmp/$name"; mkdir "$tmp/$name"
	HEAPPROFILE="$tmp/$name/p" "$W" "$@" 2>"$tmp/$name.err" || fail "$name: prof_work $* exited $?"
}
files() { lsd "$tmp/$1" | tr '\n' ' '; }
reasons() { grep -c "^Dumping heap profile to $tmp/$1/p\.[0-9]*\.heap ($2" "$tmp/$1.err"; }
nums() { # expected file list p.0001.heap .. p.000N.heap and the log
	i=1; while [ "$i" -le "$1" ]; do printf 'p.%04d.heap ' "$i"; i=$((i + 1)); done
	printf 'p.log '
}

# allocation interval, default sampling: 1 024 000 bytes / 102 400 = 10
HEAP_PROFILE_ALLOCATION_INTERVAL=102400 run alloc pattern 100 10240 free
eq "allocation interval: files" "$(files alloc)" "$(nums 11)"
eq "allocation interval: reasons" "$(reasons alloc '[0-9]* MB allocated cumulatively, [0-9]* MB currently in use)')" 10
eq "allocation interval: exit dump" "$(reasons alloc 'Exiting, ')" 1

# the same unpaced: prof_work waits for no dump (tests/lib/prof_util.h), so
# crossings come while the helper thread is still to write the last one and
# fold into it; the numbers stay contiguous and every crossing is counted
# once, in a dump line of its own or in the count of the one it folded into
PROF_RUSH=1 HEAP_PROFILE_ALLOCATION_INTERVAL=102400 run rush pattern 100 10240 free
n=$(lsd "$tmp/rush" | grep -c '\.heap$')
eq "unpaced: files" "$(files rush)" "$(nums "$n")"
thr=$(reasons rush '[0-9]* MB allocated cumulatively, [0-9]* MB currently in use')
folded=$(sed -n 's/^Dumping .*; \([0-9]*\) crossings\{0,1\} folded)$/\1/p' "$tmp/rush.err" |
	awk '{ s += $1 } END { print s + 0 }')
eq "unpaced: crossings dumped or folded" "$((thr + folded))" 10
eq "unpaced: exit dump" "$(grep -c "^Dumping heap profile to $tmp/rush/p\.[0-9]*\.heap (Exiting, [0-9]* [a-zA-Z]* in use)$" "$tmp/rush.err")" 1
eq "unpaced: log lines" "$(grep -vc '^#' "$tmp/rush/p.log")" "$n"

# an API dump writes a queued threshold dump first, so the numbers stay in
# order (restart: 10 KB at a 1000-byte interval, dump, stop, start, the
# same again, exit)
PROF_RUSH=1 HEAP_PROFILE_ALLOCATION_INTERVAL=1000 run apirush restart
n=$(lsd "$tmp/apirush" | grep -c '\.heap$')
eq "queued before the API's: files" "$(files apirush)" "$(nums "$n")"
eq "queued before the API's: order" "$(sed -n "s|^Dumping heap profile to $tmp/apirush/p\.[0-9]*\.heap (||p" \
	"$tmp/apirush.err" | sed 's/^[0-9]* MB allocated cumulatively.*/alloc/; s/^Exiting.*/Exiting/; s/)$//' |
	uniq | tr '\n' ' ')" "alloc first session alloc second session Exiting "

# same with R = 1 and with 10 KiB suffix syntax
HEAP_PROFILE_SAMPLE_INTERVAL=1 HEAP_PROFILE_ALLOCATION_INTERVAL=100K run alloc1 pattern 100 10240 free
eq "allocation interval R=1: files" "$(files alloc1)" "$(nums 11)"

# in-use interval: dumps when in use passes the last high-water mark by
# 100 000: after blocks 10, 20, ..., 100
HEAP_PROFILE_INUSE_INTERVAL=100000 run inuse pattern 100 10240 keep
eq "in-use interval: files" "$(files inuse)" "$(nums 11)"
eq "in-use interval: reasons" "$(reasons inuse '[0-9]* MB currently in use)')" 10

# deallocation interval (allocation and in-use off): 10 dumps while freeing
HEAP_PROFILE_SAMPLE_INTERVAL=1 HEAP_PROFILE_DEALLOCATION_INTERVAL=100000 HEAP_PROFILE_ALLOCATION_INTERVAL=0 \
	HEAP_PROFILE_INUSE_INTERVAL=0 run dealloc pattern 100 10240 keepfree
eq "deallocation interval: files" "$(files dealloc)" "$(nums 11)"
eq "deallocation interval: reasons" "$(reasons dealloc '[0-9]* MB freed cumulatively, [0-9]* MB currently in use)')" 10

# everything off but the exit dump
HEAP_PROFILE_ALLOCATION_INTERVAL=0 HEAP_PROFILE_INUSE_INTERVAL=0 run none pattern 1000 10240 keepfree
eq "no interval: files" "$(files none)" "$(nums 1)"

# exit() dumps, _exit() does not
run exit exit
eq "exit(): files" "$(files exit)" "$(nums 1)"
# 10 blocks of 1000 bytes: 10 x 1024 allocated (class) bytes by default,
# 10 x 1000 requested bytes in compatibility mode
grep -q "(Exiting, 10 kB in use)" "$tmp/exit.err" || fail "exit reason: $(cat "$tmp/exit.err")"
HEAP_PROFILE_EXACT_TOTALS=1 run exitc exit
grep -q "(Exiting, 9 kB in use)" "$tmp/exitc.err" || fail "compat exit reason: $(cat "$tmp/exitc.err")"
run _exit _exit
eq "_exit(): files" "$(files _exit)" "$(nums 0)"
eq "_exit(): log lines" "$(grep -vc '^#' "$tmp/_exit/p.log")" 0
finish
