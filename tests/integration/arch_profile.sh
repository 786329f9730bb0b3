#!/bin/sh
# tests/integration/arch_profile.sh NATIVE_BUILD ARM64_BUILD — the same program
# (tests/integration/arch_sites.c), built by each build's compiler and run with that
# build's library preloaded, recording every allocation
# (HEAP_PROFILE_SAMPLE_INTERVAL=1): go tool pprof must name the same sites
# with the same bytes and objects, flat and cumulative, in use and
# allocated, and the same stacks below every site_* function, on x86-64 and
# on aarch64 (under qemu-user through binfmt_misc).  tools/check --arch
# arm64 runs it after the arm64 tier.  Exit 0 pass, 1 fail, 77 skip.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
[ $# = 2 ] || { echo "usage: tests/integration/arch_profile.sh NATIVE_BUILD ARM64_BUILD"; exit 99; }
GO=$(command -v go) || { echo "SKIP: go not found (tools/install-deps)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/arch_profile.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# run NAME BUILD — build and profile the program for BUILD's host; the
# sites (index, function, flat, cum) and the site_* stacks to $tmp/NAME.*
run() {
	cc=$(sed -n 's/^CC = //p' "$2/Makefile")
	lib="$2/.libs/libheapalloc.so"
	[ -n "$cc" ] && [ -f "$lib" ] || { echo "missing $2's build"; exit 99; }
	$cc -O2 -g -fno-inline -fno-optimize-sibling-calls -pthread "$top/tests/integration/arch_sites.c" \
		-o "$tmp/$1" || { fail "$1: $cc failed"; return; }
	HEAPPROFILE="$tmp/$1" HEAP_PROFILE_SAMPLE_INTERVAL=1 LD_PRELOAD="$lib" "$tmp/$1" \
		2>"$tmp/$1.err" || fail "$1: the program exited $?"
	f="$tmp/$1.0001.heap"
	[ -f "$f" ] || { fail "$1: no profile: $(cat "$tmp/$1.err")"; return; }
	for i in alloc_space alloc_objects inuse_space inuse_objects; do
		"$GO" tool pprof -top -unit=B -nodefraction=0 -nodecount=100000 -sample_index=$i \
			"$tmp/$1" "$f" 2>/dev/null |
			awk -v i=$i 'f && $NF !~ /^\[/ { print i, $NF, $1, $4 } /flat%/ { f = 1 }'
	done | sort >"$tmp/$1.sites"
	for i in alloc_space inuse_objects; do
		"$GO" tool pprof -traces -focus='^site_' -sample_index=$i "$tmp/$1" "$f" 2>/dev/null |
			tail -n +3 | sed "s/\[$1\]/[prog]/"
	done >"$tmp/$1.stacks"
}
run x86_64 "$1"
run aarch64 "$2"
file "$tmp/aarch64" 2>/dev/null | grep -q 'ARM aarch64' || fail "the arm64 program is not aarch64: $(file "$tmp/aarch64")"

# the numbers arch_sites.c allocates, so that two empty profiles never agree
want() { grep -qx "$1" "$tmp/x86_64.sites" || fail "x86-64: no '$1' in $(tr '\n' ';' <"$tmp/x86_64.sites")"; }
want "alloc_space site_big 10485760B 10485760B"
want "alloc_objects site_small 1400B 1400B"
want "inuse_objects site_calloc 245B 245B"
want "inuse_space site_aligned 300000B 300000B"
want "alloc_objects deep 0 1000B"
want "inuse_objects thread_body 0 200B"
want "alloc_objects by_value 50B 50B"
diff "$tmp/x86_64.sites" "$tmp/aarch64.sites" >"$tmp/d" || fail "sites differ (x86-64 <, aarch64 >): $(cat "$tmp/d")"
n=$(grep -c 'bytes:' "$tmp/x86_64.stacks")
[ "$n" -ge 40 ] || fail "x86-64: only $n site_* stacks"
diff "$tmp/x86_64.stacks" "$tmp/aarch64.stacks" >"$tmp/d" || fail "site_* stacks differ (x86-64 <, aarch64 >): $(head -40 "$tmp/d")"
[ "$fails" = 0 ] || exit 1
echo "PASS: $(wc -l <"$tmp/x86_64.sites") site values and $n stacks alike on x86-64 and aarch64"
