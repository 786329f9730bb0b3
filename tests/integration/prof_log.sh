#!/bin/sh
# PREFIX.log: one tab-separated line per dump under a two-line header —
# number, time, allocated, freed, in use (= allocated - freed), RSS, file,
# reason — in the order and with the reasons of the stderr lines; a new run
# starts a fresh log, a stop and start in one process carries it on; a fork
# child keeps PREFIX_PID.log; a log that cannot be written costs one stderr
# line and no dump.
. "$top_srcdir/tests/lib/prof_lib.sh"

# check NAME DIR ERRFILE — the log of DIR/p against the files and stderr
check() {
	log="$2/p.log"
	[ -f "$log" ] || { fail "$1: no $log"; return; }
	eq "$1: header" "$(head -2 "$log" | tail -1)" "$(printf '# seq\ttime\tallocated\tfreed\tin_use\trss\tfile\treason')"
	eq "$1: lines" "$(tail -n +3 "$log" | wc -l)" "$(ls "$2" | grep -c '\.heap$')"
	eq "$1: files in order" "$(tail -n +3 "$log" | cut -f7 | tr '\n' ' ')" "$(ls "$2" | grep '\.heap$' | sort | tr '\n' ' ')"
	eq "$1: reasons" "$(tail -n +3 "$log" | cut -f8)" \
		"$(sed -n 's/^Dumping heap profile to .* (\(.*\))$/\1/p' "$3")"
	bad=$(tail -n +3 "$log" | awk -F'\t' -v p=0 '
		$1 != NR { print "seq " $1 " on line " NR; exit }
		$3 < $4 || $5 != $3 - $4 { print "totals " $0; exit }
		$6 <= 0 { print "rss " $0; exit }
		$2 < p { print "time goes back " $0; exit }
		{ p = $2 }')
	eq "$1: fields" "$bad" ""
}

mkdir "$tmp/a"
HEAPPROFILE="$tmp/a/p" HEAP_PROFILE_ALLOCATION_INTERVAL=102400 "$W" pattern 100 10240 free 2>"$tmp/a.err" ||
	fail "pattern exited $?"
check "allocation interval" "$tmp/a" "$tmp/a.err"
eq "11 dumps" "$(tail -n +3 "$tmp/a/p.log" | wc -l)" 11

# a new run under the same prefix starts a fresh log
HEAPPROFILE="$tmp/a/p" "$W" exit 2>"$tmp/a2.err" || fail "exit exited $?"
check "second run" "$tmp/a" "$tmp/a2.err"
eq "second run: one line" "$(tail -n +3 "$tmp/a/p.log" | wc -l)" 1

# a stop and a start in one process carry the log on, numbered like the files
mkdir "$tmp/r"
HEAPPROFILE="$tmp/r/p" "$W" restart 2>"$tmp/r.err" || fail "restart exited $?"
check "restart" "$tmp/r" "$tmp/r.err"
eq "restart: lines" "$(tail -n +3 "$tmp/r/p.log" | cut -f1,7,8 | sed 's/Exiting, .*/Exiting/' | tr '\t\n' '  ')" \
	"1 p.0001.heap first session 2 p.0002.heap second session 3 p.0003.heap Exiting "
eq "restart: one header" "$(grep -c '^#' "$tmp/r/p.log")" 2

# a fork child writes its own log next to its own files
mkdir "$tmp/f"
HEAPPROFILE="$tmp/f/p" "$W" fork 2>"$tmp/f.err" || fail "fork exited $?"
# (the fork child, and the program it executes: PREFIX_PID each)
kids=$(ls "$tmp/f" | sed -n 's/^p_\([0-9]*\)\.log$/\1/p')
eq "children's logs" "$(echo "$kids" | grep -c .)" 2
for c in $kids; do
	# (the exec'd one names its command in a "# command:" line)
	eq "child $c log lines" "$(tail -n +3 "$tmp/f/p_$c.log" | grep -vc '^#')" \
		"$(ls "$tmp/f" | grep -c "^p_$c\..*\.heap$")"
	eq "child $c log file" "$(tail -n +3 "$tmp/f/p_$c.log" | grep -v '^#' | cut -f7 | head -1)" "p_$c.0001.heap"
done

# the log's name taken by a directory: one line, the dumps still written
mkdir -p "$tmp/d/p.log"
HEAPPROFILE="$tmp/d/p" HEAP_PROFILE_ALLOCATION_INTERVAL=102400 "$W" pattern 100 10240 free 2>"$tmp/d.err" ||
	fail "pattern with an unwritable log exited $?"
eq "unwritable log: lines" "$(grep -c 'cannot write the dump log' "$tmp/d.err")" 1
eq "unwritable log: dumps" "$(ls "$tmp/d" | grep -c '\.heap$')" 11
finish
