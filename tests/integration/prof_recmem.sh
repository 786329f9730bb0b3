#!/bin/sh
# Recording every allocation (HEAP_PROFILE_SAMPLE_INTERVAL=1): small blocks
# are recorded in place, without a header.  200,000 live objects from four
# sites (malloc, calloc, posix_memalign, malloc half freed) among blocks
# allocated before the start: each site's in-use bytes and objects are
# exact, and the profiler holds at most 64 bytes per live object
# (tests/integration/prof_recmem.c checks heapalloc_get_stats().prof_memory).
PROF_WORK="$top_builddir/tests/integration/prof_recmem"
. "$top_srcdir/tests/lib/prof_lib.sh"
need_go

HEAP_PROFILE_SAMPLE_INTERVAL=1 HEAP_PROFILE_ALLOCATION_INTERVAL=0 HEAP_PROFILE_INUSE_INTERVAL=0 \
	HEAP_PROFILE_PEAK_INTERVAL=0 "$W" "$tmp/p" 200000 >"$tmp/want" 2>"$tmp/err" ||
	fail "run exited $?: $(cat "$tmp/err")"
eq "files" "$(lsd "$tmp" | grep '^p' | tr '\n' ' ')" "p.0001.heap p.log "
shape "$tmp/p.0001.heap"
eq "sites" "$(wc -l <"$tmp/want")" 4
while read -r site bytes objs; do
	eq "$site bytes" "$(flat inuse_space "$tmp/p.0001.heap" "$site")" "$bytes"
	eq "$site objects" "$(flat inuse_objects "$tmp/p.0001.heap" "$site")" "$objs"
done <"$tmp/want"
finish
