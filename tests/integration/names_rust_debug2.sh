#!/bin/sh
# names_rust_dbg.sh with debug = true (2: full debug info).
. "$top_srcdir/tests/lib/emu.sh"
emu_rust
NAMES_RUST_DEBUG=2
. "$top_srcdir/tests/integration/names_rust_dbg.sh"
