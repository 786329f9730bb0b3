#!/bin/sh
# heapalloc growth on a C++ program (tests/integration/cmd_growth_cxx.cc) whose heap
# grows in libstdc++ templates, every allocation recorded, two dumps of each
# format: the same four sites with their exact bytes from the text dumps,
# the pprof dumps, one of each, and copies named by heapalloc-symbolize read
# after the binary is gone; each site led by the program's own frame with
# file:line, the library frames after it in brackets with pprof's short
# names; --full-names keeps the template arguments; the raw dumps without
# the binary: one warning line, the program's frames as addresses.
. "$top_srcdir/tests/lib/prof_lib.sh"
H="$top_builddir/tools/heapalloc"
S="$top_builddir/tools/heapalloc-symbolize"
G="$top_builddir/tests/integration/cmd_growth_cxx"
for f in "$H" "$S" "$G"; do [ -x "$f" ] || { echo "missing $f"; exit 99; }; done
unset LD_PRELOAD

# the binary is a copy, so that it can be taken away at the end
cp "$G" "$tmp/shop" || exit 99
"$H" run -o "$tmp/P" --sample 1 --format both -- "$tmp/shop" 2>"$tmp/run.err" || fail "run exited $?"
for f in P.0001.heap P.0002.heap P.0001.pb.gz P.0002.pb.gz; do
	[ -f "$tmp/$f" ] || { echo "no $f: $(cat "$tmp/run.err")"; exit 99; }
done

# line N of the source: the one with "// growth: WHAT"
ln() { grep -n "// growth: $1\$" "$top_srcdir/tests/integration/cmd_growth_cxx.cc" | cut -d: -f1; }
main_rec="main cmd_growth_cxx.cc:$(ln record_orders)"
main_keep="main cmd_growth_cxx.cc:$(ln keep_names)"
keep="keep_names cmd_growth_cxx.cc:$(ln names) <- $main_keep"
want=" 16384 16384 32768 +0 shop::Ledger::add cmd_growth_cxx.cc:$(ln 'the orders') <- record_orders cmd_growth_cxx.cc:$(ln add) <- $main_rec
 6500 6500 13000 +100 $keep
 3200 3200 6400 +100 $keep
 1024 1024 2048 +0 $keep"

# rows OUT — the rows without their bracketed library frames
rows() { tail -n +3 "$1" | sed 's/  \[via .*\]$//' | tr -s ' '; }
# via OUT N — row N's library frames
via() { tail -n +3 "$1" | sed -n "$2{s/.*  \[via \(.*\)\]\$/\1/p}"; }

# growth WHAT OLD NEW — the four sites, exact, and the short names below them
growth() {
	"$H" growth "$tmp/$2" "$tmp/$3" >"$tmp/g.out" 2>"$tmp/g.err"
	eq "$1: status" $? 0
	eq "$1: stderr" "$(cat "$tmp/g.err")" ""
	eq "$1: title" "$(head -1 "$tmp/g.out")" "in-use growth $tmp/$2 -> $tmp/$3: 26.5 KiB in 4 sites"
	eq "$1: rows" "$(rows "$tmp/g.out")" "$want"
	via "$tmp/g.out" 1 | grep -Eq '(^| <- )std::vector::_M_realloc_(insert|append) vector.tcc:[0-9]+ <- std::vector::push_back stl_vector.h:[0-9]+$' ||
		fail "$1: vector's frames: $(via "$tmp/g.out" 1)"
	via "$tmp/g.out" 2 | grep -q 'std::__cxx11::basic_string::basic_string' ||
		fail "$1: string's frames: $(via "$tmp/g.out" 2)"
	[ -z "$(via "$tmp/g.out" 3)" ] || fail "$1: new std::string has library frames: $(via "$tmp/g.out" 3)"
	tail -n +3 "$tmp/g.out" | grep -Eq '<[^-]|[(>]' && fail "$1: a long name: $(tail -n +3 "$tmp/g.out" | grep -E '<[^-]|[(>]' | head -1)"
	return 0
}
growth "text" P.0001.heap P.0002.heap
growth "pprof" P.0001.pb.gz P.0002.pb.gz
growth "text to pprof" P.0001.heap P.0002.pb.gz

# --full-names: the template arguments stay
"$H" growth --full-names --top 1 "$tmp/P.0001.pb.gz" "$tmp/P.0002.pb.gz" >"$tmp/f.out" 2>&1 || fail "--full-names exited $?"
eq "full: rows" "$(rows "$tmp/f.out")" \
	" 16384 16384 32768 +0 shop::Ledger<shop::Order>::add cmd_growth_cxx.cc:$(ln 'the orders') <- record_orders cmd_growth_cxx.cc:$(ln add) <- $main_rec"
via "$tmp/f.out" 1 | grep -q 'std::vector<shop::Order, std::allocator<shop::Order> >::push_back stl_vector.h:' ||
	fail "full: vector's frames: $(via "$tmp/f.out" 1)"

# named copies, read with the binary gone: the same sites
"$S" "$tmp/P.0001.pb.gz" 2>/dev/null && "$S" "$tmp/P.0002.heap" 2>/dev/null || fail "heapalloc-symbolize exited $?"
rm "$tmp/shop"
growth "symbolised" P.0001.sym.pb.gz P.0002.sym.pb.gz

# raw dumps with the binary gone: one warning, the program's frames as
# addresses (so the compiler's two copies of main's calls are two sites)
"$H" growth --top 1 "$tmp/P.0001.heap" "$tmp/P.0002.heap" >"$tmp/g.out" 2>"$tmp/g.err"
eq "no binary: status" $? 0
eq "no binary: warning" "$(cat "$tmp/g.err")" \
	"heapalloc: growth: heapalloc-symbolize: $tmp/shop: cannot read it (No such file or directory); its frames stay addresses"
tail -n +3 "$tmp/g.out" | grep -Eq '^ +32768 +0 +32768 +\+1  0x[0-9a-f]+ <- 0x[0-9a-f]+ <- 0x[0-9a-f]+ <- 0x[0-9a-f]+ <- __libc_start_call_main ' ||
	fail "no binary: $(cat "$tmp/g.out")"
finish
