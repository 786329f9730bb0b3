#!/bin/sh
# alloc_profiled.sh — the allocator keeps glibc's semantics with the heap
# profiler on: the conformance tests (edges, realloc, alignment, __libc_*,
# C++) run again with HEAPPROFILE set and every allocation sampled
# (HEAP_PROFILE_SAMPLE_INTERVAL=1), so the profiling paths of malloc, free
# and realloc (exact counts, side tables, sampled blocks) carry every call.
# alloc_profiled_threads.sh does the same for the thread tests.  Dumps go to
# a temporary directory; only the programs' own verdicts count.
# Env: top_builddir.
dir=${top_builddir:-.}/tests
tmp=${TMPDIR:-/tmp}/alloc_profiled.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
status=0
tests=${ALLOC_PROFILED_TESTS:-alloc_edges alloc_realloc alloc_align alloc_libc_aliases alloc_cxx}
for t in $tests; do
	[ -x "$dir/$t" ] || { echo "HARD ERROR: $dir/$t not built"; exit 99; }
	for interval in 1; do
		HEAPPROFILE=$tmp/p HEAP_PROFILE_SAMPLE_INTERVAL=$interval \
		HEAP_PROFILE_INUSE_INTERVAL=0 HEAP_PROFILE_ALLOCATION_INTERVAL=0 \
			"$dir/$t" > "$tmp/out" 2>&1
		rc=$?
		if ! grep -q "Starting tracking the heap" "$tmp/out"; then
			echo "FAIL: $t: the profiler did not start (no 'Starting tracking the heap')"
			status=1
		elif [ $rc = 0 ]; then
			echo "ok: $t (sample interval $interval)"
		else
			echo "FAIL: $t with HEAPPROFILE, sample interval $interval: exit $rc"
			grep -v '^heapalloc: ' "$tmp/out" | head -20
			status=1
		fi
		rm -f "$tmp"/p*
	done
done
exit $status
