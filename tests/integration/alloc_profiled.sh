#!/bin/sh
# alloc_profiled.sh — the allocator keeps glibc's semantics with the heap
# profiler on: the conformance tests (edges, realloc, alignment, __libc_*,
# C++) run again with HEAPPROFILE set: every allocation sampled
# (HEAP_PROFILE_SAMPLE_INTERVAL=1), then sampled and unsampled blocks mixed
# (4096) with exact totals (every profiled block has a size header) and
# with HEAP_PROFILE_EXACT_TOTALS=0 (only blocks that may be sampled have
# one), so every profiling path of malloc, free and realloc carries calls.
# alloc_profiled_threads.sh does the same for the thread tests.  Dumps go to
# a temporary directory; only the programs' own verdicts count.
# Env: top_builddir.
dir=${top_builddir:-.}/tests/integration
tmp=${TMPDIR:-/tmp}/alloc_profiled.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
status=0
tests=${ALLOC_PROFILED_TESTS:-alloc_edges alloc_realloc alloc_align alloc_libc_aliases alloc_cxx}
for t in $tests; do
	[ -x "$dir/$t" ] || { echo "HARD ERROR: $dir/$t not built"; exit 99; }
	for mode in 1/1 4096/1 4096/0 1/0; do
		interval=${mode%/*} exact=${mode#*/}
		HEAPPROFILE=$tmp/p HEAP_PROFILE_SAMPLE_INTERVAL=$interval \
		HEAP_PROFILE_EXACT_TOTALS=$exact \
		HEAP_PROFILE_INUSE_INTERVAL=0 HEAP_PROFILE_ALLOCATION_INTERVAL=0 \
			"$dir/$t" > "$tmp/out" 2>&1
		rc=$?
		if ! grep -q "Starting tracking the heap" "$tmp/out"; then
			echo "FAIL: $t: the profiler did not start (no 'Starting tracking the heap')"
			status=1
		elif [ $rc = 0 ]; then
			echo "ok: $t (sample interval $interval, exact totals $exact)"
		else
			echo "FAIL: $t with HEAPPROFILE, sample interval $interval, exact totals $exact: exit $rc"
			grep -v '^heapalloc: ' "$tmp/out" | head -20
			status=1
		fi
		rm -f "$tmp"/p*
	done
done
exit $status
