#!/bin/sh
# alloc_profiled_threads.sh — alloc_profiled.sh for the thread tests: many
# threads with cross-thread frees, thread-exit destructors, exit() under
# running threads, fork beside threads inside stdio, all with every
# allocation sampled.  Env: top_builddir,
# top_srcdir.
ALLOC_PROFILED_TESTS="alloc_threads alloc_thread_exit alloc_exit_race alloc_fork_stdio"
export ALLOC_PROFILED_TESTS
exec ${SHELL:-/bin/sh} "${top_srcdir:-..}/tests/integration/alloc_profiled.sh"
