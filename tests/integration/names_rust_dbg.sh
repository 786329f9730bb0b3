#!/bin/sh
# Rust ground truth with debug info (tests/integration/names_rust_dbg, std only):
# `cargo build --release` with the profile's debug = $NAMES_RUST_DEBUG
# (1, 2 or line-tables-only), linked once by lld and once by GNU ld
# (-C link-arg=-fuse-ld=...), and GNU ld's once more without .debug_aranges.
# After heapalloc-symbolize, with the binary gone, go tool pprof shows each
# user frame under its crate path with the file:line of its "site:"
# comment, inlined frames included, and the C main rustc generates never
# merged with names_rust_dbg::main.
. "$top_srcdir/tests/lib/names_lib.sh"
level=${NAMES_RUST_DEBUG:?}
[ -n "${CARGO:-}" ] && [ -x "$CARGO" ] || CARGO=$(command -v cargo || true)
[ -n "$CARGO" ] || { echo "SKIP: cargo not found"; exit 77; }
src="$top_srcdir/tests/integration/names_rust_dbg/src/main.rs"
# the line of the comment "site: WHAT"
at() { grep -n "// site: $1\$" "$src" | cut -d: -f1; }
crate=names_rust_dbg
# word_table is never out of line: line-tables-only gives it no linkage
# name and no symbol, so its DWARF name is all there is
wt=$crate::word_table
[ "$level" = line-tables-only ] && wt=word_table
# expected stacks: the frames in src/main.rs of each sample, leaf first,
# then the C main
cat >"$tmp/want" <<END
$crate::open_session src/main.rs:$(at open_session) < $crate::main src/main.rs:$(at 'main>open_session') < main
$wt src/main.rs:$(at word_table) (inline) < $crate::index_words src/main.rs:$(at 'index_words>word_table') < $crate::main src/main.rs:$(at 'main>index_words') < main
$crate::tokenize src/main.rs:$(at tokenize) (inline) < $crate::index_words src/main.rs:$(at 'index_words>tokenize') < $crate::main src/main.rs:$(at 'main>index_words') < main
$crate::tokenize src/main.rs:$(at tokenize) < $crate::main src/main.rs:$(at 'main>tokenize') < main
$crate::main src/main.rs:$(at main) < main
END
sort -o "$tmp/want" "$tmp/want"
# cumulative bytes and objects (open_session 3000000; word_table 50000
# u64; tokenize 1000 u32 inlined, 2000 out of line; main's Box 4096)
cat >"$tmp/sites" <<END
$crate::open_session inuse_space 4 3000000
$wt inuse_space 4 400000
$crate::tokenize inuse_space 4 12000
$crate::tokenize inuse_objects 4 2
$crate::index_words inuse_space 4 404000
$crate::index_words inuse_objects 4 2
$crate::main inuse_space 4 3416096
$crate::main inuse_objects 4 5
END

# user_stacks PROFILE — one line per sample with a frame in src/main.rs:
# those frames and any named main, as go tool pprof -traces -lines shows them
user_stacks() {
	"$GO" tool pprof -traces -lines "$1" 2>/dev/null | awk '
		function flush() { if (s ~ / src\/main\.rs:/) print s; s = "" }
		/^-+\+-+$/ { flush(); next }
		{ f = $0; sub(/^ *([0-9.]+[kMG]?B? +)?/, "", f)   # the flat value
		  if (f ~ / src\/main\.rs:/ || f ~ /^main( |$)/) s = s == "" ? f : s " < " f }
		END { flush() }' | sort
}

