#!/bin/sh
# alloc_early_preload.sh — the constructors of alloc_early_plain (an
# executable and a shared object, neither linked with heapalloc) allocate
# before main with heapalloc preloaded; the loader runs the preloaded
# library's own constructors late, so heapalloc must initialise on first
# call.  Env: HA_LIB, top_builddir.
lib=${HA_LIB:-}
prog=${top_builddir:-.}/tests/integration/alloc_early_plain
[ -n "$lib" ] && [ -f "$lib" ] || { echo "HARD ERROR: HA_LIB='$lib' is not a file"; exit 99; }
[ -x "$prog" ] || { echo "HARD ERROR: $prog not built"; exit 99; }
LD_PRELOAD=$lib "$prog"
