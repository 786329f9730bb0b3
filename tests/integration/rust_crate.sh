#!/bin/sh
# The Rust crate (tools/rust/heapalloc, std only) used by a program
# (tests/integration/rust_crate) built with `cargo build --offline`, both ways its
# build.rs links: the shared library (HEAPALLOC_LIB_DIR, rpath from the
# program's build.rs) and HEAPALLOC_STATIC=1 (the whole archive).  Run under
# HEAPPROFILE, the program checks its 8 MiB Vec in stats(), dump("x")'s
# file, the peak of a 12 MiB Vec already dropped, start/stop/running; here:
# what it links, its exit status and the files it leaves.
. "$top_srcdir/tests/lib/emu.sh"
emu_rust
. "$top_srcdir/tests/lib/prof_lib.sh"
# the version is written once, in configure.ac's AC_INIT: the crate's
# Cargo.toml repeats it (cargo cannot read it from elsewhere), checked here
HA_VERSION=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$top_builddir/config.h")
[ -n "$HA_VERSION" ] || { echo "no PACKAGE_VERSION in $top_builddir/config.h"; exit 99; }
export HA_VERSION
eq "tools/rust/heapalloc/Cargo.toml's version (configure.ac's AC_INIT)" \
	"$(sed -n 's/^version = "\(.*\)"$/\1/p' "$top_srcdir/tools/rust/heapalloc/Cargo.toml")" "$HA_VERSION"
[ -n "${CARGO:-}" ] && [ -x "$CARGO" ] || CARGO=$(command -v cargo || true)
[ -n "$CARGO" ] || { [ "$fails" -eq 0 ] || exit 1; echo "SKIP: cargo not found"; exit 77; }
libs="$top_builddir/.libs"
[ -f "$libs/libheapalloc.so" ] && [ -f "$libs/libheapalloc.a" ] || { echo "missing $libs"; exit 99; }
# the path dependency ../../tools/rust/heapalloc, as in the source tree
mkdir -p "$tmp/src/tests/integration" "$tmp/src/tools/rust" || exit 99
cp -R "$top_srcdir/tests/integration/rust_crate" "$tmp/src/tests/integration/" &&
	cp -R "$top_srcdir/tools/rust/heapalloc" "$tmp/src/tools/rust/" &&
	chmod -R u+w "$tmp/src" || exit 99

for mode in shared static; do
	target="$top_builddir/tests/integration/rust_crate.$mode.target"
	st=; [ $mode = static ] && st=1
	# the archive's own link flags (a sanitizer's runtime) reach cc through rustc
	# (rustc links with -nodefaultlibs, so UBSan's runtime is named outright)
	rf=; [ $mode = static ] && for f in ${HA_LDFLAGS:-}; do
		rf="$rf -C link-arg=$f"
		case $f in -fsanitize=*undefined*) rf="$rf -C link-arg=-lubsan" ;; esac
	done
	RUSTFLAGS="${rf# }" HEAPALLOC_LIB_DIR="$libs" HEAPALLOC_STATIC="$st" CARGO_TARGET_DIR="$target" \
		"$CARGO" build --offline -q --manifest-path "$tmp/src/tests/integration/rust_crate/Cargo.toml" \
		2>"$tmp/cargo.err" || {
		cat "$tmp/cargo.err"
		grep -q 'heapalloc' "$tmp/cargo.err" && { fail "$mode: cargo build"; continue; }
		fail "$mode: cargo cannot build tests/integration/rust_crate"; continue
	}
	bin="$target/${rust_triple}debug/rust_crate"
	needed=$(readelf -dW "$bin" | grep -c 'NEEDED.*\[libheapalloc\.so\.0\]')
	eq "$mode: libheapalloc.so.0 needed" "$needed" "$([ $mode = shared ] && echo 1 || echo 0)"
	# static: heapalloc's malloc is the program's own, found first by libc
	defined=$(nm "$bin" 2>/dev/null | grep -c ' T malloc$')
	eq "$mode: malloc defined in the program" "$defined" "$([ $mode = static ] && echo 1 || echo 0)"
	mkdir "$tmp/$mode"
	HEAPPROFILE="$tmp/$mode/p" HEAP_PROFILE_PEAK_INTERVAL=1 HEAP_PROFILE_STATS=0 \
		"$bin" >"$tmp/out" 2>"$tmp/err" || fail "$mode: exit status $?: $(cat "$tmp/out" "$tmp/err")"
	eq "$mode: output" "$(cat "$tmp/out")" "in_use +8388608 dumps 1"
	grep -q "^Dumping heap profile to $tmp/$mode/p.0001.heap (x)\$" "$tmp/err" ||
		fail "$mode: stderr: $(cat "$tmp/err")"
	eq "$mode: files" "$(ls "$tmp/$mode" | tr '\n' ' ')" \
		"p.0001.heap p.log p.peak.heap p_again.0002.heap p_again.log "
	[ -f "$tmp/$mode/p.0001.heap" ] && shape "$tmp/$mode/p.0001.heap"
done
finish
