#!/bin/sh
# Threads allocate and free while another thread writes dumps (sampled and
# R=1); a dump while another thread is inside dlopen (the module allocates
# in its constructor, R=1 so those allocations unwind under the loader
# lock).  No deadlock (timeout), every file is complete and readable.
. "$top_srcdir/tests/lib/prof_lib.sh"
T=$(command -v timeout || true)
mod="$top_builddir/tests/integration/.libs/prof_dlmod.so"
[ -f "$mod" ] || { echo "missing $mod"; exit 99; }

check_files() {
	for f in "$tmp/$1"/*.heap; do
		[ -f "$f" ] || { fail "$1: no profiles"; return; }
		shape "$f"
		if [ -n "$GO" ] && [ -x "$GO" ]; then
			"$GO" tool pprof -raw "$W" "$f" >/dev/null 2>&1 || fail "go pprof cannot read $f"
		fi
	done
	ls "$tmp/$1" | grep -q '\.tmp$' && fail "$1: temporary file left"
}

for r in 4096 1; do
	mkdir "$tmp/t$r"
	HEAPPROFILE="$tmp/t$r/p" HEAP_PROFILE_SAMPLE_INTERVAL=$r HEAP_PROFILE_ALLOCATION_INTERVAL=0 $T 120 "$W" threads 2>"$tmp/t$r.err" ||
		fail "threads R=$r exited $?: $(tail -3 "$tmp/t$r.err")"
	eq "threads R=$r dumps" "$(ls "$tmp/t$r" | grep -c '\.heap$')" 21
	check_files "t$r"
done

mkdir "$tmp/dl"
HEAPPROFILE="$tmp/dl/p" HEAP_PROFILE_SAMPLE_INTERVAL=1 HEAP_PROFILE_ALLOCATION_INTERVAL=0 $T 120 "$W" dlopen "$mod" 2>"$tmp/dl.err" ||
	fail "dlopen exited $?: $(tail -3 "$tmp/dl.err")"
eq "dlopen dumps" "$(ls "$tmp/dl" | grep -c '\.heap$')" 31
check_files dl
finish
