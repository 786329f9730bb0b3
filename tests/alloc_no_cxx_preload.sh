#!/bin/sh
# alloc_no_cxx_preload.sh — alloc_no_cxx in a C program built without
# heapalloc (alloc_no_cxx_plain), heapalloc preloaded: no C++ runtime, libm,
# libgcc_s, zlib or libxxhash mapped, operator new's C++ pieces found later.
# First proves the program can fail: without the preload it must.
# Env: HA_LIB, top_builddir.
lib=${HA_LIB:-}
prog=${top_builddir:-.}/tests/alloc_no_cxx_plain
[ -n "$lib" ] && [ -f "$lib" ] || { echo "HARD ERROR: HA_LIB='$lib' is not a file"; exit 99; }
[ -x "$prog" ] || { echo "HARD ERROR: $prog not built"; exit 99; }

if "$prog" >/dev/null 2>&1; then
	echo "FAIL: $prog passes without heapalloc preloaded, so it proves nothing"
	exit 1
fi
LD_PRELOAD=$lib "$prog"
