#!/bin/sh
# names_fds.sh — the descriptors run out while a profile is named in the
# process, and come back (bench/soak's fault: the service's RLIMIT_NOFILE at
# its count for 5 s).  A load of zlib or of the symboliser, or a mapping's
# file, that failed for want of a descriptor must be tried again at the
# next profile: before, the first two were given up for the process's life
# (profiles uncompressed and unnamed for good) and the third kept its
# frames as addresses for as long as it stayed mapped.  Each failure is
# one stderr line.  No go needed: the names are read from the protobuf.
set -u
[ -f "$HA_LIB" ] || { echo "missing $HA_LIB"; exit 99; }
[ -f "$top_builddir/.libs/libheapalloc-sym.so" ] || { echo "SKIP: no symboliser plugin"; exit 77; }
CC=${CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/names_fds.XXXXXX") || exit 99
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
for l in a b; do
	# not a tail call: fdt_site_X stays a frame of the stack
	printf '#include <stdlib.h>\n#include <string.h>\n__attribute__((noinline)) void *fdt_site_%s(size_t n)\n{ char *p = malloc(n); if (p) memset(p, 1, n); return p; }\n' \
		$l >"$tmp/$l.c"
	$CC -O2 -g -shared -fPIC -o "$tmp/libfdt_$l.so" "$tmp/$l.c" 2>>"$tmp/cc.err" ||
		{ cat "$tmp/cc.err"; exit 99; }
done
$CC -O2 -g -o "$tmp/names_fds" "$top_srcdir/tests/stress/names_fds.c" -ldl 2>>"$tmp/cc.err" ||
	{ cat "$tmp/cc.err"; exit 99; }
mkdir "$tmp/out"
env -u HEAP_PROFILE_SYMBOLIZE LD_PRELOAD="$HA_LIB" HEAPPROFILE="$tmp/hp" \
	HEAP_PROFILE_SAMPLE_INTERVAL=1 "$tmp/names_fds" "$tmp/out" "$tmp/libfdt_a.so" \
	"$tmp/libfdt_b.so" 2>"$tmp/err" || { fail "names_fds exited $?: $(cat "$tmp/err")"; }

# has K NAME — profile K names NAME (1) or not (0); gzip or not, as written
has() { gzip -dcf "$tmp/out/p$1.pb.gz" 2>/dev/null | grep -a -c "$2" | sed 's/^[1-9][0-9]*$/1/'; }
gz() { [ "$(head -c2 "$tmp/out/p$1.pb.gz" | od -An -tx1 | tr -d ' ')" = 1f8b ] && echo 1 || echo 0; }
check() { [ "$2" = "$3" ] || fail "$1: got $2, want $3"; }

for k in 1 2 3 4; do [ -s "$tmp/out/p$k.pb.gz" ] || { fail "no profile $k: $(cat "$tmp/err")"; }; done
[ "$fails" -eq 0 ] || exit 1
# every descriptor taken: no zlib, no symboliser (the fault took)
check "p1 gzip" "$(gz 1)" 0
check "p1 fdt_main_site" "$(has 1 fdt_main_site)" 0
# back: both loaded now
check "p2 gzip" "$(gz 2)" 1
check "p2 fdt_main_site" "$(has 2 fdt_main_site)" 1
# one descriptor: the main program's file was open already, the first new
# file the symboliser opens takes it (which one depends on the stacks' order),
# so at least one of the two libraries' cannot be opened
check "p3 fdt_main_site" "$(has 3 fdt_main_site)" 1
[ $(($(has 3 fdt_site_a) + $(has 3 fdt_site_b))) -le 1 ] || fail "p3 names both libraries: no fault"
# back: both libraries named
check "p4 fdt_site_a" "$(has 4 fdt_site_a)" 1
check "p4 fdt_site_b" "$(has 4 fdt_site_b)" 1
# one line each: zlib, the symboliser, the files that could not be opened
check "zlib lines" "$(grep -c 'cannot load zlib now' "$tmp/err")" 1
check "symboliser lines" "$(grep -c 'cannot load the symboliser .* now' "$tmp/err")" 1
check "file lines" "$(grep -c ': cannot open it now (Too many open files); its frames stay addresses until a later profile opens it$' "$tmp/err")" 1
bad=$(grep -v '^Starting tracking\|^Dumping heap profile\|cannot load zlib now\|cannot load the symboliser .* now\|cannot open it now' "$tmp/err")
[ -z "$bad" ] || fail "other stderr lines: $bad"
[ "$fails" -eq 0 ] && { echo PASS; exit 0; }
echo "$fails failure(s)"
exit 1
