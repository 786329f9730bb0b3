#!/bin/sh
# names_rust_dbg.sh with debug = 1 (limited: functions and lines, no types).
. "$top_srcdir/tests/emu.sh"
emu_skip "cargo builds for this machine's x86-64 (no aarch64 Rust target installed)"
NAMES_RUST_DEBUG=1
. "$top_srcdir/tests/names_rust_dbg.sh"
