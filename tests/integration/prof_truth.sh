#!/bin/sh
# R=1 records every allocation: each call site of `prof_work truth` must get
# exactly its objects and bytes, in use and cumulative, from go tool pprof;
# google-pprof reads the same file.
. "$top_srcdir/tests/lib/prof_lib.sh"
need_go
HEAPPROFILE="$tmp/t" HEAP_PROFILE_SAMPLE_INTERVAL=1 "$W" truth 2>"$tmp/err" || fail "prof_work truth exited $?"
grep -q '^Starting tracking the heap$' "$tmp/err" || fail "no 'Starting tracking the heap'"
f="$tmp/t.0001.heap"
[ -f "$f" ] || { cat "$tmp/err"; fail "no $f"; finish; }
grep -q "^Dumping heap profile to $f (Exiting, [0-9]* MB in use)$" "$tmp/err" || fail "no exit dump line: $(cat "$tmp/err")"
shape "$f"
head -1 "$f" | grep -q '@ heapprofile$' || fail "R=1 header is not heapprofile"
# site           inuse_objects inuse_space alloc_objects alloc_space
sites "$f" <<'END'
site_keep 1000 1000000 1000 1000000
site_tiny 1000 1000 1000 1000
site_free 0 0 500 1000000
site_half 150 450000 300 900000
site_thread 1000 4000000 1000 4000000
site_new 200 1000000 200 1000000
END
# no heapalloc frame may appear anywhere in a stack
"$GO" tool pprof -traces "$W" "$f" 2>/dev/null | grep -E 'ha_|alloc_prof|malloc_slow|operator new' | head -3 |
	while read -r l; do echo "FAIL: heapalloc frame in a stack: $l"; done | grep -q . && fail "heapalloc frames in stacks"
if [ -n "$GOOGLE_PPROF" ] && [ -x "$GOOGLE_PPROF" ]; then
	out=$("$GOOGLE_PPROF" --text --inuse_space "$W" "$f" 2>&1)
	echo "$out" | grep -q ' site_thread$' || fail "google-pprof: no site_thread: $out"
	echo "$out" | grep -Eq '^ +3\.8 .* site_thread$' || fail "google-pprof: site_thread not 3.8 MB: $out"
else
	echo "google-pprof not found: perl check skipped"
fi
finish
