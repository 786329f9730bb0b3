#!/bin/sh
# The README's link lines, each tried on a program that allocates only
# through libc (tests/integration/link_recipes_prog.c): gcc passes --as-needed by
# default on Debian and Ubuntu, so a plain -lheapalloc is dropped and the
# program runs on glibc's malloc with no profile and no message (checked
# here so the trap stays documented); -Wl,--no-as-needed, `pkg-config
# --libs heapalloc` and `pkg-config --libs heapalloc-static` must each give
# a process whose malloc is heapalloc's and that writes its exit profile
# with the 50001-byte strdup in it.  The .pc files are the build tree's,
# their libdir pointed at .libs.
. "$top_srcdir/tests/lib/prof_lib.sh"
PKG_CONFIG=$(command -v pkg-config || true)
[ -n "$PKG_CONFIG" ] || { echo "pkg-config not found"; exit 99; }
libs="$top_builddir/.libs"
[ -f "$libs/libheapalloc.so" ] && [ -f "$libs/libheapalloc.a" ] || { echo "missing $libs"; exit 99; }
pc() { PKG_CONFIG_PATH="$top_builddir" "$PKG_CONFIG" --define-variable=libdir="$libs" "$@"; }
prog="$top_srcdir/tests/integration/link_recipes_prog.c"
n=0

# try NAME OWNER LINK-FLAGS... — link with --as-needed in force (as Debian's
# gcc does), run under HEAPPROFILE, and check who serves malloc and the
# profile; OWNER "libc.so.6" means the trap: no profile, nothing on stderr.
try() {
	name=$1 owner=$2
	shift 2
	n=$((n + 1))
	# shellcheck disable=SC2086
	# HA_LDFLAGS: the library's own link flags (a sanitizer's runtime
	# for an archive built with one)
	$CC -o "$tmp/p$n" "$prog" -Wl,--as-needed "$@" -Wl,-rpath,"$libs" ${HA_LDFLAGS:-} 2>"$tmp/cc.err" ||
		{ fail "$name: link failed: $(cat "$tmp/cc.err")"; return; }
	mkdir "$tmp/d$n"
	HEAPPROFILE="$tmp/d$n/p" HEAP_PROFILE_SAMPLE_INTERVAL=1 HEAP_PROFILE_STATS=0 \
		"$tmp/p$n" >"$tmp/out" 2>"$tmp/err" || fail "$name: exit status $?: $(cat "$tmp/err")"
	eq "$name: malloc" "$(cat "$tmp/out")" "malloc $owner"
	needed=$(readelf -dW "$tmp/p$n" | grep -c 'NEEDED.*\[libheapalloc\.so')
	if [ "$owner" = libc.so.6 ]; then
		eq "$name: libheapalloc.so needed" "$needed" 0
		eq "$name: files written" "$(ls "$tmp/d$n")" ""
		eq "$name: stderr" "$(cat "$tmp/err")" ""
		return
	fi
	eq "$name: libheapalloc.so needed" "$needed" "$([ "$owner" = self ] && echo 0 || echo 1)"
	eq "$name: files written" "$(ls "$tmp/d$n" | tr '\n' ' ')" "p.0001.heap p.log "
	grep -q "^Dumping heap profile to $tmp/d$n/p.0001.heap (Exiting, " "$tmp/err" ||
		fail "$name: stderr: $(cat "$tmp/err")"
	[ -f "$tmp/d$n/p.0001.heap" ] || return
	shape "$tmp/d$n/p.0001.heap"
	grep -Eq '^ *1: +50001 \[ *1: +50001\] @' "$tmp/d$n/p.0001.heap" ||
		fail "$name: no 50001-byte strdup in the profile: $(head -5 "$tmp/d$n/p.0001.heap")"
}

try "-lheapalloc under --as-needed" libc.so.6 -L"$libs" -lheapalloc
try "-Wl,--no-as-needed -lheapalloc" libheapalloc.so.0 -L"$libs" -Wl,--no-as-needed -lheapalloc
try "pkg-config --libs heapalloc" libheapalloc.so.0 $(pc --libs heapalloc)
try "pkg-config --static --libs heapalloc" libheapalloc.so.0 $(pc --static --libs heapalloc)
try "pkg-config --libs heapalloc-static" self $(pc --libs heapalloc-static)
finish
