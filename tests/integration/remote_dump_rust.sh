#!/bin/sh
# remote_dump_rust.sh — `heapalloc dump PID` of a Rust program whose global
# allocator is the crate (tools/rust/heapalloc), started with no variable:
# tests/integration/rust_crate/src/bin/remote_sites.rs (tests/integration/remote_sites.c's `hold`
# mode) built with cargo --offline, linked both ways (shared, and
# HEAPALLOC_STATIC=1: heapalloc_root in the program's own symbol table),
# its binary deleted before the dump.  The named profile must give site_big
# and site_small their bytes within 4 of the standard errors of sampling at
# the always-on 2 MiB, site_gone nothing in use, the totals the program's own books
# (heapalloc::stats()) to the byte, and Rust names (remote_sites::site_big)
# with file:line in remote_sites.rs.  The program's exit status stays 0 and
# it writes nothing but its READY file.
. "$top_srcdir/tests/lib/emu.sh"
. "$top_srcdir/tests/lib/ready.sh"
# (cargo builds it for aarch64, but its dump fails as remote_dump.sh's would)
emu_rust
. "$top_srcdir/tests/lib/prof_lib.sh"
[ -n "${CARGO:-}" ] && [ -x "$CARGO" ] || CARGO=$(command -v cargo || true)
[ -n "$CARGO" ] || { echo "SKIP: cargo not found"; exit 77; }
H="$top_builddir/tools/heapalloc"
PY=${PYTHON3:-python3}
libs="$top_builddir/.libs"
[ -f "$libs/libheapalloc.so" ] && [ -f "$libs/libheapalloc.a" ] || { echo "missing $libs"; exit 99; }
# the path dependency ../../tools/rust/heapalloc, as in the source tree
mkdir -p "$tmp/src/tests/integration" "$tmp/src/tools/rust" "$tmp/run" "$tmp/cwd" || exit 99
cp -R "$top_srcdir/tests/integration/rust_crate" "$tmp/src/tests/integration/" &&
	cp -R "$top_srcdir/tools/rust/heapalloc" "$tmp/src/tools/rust/" &&
	chmod -R u+w "$tmp/src" || exit 99

for mode in shared static; do
	target="$top_builddir/tests/integration/remote_dump_rust.$mode.target"
	st=; [ $mode = static ] && st=1
	# as tests/integration/rust_crate.sh: the archive's own link flags (a sanitizer's runtime)
	rf=; [ $mode = static ] && for f in ${HA_LDFLAGS:-}; do
		rf="$rf -C link-arg=$f"
		case $f in -fsanitize=*undefined*) rf="$rf -C link-arg=-lubsan" ;; esac
	done
	RUSTFLAGS="${rf# }" HEAPALLOC_LIB_DIR="$libs" HEAPALLOC_STATIC="$st" CARGO_TARGET_DIR="$target" \
		"$CARGO" build --offline -q --manifest-path "$tmp/src/tests/integration/rust_crate/Cargo.toml" \
		--bin remote_sites 2>"$tmp/cargo.err" ||
		{ cat "$tmp/cargo.err"; fail "$mode: cargo cannot build remote_sites"; continue; }
	cp "$target/${rust_triple}debug/remote_sites" "$tmp/run/prog" || exit 99
	rm -f "$tmp/ready" "$tmp/in"
	mkfifo "$tmp/in" || exit 99
	(cd "$tmp/cwd" && exec "$tmp/run/prog" "$tmp/ready" <"$tmp/in" >"$tmp/prog.out" 2>"$tmp/prog.err") &
	pid=$!
	exec 7>"$tmp/in"
	program_ready "$tmp/ready" || { fail "$mode: the program never got ready: $(cat "$tmp/prog.err")"; exec 7>&-; wait $pid; continue; }
	rm -f "$tmp/run/prog"
	timeout 60 "$H" dump $pid -o "$tmp/$mode.pb.gz" 2>"$tmp/$mode.err" ||
		fail "$mode: dump exited $?: $(cat "$tmp/$mode.err")"
	"$PY" "$top_srcdir/tests/integration/remote_check.py" "$top_srcdir/tools" "$tmp/$mode.pb.gz" "$tmp/ready" 1 \
		"$pid" remote_sites:: remote_sites.rs >"$tmp/$mode.check" ||
		fail "$mode: $(cat "$tmp/$mode.check")"
	exec 7>&-
	wait $pid
	eq "$mode: exit status" $? 0
	eq "$mode: output" "$(cat "$tmp/prog.out" "$tmp/prog.err")" ""
	eq "$mode: no file in its directory" "$(ls "$tmp/cwd")" ""
done
finish
