#!/bin/sh
# prof_usdt_notes.sh — the otel_memory probes as a tracer finds them in the
# library, no BPF needed: one .note.stapsdt per probe, provider otel_memory,
# alloc with three 8-byte arguments in the first three argument registers
# (the OTel profiler's first version reads them there) and free with one,
# each with a semaphore inside the .probes section, and the semaphores not
# exported.  A library configured without <sys/sdt.h> must have no note.
# Env: HA_LIB, top_builddir.
lib=${HA_LIB:-}
[ -n "$lib" ] && [ -f "$lib" ] || { echo "HARD ERROR: HA_LIB='$lib' is not a file"; exit 99; }
mk=${top_builddir:-.}/Makefile
[ -f "$mk" ] || { echo "HARD ERROR: no $mk"; exit 99; }
command -v readelf >/dev/null 2>&1 || { echo "SKIP: readelf (binutils) is not installed"; exit 77; }
notes=$(readelf -n "$lib") || { echo "HARD ERROR: readelf -n $lib"; exit 99; }
if ! grep -q '^HA_USDT_CPPFLAGS = -DHA_USDT=1' "$mk"; then
	if echo "$notes" | grep -q stapsdt; then
		echo "FAIL: configured without probes, but $lib has stapsdt notes"; exit 1
	fi
	echo "ok: configured without probes, and $lib has none"; exit 0
fi
status=0
# the library's architecture (a cross build's is not this machine's)
case $(sed -n 's/^host_cpu = //p' "$mk") in
x86_64) want_alloc='8@%rdi 8@%rsi 8@%rdx' want_free='8@%rdi' ;;
aarch64) want_alloc='8@x0 8@x1 8@x2' want_free='8@x0' ;;
*) want_alloc= want_free= ;;
esac
# .probes: start and size, to place the semaphores
set -- $(readelf -SW "$lib" | sed -n 's/.*\] \.probes *PROGBITS *\([0-9a-f]*\) [0-9a-f]* \([0-9a-f]*\).*/\1 \2/p')
[ $# = 2 ] || { echo "FAIL: $lib has no .probes section"; exit 1; }
pstart=$((0x$1)) pend=$((0x$1 + 0x$2))
for probe in alloc free; do
	block=$(echo "$notes" | grep -A3 "Provider: otel_memory" | grep -A2 "Name: $probe\$")
	n=$(echo "$notes" | grep -A1 "Provider: otel_memory" | grep -c "Name: $probe\$")
	if [ "$n" != 1 ]; then
		echo "FAIL: $n otel_memory:$probe notes (want 1)"; status=1; continue
	fi
	sem=$(echo "$block" | sed -n 's/.*Semaphore: 0x\([0-9a-f]*\).*/\1/p')
	args=$(echo "$block" | sed -n 's/.*Arguments: //p')
	if [ -z "$sem" ] || [ $((0x$sem)) -lt $pstart ] || [ $((0x$sem)) -ge $pend ]; then
		echo "FAIL: otel_memory:$probe semaphore 0x$sem is not in .probes"; status=1
	fi
	eval want=\$want_$probe
	if [ -n "$want" ] && [ "$args" != "$want" ]; then
		echo "FAIL: otel_memory:$probe arguments '$args', want '$want'"; status=1
	fi
	echo "otel_memory:$probe semaphore 0x$sem arguments $args"
done
if nm -D --defined-only "$lib" | grep -q semaphore; then
	echo "FAIL: a semaphore is exported"; status=1
fi
[ $status = 0 ] && echo "ok: both probes, their semaphores and arguments"
exit $status
