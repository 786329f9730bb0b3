#!/bin/sh
# alloc_programs.sh — ordinary programs under LD_PRELOAD=libheapalloc.so
# print exactly what they print without it: sort, awk (associative arrays)
# and sh itself, on a generated input of 200000 lines.  Each tool that is
# missing is left out; with none at all the test skips.  Env: HA_LIB.
. "$top_srcdir/tests/lib/emu.sh"
# under emulation Debian's arm64 sort, gawk, sh and head (emu_root)
emu_root "sort, awk and sh of the library's architecture"
AWK=awk
[ -n "${HA_EMULATED:-}" ] && AWK=gawk
lib=${HA_LIB:-}
[ -n "$lib" ] && [ -f "$lib" ] || { echo "HARD ERROR: HA_LIB='$lib' is not a file"; exit 99; }
tmp=${TMPDIR:-/tmp}/alloc_programs.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM

# input: 200000 pseudo-random lines

awk 'BEGIN { srand(7); for (i = 0; i < 200000; i++) printf "%d %s%d\n", int(rand() * 1e6), "w", i % 977 }' \
	> "$tmp/in" 2>/dev/null || { echo "SKIP: awk not available"; exit 77; }

status=0 ran=0
run() { # name, command...
	name=$1
	shift
	"$@" < "$tmp/in" > "$tmp/plain" 2>&1
	rc1=$?
	LD_PRELOAD=$lib "$@" < "$tmp/in" > "$tmp/ha" 2>&1
	rc2=$?
	ran=$((ran + 1))
	if [ $rc1 != $rc2 ] || ! cmp -s "$tmp/plain" "$tmp/ha"; then
		echo "FAIL: $name differs under LD_PRELOAD (exit $rc1 vs $rc2)"
		diff "$tmp/plain" "$tmp/ha" | head -5
		status=1
	else
		echo "ok: $name ($(wc -c < "$tmp/ha") bytes of output, same)"
	fi
}
command -v sort >/dev/null && run sort sort -k2,2 -k1n
command -v $AWK >/dev/null && run awk $AWK '{ c[$2]++; s[$2] = s[$2] " " $1 } END { for (k in c) n++; print n; print length(s["w5"]) }'
run sh sh -c 'head -n 20000 | { while read a b; do case $a in *77*) x="$x$b";; esac; done; echo ${#x}; }'
[ $ran -gt 0 ] || { echo "SKIP: no program to run"; exit 77; }
exit $status
