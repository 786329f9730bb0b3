#!/bin/sh
# The ground-truth test again with libheapalloc.a linked into the program:
# heapalloc's functions then live in the program's own text, and must
# still be dropped from every stack (prof/capture/stack.c calibrates them).
PROF_WORK="$top_builddir/tests/integration/prof_work_static"
export PROF_WORK
exec ${SHELL:-/bin/sh} "$top_srcdir/tests/integration/prof_truth.sh"
