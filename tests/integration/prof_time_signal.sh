#!/bin/sh
# HEAP_PROFILE_TIME_INTERVAL: a dump every N seconds from the helper thread,
# the first one N seconds after the start (not at once); HEAPPROFILESIGNAL
# (given by name): one dump per signal, written by the helper thread.
. "$top_srcdir/tests/lib/prof_lib.sh"

mkdir "$tmp/time"
HEAPPROFILE="$tmp/time/p" HEAP_PROFILE_TIME_INTERVAL=1 "$W" sleep 2500 2>"$tmp/time.err" || fail "sleep exited $?"
n=$(grep -c "^Dumping heap profile to $tmp/time/p\.[0-9]*\.heap ([0-9]* sec since the last dump)$" "$tmp/time.err")
[ "$n" -ge 1 ] && [ "$n" -le 3 ] || fail "time dumps: $n, want 2 (1-3 on a loaded machine): $(cat "$tmp/time.err")"
grep -q "(1 sec since the last dump)" "$tmp/time.err" || fail "no '1 sec since the last dump'"
last=$(lsd "$tmp/time" | grep '\.heap$' | sort | tail -1)
grep -q "^Dumping heap profile to $tmp/time/$last (Exiting" "$tmp/time.err" || fail "the exit dump is not the last file"

mkdir "$tmp/sig"
HEAPPROFILE="$tmp/sig/p" HEAPPROFILESIGNAL=SIGUSR2 "$W" signal 3 "$tmp/sig" 2>"$tmp/sig.err" || fail "signal exited $?"
eq "signal dumps" "$(grep -c "^Dumping heap profile to $tmp/sig/p\.000[1-3]\.heap (signal)$" "$tmp/sig.err")" 3
eq "signal files" "$(lsd "$tmp/sig" | tr '\n' ' ')" "p.0001.heap p.0002.heap p.0003.heap p.0004.heap p.log "
eq "signal log" "$(grep -v '^#' "$tmp/sig/p.log" | cut -f1,7,8 | sed 's/Exiting, .*/Exiting/' | tr '\t\n' '  ')" \
	"1 p.0001.heap signal 2 p.0002.heap signal 3 p.0003.heap signal 4 p.0004.heap Exiting "
[ -n "$GO" ] && [ -x "$GO" ] && for f in "$tmp"/sig/*.heap; do
	"$GO" tool pprof -top "$W" "$f" >/dev/null 2>&1 || fail "go pprof cannot read $f"
done

# a signal delivered right before exit is dumped, once, before the exit dump
# (the helper thread may not have run yet, or may race the exit)
for i in 1 2 3 4 5 6 7 8 9 10; do
	rm -rf "$tmp/sx"; mkdir "$tmp/sx"
	HEAPPROFILE="$tmp/sx/p" HEAPPROFILESIGNAL=SIGUSR2 "$W" signalexit 2>"$tmp/sx.err" ||
		fail "signalexit exited $?"
	eq "signal then exit, run $i: dumps" "$(grep '^Dumping heap profile' "$tmp/sx.err" |
		sed "s|$tmp/sx/||; s/Exiting, .*/Exiting)/" | tr '\n' ' ')" \
		"Dumping heap profile to p.0001.heap (signal) Dumping heap profile to p.0002.heap (Exiting) "
done

# starting the helper thread (it allocates) must not stop the main thread's
# sampling: R=1 with a signal configured still counts every object
if [ -n "$GO" ] && [ -x "$GO" ]; then
	mkdir "$tmp/helper"
	HEAPPROFILE="$tmp/helper/p" HEAPPROFILESIGNAL=SIGUSR2 HEAP_PROFILE_SAMPLE_INTERVAL=1 "$W" truth 2>/dev/null ||
		fail "truth with a signal exited $?"
	eq "site_keep objects with the helper running" "$(flat inuse_objects "$tmp/helper/p.0001.heap" site_keep)" 1000
fi
finish
