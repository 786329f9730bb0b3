#!/bin/sh
# names_served.sh — profiles named in the process: the C and C++ ground
# truths (tests/integration/names_served.c, tests/integration/names_served_cxx.cc, -O2 -g) record
# every allocation, their running copy is deleted, then they take
# heapalloc_profile_pprof (the plugin libheapalloc-sym.so names it) and
# write it out.  go tool pprof, with no binary anywhere, must give each site
# its exact bytes under its own function and file:line, inlined frames
# included, and the program's mapping must say it carries all that.  With
# the plugin out of reach: one stderr line, the same numbers as addresses;
# HEAP_PROFILE_SYMBOLIZE=0: addresses, no line.  The plugin's own mallocs
# (dlopen, libdw) stay out of the books: sampled, the exit dump's in-use
# figure is the same with names as without (allocated is not: the profile
# handed to the program is larger with names).
. "$top_srcdir/tests/lib/names_lib.sh"
unset HEAP_PROFILE_SYMBOLIZE
CC=${CC:-cc}
CXX=${CXX:-c++}
src="$top_srcdir/tests/integration/names_served.c"
srcxx="$top_srcdir/tests/integration/names_served_cxx.cc"
$CC -O2 -g -o "$tmp/bin/served_c" "$src" -ldl 2>"$tmp/cc.err" &&
	$CXX -O2 -g -o "$tmp/bin/served_cxx" "$srcxx" -ldl 2>>"$tmp/cc.err" ||
	{ cat "$tmp/cc.err"; echo "cannot build the test programs"; exit 99; }
mkdir "$tmp/run" "$tmp/lib"

# serve BIN OUT LIB [VAR=VALUE...] — run a copy of BIN under LIB recording
# every allocation; delete the copy once its sites have allocated; the
# program then writes its in-memory profile to OUT.  stderr: $tmp/serve.err
serve() {
	bin=$1 out=$2 lib=$3
	shift 3
	cp "$bin" "$tmp/run/prog" || exit 99
	rm -f "$tmp/ready"
	env LD_PRELOAD="$lib" HEAPPROFILE="$tmp/p" HEAP_PROFILE_SAMPLE_INTERVAL=1 "$@" \
		"$tmp/run/prog" "$out" "$tmp/ready" 2>"$tmp/serve.err" &
	pid=$!
	i=0
	while [ ! -f "$tmp/ready" ] && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	rm -f "$tmp/run/prog"
	wait $pid || fail "$(basename "$bin") exited $?: $(cat "$tmp/serve.err")"
	[ -f "$out" ] || { fail "no profile from $(basename "$bin")"; finish; }
}

# lineof PATTERN FILE — the number of the line of FILE holding PATTERN
lineof() { grep -n -F "$1" "$2" | head -1 | cut -d: -f1; }

# flags FILE — go pprof's flags of the program's mapping ([FN][FL][LN][IN])
flags() {
	"$GO" tool pprof -raw "$1" 2>/dev/null | grep ' /.*/run/prog (deleted)' | head -1 |
		sed -n 's/.*\(\[FN\].*\)$/\1/p'
}

# --- C ---------------------------------------------------------------------
serve "$tmp/bin/served_c" "$tmp/c.pb.gz" "$HA_LIB"
grep -q 'symboliser\|stay addresses' "$tmp/serve.err" && fail "C: $(cat "$tmp/serve.err")"
cat >"$tmp/sites" <<'END'
site_direct inuse_space 1 20000
site_direct inuse_objects 1 5
site_direct alloc_space 1 20000
inl_leaf inuse_space 1 10000
inl_leaf inuse_objects 1 10
site_outer inuse_space 4 10000
site_outer inuse_space 1 0
END
sites "$tmp/c.pb.gz"
no_wrong "$tmp/c.pb.gz" '^ +[0-9.]+[kMG]?B +0x|\[prog\]'
"$GO" tool pprof -traces -lines "$tmp/c.pb.gz" >"$tmp/lines" 2>&1
for want in "site_direct .*/names_served\\.c:$(lineof 'malloc(4000)' "$src")\$" \
	"inl_leaf .*/names_served\\.c:$(lineof 'malloc(1000)' "$src") (inline)\$" \
	"site_outer .*/names_served\\.c:$(lineof 'inl_leaf(i);' "$src")\$"; do
	grep -q "$want" "$tmp/lines" || fail "C: no frame '$want' in: $(sed -n 5,20p "$tmp/lines")"
