#!/bin/sh
# Compatibility mode (HEAP_PROFILE_EXACT_TOTALS=1) dumps where gperftools
# does: the same program (tests/integration/prof_gperf, preloaded with each) under
# gperftools' libtcmalloc heap profiler and under heapalloc, with 10 KiB
# allocation, deallocation and in-use intervals, must write the same number
# of dumps with the same numbers and the same reasons ("N MB allocated
# cumulatively, M MB currently in use", "N MB freed ...", "N MB currently
# in use"), line for line.  Default sampling: most frees that cross an
# interval free blocks that were not sampled.
. "$top_srcdir/tests/lib/prof_lib.sh"
P="$top_builddir/tests/integration/prof_gperf"
# the library's architecture's (a cross build's is not this machine's)
cpu=$(sed -n 's/^host_cpu = //p' "$top_builddir/Makefile")
TC=${TCMALLOC_LIB:-/usr/lib/${cpu:-x86_64}-linux-gnu/libtcmalloc.so.4}
[ -f "$TC" ] || { echo "SKIP: $TC not found (libgoogle-perftools4)"; exit 77; }
lib=${HA_LIB:-}
[ -n "$lib" ] && [ -f "$lib" ] || { echo "HARD ERROR: HA_LIB='$lib' is not a file"; exit 99; }

# run NAME LIB [VAR=VALUE...] — the dump lines, prefix stripped
run() {
	name=$1; lib=$2; shift 2
	mkdir "$tmp/$name"
	env "$@" HEAPPROFILE="$tmp/$name/p" HEAP_PROFILE_ALLOCATION_INTERVAL=10240 \
		HEAP_PROFILE_DEALLOCATION_INTERVAL=10240 HEAP_PROFILE_INUSE_INTERVAL=10240 \
		LD_PRELOAD="$lib" "$P" 2>"$tmp/$name.err" || fail "$name: prof_gperf exited $?"
	grep '^Dumping heap profile to ' "$tmp/$name.err" | grep -v '(Exiting' |
		sed "s|$tmp/$name/||" >"$tmp/$name.dumps"
}
run gperf "$TC"
run heapalloc "$lib" HEAP_PROFILE_EXACT_TOTALS=1
g=$(wc -l <"$tmp/gperf.dumps")
h=$(wc -l <"$tmp/heapalloc.dumps")
echo "gperftools: $g dumps ($(grep -c freed "$tmp/gperf.dumps") for frees); heapalloc: $h"
[ "$g" -gt 100 ] || fail "gperftools wrote only $g dumps: the pattern no longer exercises the intervals"
grep -q 'MB freed cumulatively' "$tmp/gperf.dumps" || fail "no deallocation dump from gperftools"
if ! cmp -s "$tmp/gperf.dumps" "$tmp/heapalloc.dumps"; then
	diff "$tmp/gperf.dumps" "$tmp/heapalloc.dumps" | head -10
	fail "dump points differ from gperftools'"
fi
# the files are there under those numbers
eq "files" "$(ls "$tmp/heapalloc" | grep -c '\.heap$')" "$((h + 1))"
finish
