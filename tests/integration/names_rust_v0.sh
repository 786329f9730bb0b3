#!/bin/sh
# names_rust.sh with Rust's v0 symbol mangling (-Csymbol-mangling-version=v0).
. "$top_srcdir/tests/lib/emu.sh"
emu_rust
NAMES_RUST_V0=1
. "$top_srcdir/tests/integration/names_rust.sh"
