#!/bin/sh
# heapalloc::HeapAlloc as a cargo program's #[global_allocator], and
# heapalloc::pprof_heap()'s profile (tests/integration/rust_crate/src/bin/pprof_heap.rs),
# linked both ways (shared, HEAPALLOC_STATIC=1).  With every allocation
# sampled, each site_* function's blocks — plain, calloc'd, 64-, 256- and
# 4096-aligned, an over-aligned and a plain realloc — must show under its
# name in go tool pprof with their exact bytes and counts; the profile must
# be what a .pb.gz dump is (sample types, period, the binary's build ID).
# The program itself checks alignment, contents and pprof_heap's errors.
# Also: build.rs names HEAPALLOC_LIB_DIR and PKG_CONFIG_PATH when it finds
# no library.
. "$top_srcdir/tests/lib/emu.sh"
emu_rust
. "$top_srcdir/tests/lib/prof_lib.sh"
[ -n "${CARGO:-}" ] && [ -x "$CARGO" ] || CARGO=$(command -v cargo || true)
[ -n "$CARGO" ] || { echo "SKIP: cargo not found"; exit 77; }
need_go
SYM="$top_builddir/tools/heapalloc-symbolize"
[ -x "$SYM" ] || { echo "missing $SYM"; exit 99; }
libs="$top_builddir/.libs"
[ -f "$libs/libheapalloc.so" ] && [ -f "$libs/libheapalloc.a" ] || { echo "missing $libs"; exit 99; }
# the path dependency ../../tools/rust/heapalloc, as in the source tree
mkdir -p "$tmp/src/tests/integration" "$tmp/src/tools/rust" || exit 99
cp -R "$top_srcdir/tests/integration/rust_crate" "$tmp/src/tests/integration/" &&
	cp -R "$top_srcdir/tools/rust/heapalloc" "$tmp/src/tools/rust/" &&
	chmod -R u+w "$tmp/src" || exit 99
manifest="$tmp/src/tests/integration/rust_crate/Cargo.toml"

# no library where it is told to look: one message saying how to point at it
HEAPALLOC_LIB_DIR="$tmp/nowhere" CARGO_TARGET_DIR="$tmp/nolib.target" \
	"$CARGO" build --offline -q --manifest-path "$manifest" >"$tmp/nolib.err" 2>&1 &&
	fail "cargo build succeeded with HEAPALLOC_LIB_DIR=$tmp/nowhere"
grep -q "heapalloc: no libheapalloc.so in $tmp/nowhere (HEAPALLOC_LIB_DIR)\.\$" "$tmp/nolib.err" &&
	grep -q "HEAPALLOC_LIB_DIR=/opt/heapalloc/lib cargo build" "$tmp/nolib.err" &&
	grep -q "PKG_CONFIG_PATH=/opt/heapalloc/lib/pkgconfig cargo build" "$tmp/nolib.err" ||
	fail "build.rs message: $(cat "$tmp/nolib.err")"

# cum TYPE NAME — go pprof's cumulative value of function NAME in the
# symbolised profile (bytes or objects, units stripped), 0 when not listed
cum() {
	"$GO" tool pprof -top -unit=B -nodefraction=0 -edgefraction=0 -nodecount=100000 \
		-sample_index="$1" "$tmp/$mode/sym.pb.gz" 2>/dev/null |
		awk -v n="$2" '$NF == n { v = $4; sub(/B$/, "", v); print v; found = 1; exit }
			END { if (!found) print 0 }'
}

for mode in shared static; do
	target="$top_builddir/tests/integration/rust_crate_pprof.$mode.target"
	st=; [ $mode = static ] && st=1
	# as tests/integration/rust_crate.sh: the archive's own link flags (a sanitizer's runtime)
	rf=; [ $mode = static ] && for f in ${HA_LDFLAGS:-}; do
		rf="$rf -C link-arg=$f"
		case $f in -fsanitize=*undefined*) rf="$rf -C link-arg=-lubsan" ;; esac
	done
	RUSTFLAGS="${rf# }" HEAPALLOC_LIB_DIR="$libs" HEAPALLOC_STATIC="$st" CARGO_TARGET_DIR="$target" \
		"$CARGO" build --offline -q --manifest-path "$manifest" 2>"$tmp/cargo.err" ||
		{ cat "$tmp/cargo.err"; fail "$mode: cargo cannot build tests/integration/rust_crate"; continue; }
	bin="$target/${rust_triple}debug/pprof_heap"
	mkdir "$tmp/$mode"
	pb="$tmp/$mode/mem.pb.gz"
	HEAP_PROFILE_SAMPLE_INTERVAL=1 HEAP_PROFILE_STATS=0 "$bin" "$pb" "$tmp/$mode/p" \
		>"$tmp/out" 2>"$tmp/err" || { fail "$mode: exit status $?: $(cat "$tmp/out" "$tmp/err")"; continue; }
	eq "$mode: output" "$(cat "$tmp/out")" "ok $(wc -c <"$pb")"

	# what a .pb.gz dump is: four sample types, inuse_space the default,
	# period = the interval, the program's mapping with its build ID
	"$GO" tool pprof -raw "$pb" >"$tmp/raw" 2>"$tmp/raw.err" || fail "$mode: pprof -raw: $(cat "$tmp/raw.err")"
	eq "$mode: period type" "$(grep '^PeriodType:' "$tmp/raw")" "PeriodType: space bytes"
	eq "$mode: period" "$(grep '^Period:' "$tmp/raw")" "Period: 1"
	eq "$mode: sample types" "$(grep '^alloc_objects' "$tmp/raw" | tr -s ' ' | sed 's/ $//')" \
		"alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt]"
	bid=$(readelf -nW "$bin" 2>/dev/null | sed -n 's/.*Build ID: *//p')
	if [ -n "$bid" ]; then
		grep -q "^[0-9]*: 0x[0-9a-f]*/0x[0-9a-f]*/0x[0-9a-f]* $bin $bid " "$tmp/raw" ||
			fail "$mode: no mapping of $bin with build ID $bid: $(sed -n '/^Mappings/,$p' "$tmp/raw" | head -5)"
	else
		echo "$mode: $bin has no build ID: mapping check skipped"
	fi

	"$SYM" -o "$tmp/$mode/sym.pb.gz" "$pb" 2>"$tmp/sym.err" ||
		{ fail "$mode: heapalloc-symbolize: $(cat "$tmp/sym.err")"; continue; }
	# site inuse_objects inuse_space alloc_objects alloc_space
	while read -r site io ib ao ab; do
		eq "$mode: $site inuse_objects" "$(cum inuse_objects "pprof_heap::$site")" "$io"
		eq "$mode: $site inuse_space" "$(cum inuse_space "pprof_heap::$site")" "$ib"
		eq "$mode: $site alloc_objects" "$(cum alloc_objects "pprof_heap::$site")" "$ao"
		eq "$mode: $site alloc_space" "$(cum alloc_space "pprof_heap::$site")" "$ab"
	done <<'END'
site_plain 1 100000 1 100000
site_zeroed 1 50000 1 50000
site_align64 1 64000 1 64000
site_align256 1 51200 1 51200
site_align4096 1 40960 1 40960
site_zeroed4096 1 49152 1 49152
site_grow256 1 51200 2 76800
site_grow 1 40000 2 48000
END
done
finish
