#!/bin/sh
# alloc_spike_sampled.sh — a freed spike comes back, and no thread is
# started, in the state every process runs in: the always-on sampling on.
# (The harness switches it off for tests/integration/alloc_*, which measure the
# allocator alone; this one takes that away again.)
# (under qemu-user the programs measure the spike's own pages, alloc_spike.c)
unset HEAP_PROFILE_SAMPLE_INTERVAL
b=${top_builddir:-.}/tests/integration
rc=0
for t in alloc_spike_large_quiet alloc_spike_span_busy alloc_spike_nothread; do
	"$b/$t" || { echo "FAIL: $t with the always-on sampling (exit $?)"; rc=1; }
done
exit $rc
