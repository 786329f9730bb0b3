#!/bin/sh
# alloc_identity_preload.sh — LD_PRELOAD=libheapalloc.so makes heapalloc the
# allocator of a program built without it (alloc_identity_plain): every
# entry point resolves to it and libc/libstdc++ allocate through it.  First
# proves the probe can fail: run without the preload it must report that
# heapalloc is absent.  Env: HA_LIB, top_builddir; PRELOAD_PROG runs another
# program of tests/ the same way (alloc_no_cxx_preload.sh).
lib=${HA_LIB:-}
prog=${top_builddir:-.}/tests/integration/${PRELOAD_PROG:-alloc_identity_plain}
[ -n "$lib" ] && [ -f "$lib" ] || { echo "HARD ERROR: HA_LIB='$lib' is not a file"; exit 99; }
[ -x "$prog" ] || { echo "HARD ERROR: $prog not built"; exit 99; }

if "$prog" >/dev/null 2>&1; then
	echo "FAIL: $prog passes without heapalloc preloaded, so it proves nothing"
	exit 1
fi
LD_PRELOAD=$lib "$prog"
rc=$?
[ $rc = 0 ] && echo "ok: heapalloc is the allocator under LD_PRELOAD"
exit $rc