# cum_sites PROFILE — each "name index column value" line of $tmp/sites
# against go pprof -top, a function inlined in some places and not in others
# being "(partial-inline)"
cum_sites() {
	while read -r name idx col want; do
		got=$("$GO" tool pprof -top -unit=B -nodefraction=0 -edgefraction=0 -nodecount=100000 \
			-sample_index="$idx" "$1" 2>/dev/null | awk -v n="$name" -v c="$col" '
			$NF == n || ($NF ~ /^\((partial-)?inline\)$/ && $(NF - 1) == n) {
				v = $c; sub(/B$/, "", v); print v; found = 1; exit }
			END { if (!found) print 0 }')
		eq "$run $(basename "$1"): $name $idx" "$got" "$want"
	done <"$tmp/sites"
}

# under emulation the cross gcc links (emu_rust), and its -fuse-ld=lld runs
# TARGET-ld.lld from PATH: Debian's lld (every target in one binary) is
# there as ld.lld only; objcopy is the target's too
objcopy=objcopy
if [ -n "$rust_triple" ]; then
	objcopy=${emu_ld%gcc}objcopy
	mkdir "$tmp/lld" && ln -s "$(command -v ld.lld)" "$tmp/lld/${emu_ld%gcc}ld.lld" || exit 99
	PATH=$tmp/lld:$PATH
fi

# the third run: GNU ld's binary without .debug_aranges, so units are
# found by their own ranges alone
for run in lld bfd bfd-noaranges; do
	ld=${run%-noaranges}
	rm -rf "$tmp/src" "$tmp/bin" "$tmp"/p.* "$tmp"/top.* && mkdir "$tmp/bin" || exit 99
	cp -R "$top_srcdir/tests/integration/names_rust_dbg" "$tmp/src" && chmod -R u+w "$tmp/src" || exit 99
	target="$top_builddir/tests/integration/names_rust_dbg.$level.$ld.target"
	CARGO_PROFILE_RELEASE_DEBUG=$level RUSTFLAGS="-C link-arg=-fuse-ld=$ld" CARGO_TARGET_DIR="$target" \
		"$CARGO" build --release --offline -q --manifest-path "$tmp/src/Cargo.toml" 2>"$tmp/cargo.err" || {
		cat "$tmp/cargo.err"
		# cargo before 1.71 knows debug levels 0, 1, 2, true and false only
		[ "$level" = line-tables-only ] && grep -q 'expected a boolean or an integer' "$tmp/cargo.err" &&
			{ echo "SKIP: $("$CARGO" --version) predates debug = \"line-tables-only\" (cargo 1.71)"; exit 77; }
		grep -q 'fuse-ld' "$tmp/cargo.err" && { fail "$ld: cannot link with -fuse-ld=$ld"; continue; }
		fail "$ld: cargo cannot build tests/integration/names_rust_dbg"; continue
	}
	cp "$target/${rust_triple}release/$crate" "$tmp/bin/" || exit 99
	if [ "$run" = bfd-noaranges ]; then
		"$objcopy" --remove-section=.debug_aranges "$tmp/bin/$crate" || exit 99
		eq "$run: .debug_aranges left" "$(readelf -SW "$tmp/bin/$crate" | grep -c '\.debug_aranges')" 0
	fi
	# the linker asked for is the one that linked (lld signs .comment)
	by_lld=$(readelf -p .comment "$tmp/bin/$crate" 2>/dev/null | grep -c 'Linker: .*LLD')
	eq "$ld: linked by lld" "$by_lld" "$([ $ld = lld ] && echo 1 || echo 0)"
	record "$tmp/bin/$crate"
	symbolize "$tmp/p.0001.heap" "$tmp/from_text.pb.gz"
	symbolize "$tmp/p.0001.pb.gz" "$tmp/from_pb.pb.gz"
	grep -q 'no debug info' "$tmp/sym.err" && fail "$run: $(cat "$tmp/sym.err")"
	rm -rf "$tmp/bin"
	for f in "$tmp/from_text.pb.gz" "$tmp/from_pb.pb.gz"; do
		user_stacks "$f" >"$tmp/got"
		cmp -s "$tmp/got" "$tmp/want" ||
			fail "$run $(basename "$f"): stacks differ (- want, + got): $(diff "$tmp/want" "$tmp/got" | grep '^[<>]')"
		cum_sites "$f"
	done
done
finish
