#!/bin/sh
# gperftools issue 1603: a profiled Rust program whose std::env::vars()
# panics because the environment was made non-UTF-8.  Build a std-only
# program with rustc (offline), run it with heapalloc preloaded under
# HEAPPROFILE: parent and child run clean and both write profiles.
. "$top_srcdir/tests/lib/emu.sh"
emu_rust
. "$top_srcdir/tests/lib/prof_lib.sh"
# under emulation emu_rust's, which builds for the library's architecture
RUSTC=${emu_rustc:-$(command -v rustc || true)}
[ -z "$RUSTC" ] && [ -n "${CARGO:-}" ] && [ -x "$(dirname "$CARGO")/rustc" ] && RUSTC="$(dirname "$CARGO")/rustc"
[ -n "$RUSTC" ] || { echo "SKIP: rustc not found"; exit 77; }
[ -f "$HA_LIB" ] || { echo "missing $HA_LIB"; exit 99; }
"$RUSTC" $rustc_target -C opt-level=1 -o "$tmp/renv" "$top_srcdir/tests/integration/prof_rust_env.rs" 2>"$tmp/rustc.err" ||
	{ cat "$tmp/rustc.err"; echo "FAIL: rustc cannot build tests/integration/prof_rust_env.rs"; exit 1; }
mkdir "$tmp/r"
pfx="$tmp/r/rüst"
LD_PRELOAD="$HA_LIB" HEAPPROFILE="$pfx" "$tmp/renv" >"$tmp/out" 2>"$tmp/err" ||
	fail "rust program failed: $(cat "$tmp/out" "$tmp/err")"
grep -q panicked "$tmp/err" && fail "panic: $(cat "$tmp/err")"
grep -q "^parent .*HEAPPROFILE=$pfx\$" "$tmp/out" || fail "parent output: $(cat "$tmp/out")"
grep -q "^child " "$tmp/out" || fail "child output: $(cat "$tmp/out")"
[ -f "$pfx.0001.heap" ] || fail "no parent profile: $(ls "$tmp/r")"
eq "child profiles" "$(ls "$tmp/r" | grep -c '^rüst_[0-9]*\.0001\.heap$')" 1
finish
