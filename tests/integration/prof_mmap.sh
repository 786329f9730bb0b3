#!/bin/sh
# HEAP_PROFILE_MMAP=t at R=1: every program mapping is recorded with its
# stack and exact bytes (kept, unmapped, grown by mremap, mmap64, a tail
# unmapped, which frees nothing, one mapped over by MAP_FIXED), none of the
# loader's (dlopen), and the exit dump's in-use total counts the mappings;
# off (the default, =f) no site shows; a junk value gets one line.  Also
# linked statically.  The mmap family fails exactly as glibc's own does.
PROF_WORK="$top_builddir/tests/integration/prof_mmap"
. "$top_srcdir/tests/lib/prof_lib.sh"

"$W" errors || fail "prof_mmap errors (profiling off) exited $?"
HEAPPROFILE="$tmp/e" HEAP_PROFILE_MMAP=t HEAP_PROFILE_SAMPLE_INTERVAL=1 "$W" errors 2>"$tmp/e.err" ||
	fail "prof_mmap errors (HEAP_PROFILE_MMAP=t) exited $?: $(cat "$tmp/e.err")"

need_go
HEAPPROFILE="$tmp/on" HEAP_PROFILE_MMAP=t HEAP_PROFILE_SAMPLE_INTERVAL=1 "$W" sites 2>"$tmp/on.err" ||
	fail "prof_mmap sites (on) exited $?: $(cat "$tmp/on.err")"
f="$tmp/on.0001.heap"
[ -f "$f" ] || { cat "$tmp/on.err"; fail "no $f"; finish; }
shape "$f"
# 8 + 6 + 1 + 1 MiB of mappings stay: the books count them in use
grep -q "^Dumping heap profile to $f (Exiting, 16 MB in use)$" "$tmp/on.err" ||
	fail "exit dump line: $(cat "$tmp/on.err")"
# site           inuse_objects inuse_space alloc_objects alloc_space
sites "$f" <<'END'
site_map_keep 1 8388608 1 8388608
site_map_free 0 0 1 4194304
site_map_grow 0 0 1 2097152
site_remap_grow 1 6291456 1 6291456
site_map64 0 0 1 1048576
site_map_part 1 1048576 1 1048576
site_map_under 0 0 1 2097152
site_map_over 1 1048576 1 1048576
END
# the loader maps libm through its own mmap: dlopen keeps only what it mallocs
d=$(flat inuse_space "$f" site_dlopen)
[ "$d" -lt 65536 ] || fail "site_dlopen holds $d bytes: the loader's mappings were counted"
# no heapalloc frame in any stack
"$GO" tool pprof -traces "$W" "$f" 2>/dev/null | grep -E 'ha_|mapped_slow|note_mapped|mremap_slow|munmap_slow' | head -3 |
	while read -r l; do echo "FAIL: heapalloc frame in a stack: $l"; done | grep -q . && fail "heapalloc frames in stacks"

# off (the default): the same program, no mapping anywhere
HEAPPROFILE="$tmp/off" HEAP_PROFILE_SAMPLE_INTERVAL=1 "$W" sites 2>"$tmp/off.err" ||
	fail "prof_mmap sites (off) exited $?: $(cat "$tmp/off.err")"
g="$tmp/off.0001.heap"
[ -f "$g" ] || { cat "$tmp/off.err"; fail "no $g"; finish; }
for site in site_map_keep site_map_free site_map_grow site_remap_grow site_map64 site_map_part site_map_over; do
	eq "off: $site alloc_space" "$(flat alloc_space "$g" "$site")" 0
done
grep -Eq "^Dumping heap profile to $g \(Exiting, [0-9]+ (kB|bytes) in use\)$" "$tmp/off.err" ||
	fail "off: exit dump counts mappings: $(cat "$tmp/off.err")"
HEAPPROFILE="$tmp/f" HEAP_PROFILE_MMAP=f HEAP_PROFILE_SAMPLE_INTERVAL=1 "$W" sites 2>"$tmp/f.err" ||
	fail "prof_mmap sites (HEAP_PROFILE_MMAP=f) exited $?"
eq "HEAP_PROFILE_MMAP=f: site_map_keep" "$(flat alloc_space "$tmp/f.0001.heap" site_map_keep)" 0
HEAPPROFILE="$tmp/j" HEAP_PROFILE_MMAP=maybe "$W" sites nodl 2>"$tmp/j.err" || fail "HEAP_PROFILE_MMAP=maybe: exited $?"
grep -qx 'heapalloc: HEAP_PROFILE_MMAP="maybe" is not a boolean; using 0' "$tmp/j.err" ||
	fail "HEAP_PROFILE_MMAP=maybe: no warning line: $(cat "$tmp/j.err")"

# linked statically: heapalloc's frames are learnt by calibration, the
# mmap family's included, so the sites still get their own bytes
S="$top_builddir/tests/integration/prof_mmap_static"
HEAPPROFILE="$tmp/st" HEAP_PROFILE_MMAP=t HEAP_PROFILE_SAMPLE_INTERVAL=1 "$S" sites nodl 2>"$tmp/st.err" ||
	fail "prof_mmap_static sites exited $?: $(cat "$tmp/st.err")"
h="$tmp/st.0001.heap"
W=$S
eq "static: site_map_keep inuse_space" "$(flat inuse_space "$h" site_map_keep)" 8388608
eq "static: site_map_free alloc_space" "$(flat alloc_space "$h" site_map_free)" 4194304
eq "static: site_map_free inuse_space" "$(flat inuse_space "$h" site_map_free)" 0
eq "static: site_remap_grow inuse_space" "$(flat inuse_space "$h" site_remap_grow)" 6291456
"$GO" tool pprof -traces "$S" "$h" 2>/dev/null | grep -E 'ha_|mapped_slow|note_mapped|mremap_slow|mmap$|mremap$' | head -3 |
	while read -r l; do echo "FAIL: static: heapalloc frame in a stack: $l"; done | grep -q . && fail "static: heapalloc frames in stacks"
finish
