#!/bin/sh
# alloc_no_cxx_preload.sh — alloc_no_cxx in a C program built without
# heapalloc (alloc_no_cxx_plain), heapalloc preloaded: no C++ runtime, libm,
# libgcc_s, zlib or libxxhash mapped, operator new's C++ pieces found later.
# Without the preload the program must fail (alloc_identity_preload.sh).
PRELOAD_PROG=alloc_no_cxx_plain exec sh "${top_srcdir:-.}/tests/integration/alloc_identity_preload.sh"
