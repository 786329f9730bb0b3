#!/bin/sh
# names_rust_dbg.sh with debug = "line-tables-only" (no linkage names).
. "$top_srcdir/tests/lib/emu.sh"
emu_rust
NAMES_RUST_DEBUG=line-tables-only
. "$top_srcdir/tests/integration/names_rust_dbg.sh"
