#!/bin/sh
# C++ ground truth (tests/integration/names_cxx.cc, 4 lines): a global std::vector<int>
# filled by a noinline function, built g++ -O2 -g.  push_back doubles the
# capacity from 1 to 2^20 ints: 21 blocks, 4 * (2^21 - 1) = 8388604 bytes,
# all under fill (Go pprof 1.19 names none of it from the text file).
. "$top_srcdir/tests/lib/names_lib.sh"
CXX=${CXX:-c++}
$CXX -O2 -g -o "$tmp/bin/names_cxx" "$top_srcdir/tests/integration/names_cxx.cc" 2>"$tmp/cc.err" ||
	{ cat "$tmp/cc.err"; echo "cannot build the test program"; exit 99; }
record "$tmp/bin/names_cxx"
cat >"$tmp/sites" <<'END'
fill alloc_space 4 8388604
fill alloc_objects 4 21
main alloc_space 4 8388604
END
same_numbers "$tmp/p.0001.heap" "$tmp/p.0001.pb.gz"
# (not for an aarch64 build: the perl pprof drops fill, the outer function
# of the chain addr2line -i gives for its call site, there; Go pprof and
# heapalloc-symbolize below name it)
if [ "$(sed -n 's/^host_cpu = //p' "$top_builddir/Makefile")" = aarch64 ]; then
	echo "google-pprof fill not checked: aarch64 build"
elif have_perl; then
	eq "google-pprof fill" "$(perl_count "$tmp/p.0001.heap" "$tmp/bin/names_cxx" fill alloc_objects 4)" 21
fi
symbolize "$tmp/p.0001.heap" "$tmp/from_text.pb.gz"
symbolize "$tmp/p.0001.pb.gz" "$tmp/from_pb.pb.gz"
rm -rf "$tmp/bin"
for f in "$tmp/from_text.pb.gz" "$tmp/from_pb.pb.gz"; do
	sites "$f"
	no_wrong "$f" '\[names_cxx\]|\[known\]|^ +[0-9.]+[kMG]?B +0x'
	# the vector's own frames are named, demangled, inlined ones included
	grep -q 'std::vector<int, std::allocator<int> >::' "$tmp/traces" ||
		fail "$(basename "$f"): no demangled std::vector frame: $(sed -n 5,12p "$tmp/traces")"
done
finish
