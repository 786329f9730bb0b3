#!/bin/sh
# heapalloc-symbolize when the binaries are gone or moved: missing files
# leave addresses with one warning naming each file; BINARY arguments stand
# in for moved files (by name); a file whose build ID differs is refused.
. "$top_srcdir/tests/lib/names_lib.sh"
CC=${CC:-cc}
$CC -O2 -g -fPIC -shared -o "$tmp/bin/libnames.so" "$top_srcdir/tests/integration/names_c_lib.c" 2>"$tmp/cc.err" &&
	$CC -O2 -g -o "$tmp/bin/names_c" "$top_srcdir/tests/integration/names_c.c" \
		-L"$tmp/bin" -lnames -Wl,-rpath,"$tmp/bin" 2>>"$tmp/cc.err" &&
	$CC -O0 -g -o "$tmp/names_c.other" "$top_srcdir/tests/integration/names_c.c" \
		-L"$tmp/bin" -lnames 2>>"$tmp/cc.err" ||
	{ cat "$tmp/cc.err"; echo "cannot build the test program"; exit 99; }
record "$tmp/bin/names_c"
mv "$tmp/bin" "$tmp/moved"

# missing: addresses kept, one warning per file, the same numbers
"$SYM" -o "$tmp/missing.pb.gz" "$tmp/p.0001.pb.gz" 2>"$tmp/missing.err" || fail "missing binaries: exit $?"
eq "warnings naming names_c" "$(grep -c "^heapalloc-symbolize: $tmp/bin/names_c: " "$tmp/missing.err")" 1
eq "warnings naming libnames.so" "$(grep -c "^heapalloc-symbolize: $tmp/bin/libnames.so: " "$tmp/missing.err")" 1
eq "missing: main" "$(gtop "$tmp/missing.pb.gz" inuse_space main 1)" 0
eq "missing: total" "$(total "$tmp/missing.pb.gz" inuse_space)" "$(total "$tmp/p.0001.pb.gz" inuse_space)"

# moved: named from the BINARY arguments
symbolize "$tmp/p.0001.pb.gz" "$tmp/moved.pb.gz" "$tmp/moved/names_c" "$tmp/moved/libnames.so"
eq "moved: warnings" "$(cat "$tmp/sym.err")" ""
cat >"$tmp/sites" <<'END'
main inuse_space 1 21000
inl_leaf inuse_space 1 10000
lib_keep inuse_space 1 12000
END
sites "$tmp/moved.pb.gz"

# another build of the program under the same name: refused by build ID
mkdir "$tmp/other"
mv "$tmp/names_c.other" "$tmp/other/names_c"
"$SYM" -o "$tmp/other.pb.gz" "$tmp/p.0001.pb.gz" "$tmp/other/names_c" "$tmp/moved/libnames.so" \
	2>"$tmp/other.err" || fail "other binary: exit $?"
eq "build ID warning" "$(grep -c "^heapalloc-symbolize: $tmp/other/names_c: build ID [0-9a-f]* is not the profile's [0-9a-f]*" "$tmp/other.err")" 1
eq "other: main" "$(gtop "$tmp/other.pb.gz" inuse_space main 1)" 0
eq "other: lib_keep" "$(gtop "$tmp/other.pb.gz" inuse_space lib_keep 1)" 12000

# bad input: one line, non-zero exit, nothing written
echo "not a profile" >"$tmp/junk"
"$SYM" -o "$tmp/junk.pb.gz" "$tmp/junk" 2>"$tmp/junk.err" && fail "junk input accepted"
eq "junk: lines" "$(wc -l <"$tmp/junk.err")" 1
[ -e "$tmp/junk.pb.gz" ] && fail "junk input wrote $tmp/junk.pb.gz"
finish
