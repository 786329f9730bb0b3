#!/bin/sh
# names_rust.sh with Rust's v0 symbol mangling (-Csymbol-mangling-version=v0).
. "$top_srcdir/tests/emu.sh"
emu_skip "cargo builds for this machine's x86-64 (no aarch64 Rust target installed)"
NAMES_RUST_V0=1
. "$top_srcdir/tests/names_rust.sh"