done
eq "C mapping flags" "$(flags "$tmp/c.pb.gz")" "[FN][FL][LN][IN]"

# --- C++ -------------------------------------------------------------------
serve "$tmp/bin/served_cxx" "$tmp/cxx.pb.gz" "$HA_LIB"
grep -q 'symboliser\|stay addresses' "$tmp/serve.err" && fail "C++: $(cat "$tmp/serve.err")"
cat >"$tmp/sites" <<'END'
app::keep_blocks inuse_space 1 18000
app::keep_blocks inuse_objects 1 6
app::Pool::grow inuse_space 1 10000
app::Pool::grow inuse_objects 1 4
app::fill inuse_space 4 10000
app::fill inuse_space 1 0
END
sites "$tmp/cxx.pb.gz"
no_wrong "$tmp/cxx.pb.gz" '^ +[0-9.]+[kMG]?B +0x|\[prog\]'
"$GO" tool pprof -traces -lines "$tmp/cxx.pb.gz" >"$tmp/lines" 2>&1
for want in "app::keep_blocks .*/names_served_cxx\\.cc:$(lineof 'new char[3000]' "$srcxx")\$" \
	"app::Pool::grow .*/names_served_cxx\\.cc:$(lineof 'new char[2500]' "$srcxx") (inline)\$" \
	"app::fill .*/names_served_cxx\\.cc:$(lineof 'p.grow();' "$srcxx")\$"; do
	grep -q "$want" "$tmp/lines" || fail "C++: no frame '$want' in: $(sed -n 5,20p "$tmp/lines")"
done
eq "C++ mapping flags" "$(flags "$tmp/cxx.pb.gz")" "[FN][FL][LN][IN]"

# --- fallbacks ---------------------------------------------------------------
# the library alone in a directory: no plugin beside it, none on the path
cp "$HA_LIB" "$tmp/lib/libheapalloc.so" || exit 99
serve "$tmp/bin/served_c" "$tmp/bare.pb.gz" "$tmp/lib/libheapalloc.so"
eq "no plugin: stderr lines about it" "$(grep -c 'cannot load the symboliser libheapalloc-sym.so' "$tmp/serve.err")" 1
eq "no plugin: inuse_space total" "$(total "$tmp/bare.pb.gz" inuse_space)" 30000
eq "no plugin: site_direct named" "$(gtop "$tmp/bare.pb.gz" inuse_space site_direct 1)" 0
eq "no plugin: mapping flags" "$(flags "$tmp/bare.pb.gz")" ""
# names turned off: addresses, and nothing said
serve "$tmp/bin/served_c" "$tmp/off.pb.gz" "$HA_LIB" HEAP_PROFILE_SYMBOLIZE=0
eq "off: stderr lines about it" "$(grep -c 'symboliser' "$tmp/serve.err")" 0
eq "off: inuse_space total" "$(total "$tmp/off.pb.gz" inuse_space)" 30000
eq "off: site_direct named" "$(gtop "$tmp/off.pb.gz" inuse_space site_direct 1)" 0

# the books: the exit dump's in use (log column 5)
exit_books() { grep -v '^#' "$tmp/p.log" | tail -1 | cut -f5; }
serve "$tmp/bin/served_c" "$tmp/s1.pb.gz" "$HA_LIB" HEAP_PROFILE_SAMPLE_INTERVAL=65536
named=$(exit_books)
serve "$tmp/bin/served_c" "$tmp/s0.pb.gz" "$HA_LIB" HEAP_PROFILE_SAMPLE_INTERVAL=65536 \
	HEAP_PROFILE_SYMBOLIZE=0
eq "the plugin's mallocs are not the program's" "$named" "$(exit_books)"
finish
