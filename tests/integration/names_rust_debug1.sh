#!/bin/sh
# names_rust_dbg.sh with debug = 1 (limited: functions and lines, no types).
. "$top_srcdir/tests/lib/emu.sh"
emu_rust
NAMES_RUST_DEBUG=1
. "$top_srcdir/tests/integration/names_rust_dbg.sh"
