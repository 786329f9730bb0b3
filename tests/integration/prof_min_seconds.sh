#!/bin/sh
# HEAP_PROFILE_MIN_SECONDS=S: at most one threshold dump per S seconds.  A
# crossing held back is counted, and the next dump of any kind (threshold,
# API, exit) names the count after its reason, in stderr and in the dump
# log; API and exit dumps are never held back.  Every crossing is counted
# once: dumps plus folded crossings are the dumps S=0 writes.
. "$top_srcdir/tests/lib/prof_lib.sh"
files() { lsd "$1" | tr '\n' ' '; }
# dumps NAME — "FILE (REASON)" of each stderr dump line, totals elided
dumps() {
	sed -n "s|^Dumping heap profile to $tmp/$1/||p" "$tmp/$1.err" |
		sed 's/[0-9]* MB allocated cumulatively, [0-9]* MB currently in use/alloc/;
		     s/Exiting, [0-9]* [kMB]* in use/Exiting/; s/Exiting, [0-9]* bytes in use/Exiting/' | tr '\n' ' '
}
# folded NAME — the folded counts of its dump lines, summed
folded() { sed -n 's/^Dumping .*; \([0-9]*\) crossings\{0,1\} folded)$/\1/p' "$tmp/$1.err" | awk '{ s += $1 } END { print s + 0 }'; }
# run NAME ARGS... — prof_work ARGS under HEAPPROFILE=$tmp/NAME/p, the
# allocation interval $interval (default 100 KiB)
run() {
	name=$1; shift
	mkdir "$tmp/$name"
	HEAPPROFILE="$tmp/$name/p" HEAP_PROFILE_ALLOCATION_INTERVAL=${interval:-102400} "$W" "$@" 2>"$tmp/$name.err" ||
		fail "$name: prof_work $* exited $?"
}

# 10 crossings of the allocation interval within milliseconds: the first
# dumps, the other 9 fold into the exit dump
HEAP_PROFILE_MIN_SECONDS=3 run s3 pattern 100 10240 free
eq "S=3: dumps" "$(dumps s3)" "p.0001.heap (alloc) p.0002.heap (Exiting; 9 crossings folded) "
eq "S=3: files" "$(files "$tmp/s3")" "p.0001.heap p.0002.heap p.log "
eq "S=3: log reasons" "$(grep -v '^#' "$tmp/s3/p.log" | cut -f8 | sed 's/Exiting, [^;]*;/Exiting;/' | tr '\n' '|')" \
	"$(sed -n 's/^Dumping heap profile to .* (\(.*\))$/\1/p' "$tmp/s3.err" | sed 's/Exiting, [^;]*;/Exiting;/' | tr '\n' '|')"
# S=0 (and unset): gperftools' behaviour, one dump per crossing
HEAP_PROFILE_MIN_SECONDS=0 run s0 pattern 100 10240 free
eq "S=0: files" "$(lsd "$tmp/s0" | grep -c '\.heap$')" 11
eq "S=0: nothing folded" "$(grep -c 'folded' "$tmp/s0.err")" 0
eq "S=3 counts every crossing" "$(( $(grep -c 'alloc' "$tmp/s3.err") + $(folded s3) ))" \
	"$(grep -c 'allocated cumulatively' "$tmp/s0.err")"

# two bursts 1.5 s apart with S=1: each burst's first crossing dumps, the
# second one naming the first burst's held-back crossings (when each burst
# took under 1 s: on a loaded or emulated machine one may take longer, and
# then dumps again within it); every crossing is counted either way
HEAP_PROFILE_MIN_SECONDS=1 run b1 bursts 2 100 10240 1500
HEAP_PROFILE_MIN_SECONDS=0 run b0 bursts 2 100 10240 1500
longest=$(sed -n 's/^bursts: the longest took \([0-9]*\) ms$/\1/p' "$tmp/b1.err")
if [ "${longest:-1000}" -lt 1000 ]; then
	eq "bursts: dumps" "$(dumps b1 | sed 's/[0-9]* crossings folded/K crossings folded/g')" \
		"p.0001.heap (alloc) p.0002.heap (alloc; K crossings folded) p.0003.heap (Exiting; K crossings folded) "
else
	echo "bursts: the dumps' order not checked: a burst took ${longest:-?} ms"
fi
eq "bursts: every crossing counted" "$(( $(grep -c 'allocated cumulatively' "$tmp/b1.err") + $(folded b1) ))" \
	"$(grep -c 'allocated cumulatively' "$tmp/b0.err")"

# API dumps are never held back and carry the count; a restart starts over
interval=1000
HEAP_PROFILE_MIN_SECONDS=3 run api restart
HEAP_PROFILE_MIN_SECONDS=0 run api0 restart
interval=
eq "API: dumps" "$(dumps api | sed 's/[0-9]* crossings folded/K crossings folded/g')" \
	"p.0001.heap (alloc) p.0002.heap (first session; K crossings folded) p.0003.heap (alloc) p.0004.heap (second session; K crossings folded) p.0005.heap (Exiting) "
eq "API: every crossing counted" "$(( 2 + $(folded api) ))" "$(grep -c 'allocated cumulatively' "$tmp/api0.err")"

# junk: one line, and 0
HEAP_PROFILE_MIN_SECONDS=3s run junk pattern 100 10240 free
eq "junk: message" "$(grep -c '^heapalloc: HEAP_PROFILE_MIN_SECONDS="3s" is not a number of seconds; using 0$' "$tmp/junk.err")" 1
eq "junk: files" "$(lsd "$tmp/junk" | grep -c '\.heap$')" 11
finish
