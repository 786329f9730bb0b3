#!/bin/sh
# tests/integration/rel_signal.sh — HEAPPROFILESIGNAL naming an invalid signal (0, 99,
# junk) → one warning line, the program runs normally; naming a signal the
# program installs its own handler for (after heapalloc started, and before
# a HeapProfilerStart) → the program's handler runs every time, nothing
# aborts, exit status 0.  (gperftools aborts when the signal already has a
# handler; the spec asks for better.)
. "${top_srcdir:-.}/tests/lib/rel_lib.sh"
rel_setup relsig
usr1=$(kill -l USR1 2>/dev/null || echo 10)
[ "$usr1" -gt 0 ] 2>/dev/null || usr1=10

for v in 0 99 junk -5 SIGNOPE 65; do
	HEAPPROFILE="$tmp/p$v" HEAPPROFILESIGNAL=$v timeout $hang_s "$prog" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	hung $rc
	if [ $rc -ne 0 ] || [ "$(cat "$tmp/out")" != "rel_prog ok" ]; then
		fail "HEAPPROFILESIGNAL=$v: exit $rc (124 = hung), stdout '$(cat "$tmp/out")': $(head -c 400 "$tmp/err")"
		continue
	fi
	n=$(grep -F HEAPPROFILESIGNAL "$tmp/err" | grep -cF -- "$v")
	[ "$n" -eq 1 ] || fail "HEAPPROFILESIGNAL=$v: want 1 warning line, got $n: $(head -c 400 "$tmp/err")"
done

# our handler installed after heapalloc's (HEAPPROFILE at start)
for sig in "$usr1" SIGUSR1; do
	HEAPPROFILE="$tmp/h" HEAPPROFILESIGNAL=$sig timeout $hang_s "$prog" handler "$usr1" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	hung $rc
	if [ $rc -ne 0 ] || [ "$(cat "$tmp/out")" != "rel_prog ok" ]; then
		fail "HEAPPROFILESIGNAL=$sig, program's handler installed after start: exit $rc (124 = hung, 134 = abort), stdout '$(cat "$tmp/out")': $(head -c 400 "$tmp/err")"
	fi
	grep -q 'rel_prog: our handler' "$tmp/err" && fail "HEAPPROFILESIGNAL=$sig: program handler did not run every time"
done

# our handler installed first, then HeapProfilerStart: heapalloc must not
# abort nor swallow the signal (the program's handler still runs).  Each of
# the 3 raises while profiling is one dump: the helper thread writes it in
# the 20 ms the program sleeps after each, or HeapProfilerStop does (nowait:
# the raises at once, the stop right after them)
for wait in "" nowait; do
	rm -f "$tmp"/f.*
	HEAPPROFILESIGNAL=$usr1 timeout $hang_s "$prog" handler-first "$usr1" "$tmp/f" $wait >"$tmp/out" 2>"$tmp/err"
	rc=$?
	hung $rc
	if [ $rc -ne 0 ] || [ "$(cat "$tmp/out")" != "rel_prog ok" ]; then
		fail "handler installed before HeapProfilerStart $wait: exit $rc (124 = hung, 134 = abort), stdout '$(cat "$tmp/out")': $(head -c 400 "$tmp/err")"
	fi
	got=$(ls "$tmp" | grep '^f\..*heap$' | tr '\n' ' ')
	[ "$got" = "f.0001.heap f.0002.heap f.0003.heap " ] ||
		fail "handler installed before HeapProfilerStart $wait: want 3 signal dumps f.000[1-3].heap, got '$got'"
done

[ $fails -eq 0 ] && { echo "rel_signal: all cases passed"; exit 0; }
echo "rel_signal: $fails case(s) failed"
exit 1
