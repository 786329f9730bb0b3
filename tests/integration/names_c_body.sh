# tests/integration/names_c_body.sh — the C ground truth (tests/integration/names_c.c and its own
# shared library tests/integration/names_c_lib.c), sourced by names_pie.sh and
# names_nopie.sh with PIEFLAGS set.  Built -O2 -g as a user would.
. "$top_srcdir/tests/lib/names_lib.sh"
CC=${CC:-cc}
$CC -O2 -g -fPIC -shared -o "$tmp/bin/libnames.so" "$top_srcdir/tests/integration/names_c_lib.c" 2>"$tmp/cc.err" &&
	$CC -O2 -g $PIEFLAGS -o "$tmp/bin/names_c" "$top_srcdir/tests/integration/names_c.c" \
		-L"$tmp/bin" -lnames -Wl,-rpath,"$tmp/bin" 2>>"$tmp/cc.err" ||
	{ cat "$tmp/cc.err"; echo "cannot build the test program"; exit 99; }
record "$tmp/bin/names_c"
# name sample_index top-column value (column 1 flat, 4 cum)
cat >"$tmp/sites" <<'END'
main inuse_space 1 21000
main inuse_objects 1 7
inl_leaf inuse_space 1 10000
inl_leaf inuse_objects 1 10
site_inlined inuse_space 4 10000
lib_keep inuse_space 1 12000
lib_keep inuse_objects 1 3
lib_keep alloc_space 1 20000
lib_keep alloc_objects 1 5
END
wrong='inl_next|\[names_c\]|\[libnames\.so\]'
same_numbers "$tmp/p.0001.heap" "$tmp/p.0001.pb.gz"
# perl pprof on the text file: the leaf written minus 1 names the inlined leaf
if have_perl; then
	eq "google-pprof inl_leaf" "$(perl_count "$tmp/p.0001.heap" "$tmp/bin/names_c" inl_leaf)" 10
	eq "google-pprof main" "$(perl_count "$tmp/p.0001.heap" "$tmp/bin/names_c" main)" 7
	eq "google-pprof lib_keep" "$(perl_count "$tmp/p.0001.heap" "$tmp/bin/names_c" lib_keep)" 3
	eq "google-pprof inl_next" "$(perl_count "$tmp/p.0001.heap" "$tmp/bin/names_c" inl_next)" 0
fi
# Go pprof 1.19 on the text file still reads the leaf inside its function
# (it subtracts 1 again; it shows no inlined frames, hence the symboliser)
[ "$PIEFLAGS" = -pie ] &&   # 1.19 names nothing of a non-PIE binary from a text file
	eq "go pprof text site_inlined" "$(gtop "$tmp/p.0001.heap" inuse_objects site_inlined 1 "$tmp/bin/names_c")" 10
eq "go pprof text inl_next" "$(gtop "$tmp/p.0001.heap" inuse_objects inl_next 1 "$tmp/bin/names_c")" 0
symbolize "$tmp/p.0001.heap" "$tmp/from_text.pb.gz"
symbolize "$tmp/p.0001.pb.gz" "$tmp/from_pb.pb.gz"
# the symbolised profiles need no binaries
rm -rf "$tmp/bin"
for f in "$tmp/from_text.pb.gz" "$tmp/from_pb.pb.gz"; do
	sites "$f"
	no_wrong "$f" "$wrong"
done
# file:line of the inlined leaf
"$GO" tool pprof -traces -lines "$tmp/from_pb.pb.gz" 2>/dev/null | grep -q 'inl_leaf .*names_c\.c:1[0-9]' ||
	fail "no file:line for inl_leaf: $(grep inl_leaf "$tmp/traces" | head -2)"
finish
