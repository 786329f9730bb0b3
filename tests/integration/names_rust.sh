#!/bin/sh
# Rust ground truth (tests/integration/names_rust, std only): `cargo build --release`
# with cargo's defaults — rustc 1.90 and later link with lld (older ones
# with cc's default, GNU ld), whose text segment has
# p_vaddr - p_offset = 0x1000, the layout Go pprof 1.19 misplaces by a page
# (it then names drop_in_place, handle_alloc_error, from_iter_in_place).
# Release builds carry no DWARF: names come from the symbol table.
. "$top_srcdir/tests/lib/emu.sh"
emu_rust
. "$top_srcdir/tests/lib/names_lib.sh"
[ -n "${CARGO:-}" ] && [ -x "$CARGO" ] || CARGO=$(command -v cargo || true)
[ -n "$CARGO" ] || { echo "SKIP: cargo not found"; exit 77; }
cp -R "$top_srcdir/tests/integration/names_rust" "$tmp/src" && chmod -R u+w "$tmp/src" || exit 99
# NAMES_RUST_V0=1 (names_rust_v0.sh): Rust's v0 symbol mangling instead
target="$top_builddir/tests/integration/names_rust${NAMES_RUST_V0:+_v0}.target"
RUSTFLAGS="${NAMES_RUST_V0:+-Csymbol-mangling-version=v0}" CARGO_TARGET_DIR="$target" \
	"$CARGO" build --release --offline -q --manifest-path "$tmp/src/Cargo.toml" 2>"$tmp/cargo.err" ||
	{ cat "$tmp/cargo.err"; echo "FAIL: cargo cannot build tests/integration/names_rust"; exit 1; }
cp "$target/${rust_triple}release/names_rust" "$tmp/bin/" || exit 99
if [ -n "${NAMES_RUST_V0:-}" ]; then
	nm "$tmp/bin/names_rust" 2>/dev/null | grep -q ' _RNvCs[0-9A-Za-z_]*10names_rust9read_file$' ||
		{ echo "SKIP: rustc did not mangle with v0"; exit 77; }
fi
readelf -lW "$tmp/bin/names_rust" 2>/dev/null | awk '$1 == "LOAD" && / E / { print $2, $3; exit }' |
	while read -r off va; do printf 'text segment: p_vaddr - p_offset = 0x%x\n' $((va - off)); done
record "$tmp/bin/names_rust"
# read_file: vec![1u8; 3000000]; build_index: 50000 u64 collected;
# make_names: 1000 boxed [u8; 96] + the Vec of 1000 pointers
cat >"$tmp/sites" <<'END'
names_rust::read_file inuse_space 1 3000000
names_rust::read_file inuse_objects 1 1
names_rust::build_index inuse_space 1 400000
names_rust::build_index inuse_objects 1 1
names_rust::make_names inuse_space 1 104000
names_rust::make_names inuse_objects 1 1001
names_rust::main inuse_space 4 3504000
END
wrong='drop_in_place|handle_alloc_error|from_iter_in_place|\[names_rust\]'
same_numbers "$tmp/p.0001.heap" "$tmp/p.0001.pb.gz"
if have_perl; then
	eq "google-pprof read_file" "$(perl_count "$tmp/p.0001.heap" "$tmp/bin/names_rust" names_rust::read_file)" 1
	eq "google-pprof make_names" "$(perl_count "$tmp/p.0001.heap" "$tmp/bin/names_rust" names_rust::make_names)" 1001
fi
symbolize "$tmp/p.0001.heap" "$tmp/from_text.pb.gz"
symbolize "$tmp/p.0001.pb.gz" "$tmp/from_pb.pb.gz"
rm -rf "$tmp/bin"
for f in "$tmp/from_text.pb.gz" "$tmp/from_pb.pb.gz"; do
	sites "$f"
	no_wrong "$f" "$wrong"
done
finish
