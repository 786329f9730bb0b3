#!/bin/sh
# Options: size suffixes; a junk value gets one stderr line naming the
# variable, the bad value and the value used, and the default;
# HEAP_PROFILE_CLEANUP removes earlier PREFIX.NNNN.heap files (only those:
# not the dump log, which the new run starts afresh);
# an empty HEAPPROFILE does not profile; a session's default interval is
# the always-on sampling's; HEAPALLOC_PURGE_THREAD reads as a boolean.
. "$top_srcdir/tests/lib/prof_lib.sh"

mkdir "$tmp/a"
# (not calibrated: only pprof's raw lines carry the interval)
HEAPPROFILE="$tmp/a/p" HEAP_PROFILE_CALIBRATE=0 HEAP_PROFILE_SAMPLE_INTERVAL=64K "$W" exit 2>"$tmp/a.err" || fail "exit $?"
head -1 "$tmp/a/p.0001.heap" | grep -q '@ heap_v2/65536$' || fail "64K is not 65536: $(head -1 "$tmp/a/p.0001.heap")"

mkdir "$tmp/b"
HEAPPROFILE="$tmp/b/p" HEAP_PROFILE_CALIBRATE=0 HEAP_PROFILE_SAMPLE_INTERVAL=lots HEAP_PROFILE_CLEANUP=maybe "$W" exit 2>"$tmp/b.err" || fail "exit $?"
eq "junk sample interval message" "$(grep -c 'HEAP_PROFILE_SAMPLE_INTERVAL=.*lots.*2097152' "$tmp/b.err")" 1
eq "junk cleanup message" "$(grep -c 'HEAP_PROFILE_CLEANUP=.*maybe.*1' "$tmp/b.err")" 1
head -1 "$tmp/b/p.0001.heap" | grep -q '@ heap_v2/2097152$' || fail "junk did not give the default"

# cleanup: old p.NNNN.heap go, other names stay
mkdir "$tmp/c"
for n in p.0001.heap p.0007.heap p.12345.heap p_77.0001.heap p.x.heap q.0001.heap p.0002.heap.txt \
	p.log p_77.log p.0001.log q.log; do
	echo old >"$tmp/c/$n"
done
HEAPPROFILE="$tmp/c/p" "$W" _exit 2>/dev/null
eq "after cleanup" "$(ls "$tmp/c" | tr '\n' ' ')" \
	"p.0001.log p.0002.heap.txt p.log p.x.heap p_77.0001.heap p_77.log q.0001.heap q.log "
eq "the log started afresh" "$(cat "$tmp/c/p.log" | grep -c '^old$')" 0
eq "other logs untouched" "$(cat "$tmp/c/p_77.log" "$tmp/c/p.0001.log" "$tmp/c/q.log")" "$(printf 'old\nold\nold')"
echo old >"$tmp/c/p.0003.heap"
HEAPPROFILE="$tmp/c/p" HEAP_PROFILE_CLEANUP=f "$W" _exit 2>/dev/null
[ -f "$tmp/c/p.0003.heap" ] || fail "HEAP_PROFILE_CLEANUP=f removed a file"

mkdir "$tmp/d"
HEAPPROFILE= "$W" exit 2>"$tmp/d.err"
grep -q 'Starting tracking' "$tmp/d.err" && fail "empty HEAPPROFILE profiles"

# one default: a session with the interval unset samples as the always-on
# sampling does, every 2 MiB
mkdir "$tmp/e"
HEAPPROFILE="$tmp/e/p" HEAP_PROFILE_CALIBRATE=0 "$W" exit 2>"$tmp/e.err" || fail "exit $?"
head -1 "$tmp/e/p.0001.heap" | grep -q '@ heap_v2/2097152$' ||
	fail "the default session interval is not 2 MiB: $(head -1 "$tmp/e/p.0001.heap")"

# one grammar: the allocator's HEAPALLOC_PURGE_THREAD is a boolean as the
# table's are (alloc/env.c), junk said in the table's words; read when a
# cache first holds 4 MiB, so a program that frees 64 MiB
# (not under emulation: this machine's python3 is not of the library's
# architecture)
PY=${PYTHON3:-$(command -v python3 || true)}
if [ -n "${HA_EMULATED:-}" ]; then
	echo "the purge thread's grammar not checked: $HA_EMULATED: python3 is this machine's"
elif [ -n "$PY" ]; then
	purge() {
		env LD_PRELOAD="$HA_LIB" HEAPALLOC_PURGE_THREAD="$1" "$PY" -c '
import os, time
x = [bytearray(1 << 20) for i in range(64)]
del x
time.sleep(0.3)
print(sum(open("/proc/self/task/%s/comm" % t).read().strip() == "heapalloc-purge"
          for t in os.listdir("/proc/self/task")))'
	}
	eq "purge thread, yes" "$(purge yes 2>"$tmp/p.err")" 1
	eq "purge thread, yes: stderr" "$(cat "$tmp/p.err")" ""
	eq "purge thread, off" "$(purge off 2>"$tmp/p.err")" 0
	eq "purge thread, off: stderr" "$(cat "$tmp/p.err")" ""
	eq "purge thread, maybe" "$(purge maybe 2>"$tmp/p.err")" 0
	eq "purge thread, maybe: stderr" "$(cat "$tmp/p.err")" \
		'heapalloc: HEAPALLOC_PURGE_THREAD="maybe" is not a boolean; using false'
fi
finish
