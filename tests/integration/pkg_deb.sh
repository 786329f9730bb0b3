#!/bin/sh
# tests/integration/pkg_deb.sh — the Debian packages as a user meets them: build them
# from a copy of the tree and its upstream tarball (dpkg-buildpackage -us -uc,
# source and binaries; the package build's
# own tests are left to DEB_BUILD_OPTIONS, nocheck by default here since
# .ci/run has run the suite), lintian (errors fail, warnings are listed),
# `apt-get install ./*.deb`, then the README's lines against the installed
# package: a program linked by `pkg-config --libs heapalloc`, one by
# `heapalloc-static`, one built without heapalloc run by `heapalloc run`,
# each profiled with every allocation recorded; go pprof must read its
# known site's exact bytes (10 blocks of 4096) from each profile, and from
# heapalloc-symbolize's named copy without the binary.  The packages are
# purged at the end (also on failure), so later steps test the build tree.
# Not in `make check` (it installs system-wide): .ci/run runs it.
# Needs root (or sudo) and dpkg-buildpackage, lintian, go; ends with
# "N passed, N failed".  HA_DEBS=DIR uses the .debs in DIR instead of
# building them.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
pass=0 fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { pass=$((pass + 1)); }
# eq WHAT GOT WANT
eq() { if [ "$2" = "$3" ]; then ok; else fail "$1: got '$2', want '$3'"; fi; }
finish() { echo "$pass passed, $fails failed"; [ "$fails" -eq 0 ]; exit; }
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
for t in dpkg-buildpackage lintian go cc pkg-config; do
	command -v $t >/dev/null || { fail "$t not found (tools/install-deps installs it)"; finish; }
done
PKGS="heapalloc libheapalloc-dev libheapalloc0"
ALL="$PKGS heapalloc-dbgsym libheapalloc0-dbgsym"
for p in $ALL; do
	if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		fail "$p is installed already: remove it first (this test installs and purges it)"
		finish
	fi
done
work=$(mktemp -d "${TMPDIR:-/tmp}/pkg_deb.XXXXXX") || exit 1
installed=false
cleanup() {
	$installed && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $ALL >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# the tree as committed plus what is not ignored (no build directories)
mkdir "$work/heapalloc"
if [ -d "$top/.git" ] || [ -f "$top/.git" ]; then
	(cd "$top" && git ls-files -co --exclude-standard -z | xargs -0 tar cf - 2>/dev/null) |
		tar xf - -C "$work/heapalloc"
else
	(cd "$top" && tar cf - --exclude='./build*' --exclude=./debian/build .) | tar xf - -C "$work/heapalloc"
fi
[ -f "$work/heapalloc/debian/control" ] || { fail "no debian/control in the copy"; finish; }

start=$(date +%s)
if [ -n "${HA_DEBS:-}" ]; then      # .debs built before (e.g. by an earlier run): used as they are
	cp "$HA_DEBS"/*.deb "$HA_DEBS"/*.changes "$HA_DEBS"/*.buildinfo "$work/" || { fail "no .debs in $HA_DEBS"; finish; }
else
	# the upstream tarball is the tree without debian/, as a release ships it;
	# the source package (3.0 (quilt)) is built against it beside the binaries
	upstream=$(dpkg-parsechangelog -l "$work/heapalloc/debian/changelog" -S Version | sed 's/-[^-]*$//')
	tar czf "$work/heapalloc_$upstream.orig.tar.gz" -C "$work" --exclude=heapalloc/debian heapalloc
	(cd "$work/heapalloc" && DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS-nocheck} parallel=2" \
		dpkg-buildpackage -us -uc) >"$work/build.log" 2>&1 ||
		{ tail -40 "$work/build.log"; fail "dpkg-buildpackage failed"; finish; }
	echo "pkg_deb: dpkg-buildpackage took $(($(date +%s) - start)) s"
fi
for p in $PKGS; do
	[ -f "$(ls "$work/${p}_"*.deb 2>/dev/null | head -1)" ] && ok || fail "no ${p}_*.deb built"
done
if [ -z "${HA_DEBS:-}" ]; then
	[ -f "$(ls "$work"/heapalloc_*.debian.tar.* 2>/dev/null | head -1)" ] && ok ||
		fail "no heapalloc_*.debian.tar.* built: the source package is not 3.0 (quilt)"
fi

# lintian: errors fail, the rest is listed
lintian --info "$work"/*.changes >"$work/lintian.out" 2>&1
grep '^E: ' "$work/lintian.out" | while read -r l; do echo "lintian error: $l"; done
eq "lintian errors" "$(grep -c '^E: ' "$work/lintian.out")" 0
grep -E '^(W|I): ' "$work/lintian.out" | sed 's/^/lintian: /'

# installed as a user installs them
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$work"/*.deb >"$work/apt.log" 2>&1 ||
	{ cat "$work/apt.log"; fail "apt-get install ./*.deb"; finish; }
installed=true
version=$(dpkg-parsechangelog -l "$work/heapalloc/debian/changelog" -S Version)
eq "pkg-config --modversion heapalloc" "$(pkg-config --modversion heapalloc)" "${version%%-*}"
for m in heapalloc.1 heapalloc-symbolize.1 heapalloc.3; do
	[ -f "/usr/share/man/man${m##*.}/$m.gz" ] && ok || fail "man page $m not installed"
done

# the packaged library's fast paths, built with Debian's hardening flags, are
# within the ceilings bench/instr checks on the upstream build
if command -v valgrind >/dev/null; then
	lib=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/libheapalloc.so.0
	if python3 "$top/bench/instr" --fast-paths --lib "$lib" >"$work/instr.log" 2>&1; then
		ok
		grep '^| ' "$work/instr.log" | sed 's/^/pkg_deb: fast paths: /'
	else
		fail "the packaged library's fast paths (bench/instr --fast-paths --lib $lib): $(grep -E 'FAIL|\*\*|Error' "$work/instr.log" | head -3)"
	fi
else
	echo "pkg_deb: SKIP the packaged fast paths: no valgrind (tools/install-deps installs it)"
fi

cat >"$work/prog.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#ifndef PLAIN
#include <heapalloc.h>
#endif
static void *volatile keep[10];
__attribute__((noinline)) void leak_site(int i) { keep[i] = malloc(4096); }
int main(void)
{
	for (int i = 0; i < 10; i++)
		leak_site(i);
#ifdef SERVED
	void *buf;
	size_t len;
	FILE *f = fopen("served.pb.gz", "wb");
	if (heapalloc_profile_pprof(&buf, &len) != 0 || !f || fwrite(buf, 1, len, f) != len ||
	    fclose(f) != 0)
		return 1;
	free(buf);
#endif
#ifndef PLAIN
	printf("%s\n", heapalloc_version());
#endif
	return 0;
}
EOF
# site FILE BINARY — go pprof's in-use objects and bytes of leak_site
site() {
	for idx in inuse_objects inuse_space; do
		go tool pprof -top -unit=B -nodefraction=0 -sample_index=$idx $2 "$1" 2>/dev/null |
			awk '$NF == "leak_site" { v = $1; sub(/B$/, "", v); print v; f = 1; exit }
				END { if (!f) print 0 }'
	done | tr '\n' ' '
}
cd "$work" || exit 1
# profile NAME CMD... — run under the profiler, every allocation recorded
profile() {
	name=$1
	shift
	mkdir "$work/d_$name"
	HEAPPROFILE="$work/d_$name/p" HEAP_PROFILE_SAMPLE_INTERVAL=1 "$@" >"$work/$name.out" 2>"$work/$name.err" ||
		fail "$name: exit status $?: $(cat "$work/$name.err")"
}
# the README's lines, the installed .pc files and library
cc -g -O1 -o shared prog.c $(pkg-config --cflags --libs heapalloc) || fail "cc ... pkg-config --libs heapalloc"
cc -g -O1 -o static prog.c $(pkg-config --cflags --libs heapalloc-static) ||
	fail "cc ... pkg-config --libs heapalloc-static"
cc -g -O1 -DPLAIN -o plain prog.c || fail "cc plain"
profile shared ./shared
eq "shared: version" "$(cat shared.out)" "${version%%-*}"
eq "shared: libheapalloc.so.0 needed" "$(readelf -dW shared | grep -c 'NEEDED.*\[libheapalloc\.so\.0\]')" 1
eq "shared: leak_site" "$(site d_shared/p.0001.heap ./shared)" "10 40960 "
profile static ./static
eq "static: no libheapalloc.so needed" "$(readelf -dW static | grep -c 'NEEDED.*libheapalloc')" 0
eq "static: leak_site" "$(site d_static/p.0001.heap ./static)" "10 40960 "
mkdir d_run
heapalloc run --sample 1 -o "$work/d_run/p" -- ./plain >run.out 2>run.err ||
	fail "heapalloc run: status $?: $(cat run.err)"
grep -q "^heapalloc: profiling ./plain: profiles go to $work/d_run/p\.\* (/usr/lib/.*/libheapalloc\.so" run.err ||
	fail "heapalloc run: $(head -1 run.err)"
eq "heapalloc run: leak_site" "$(site d_run/p.0001.heap ./plain)" "10 40960 "
# named by the installed heapalloc-symbolize: pprof then needs no binary
heapalloc-symbolize -o named.pb.gz d_shared/p.0001.heap 2>sym.err || fail "heapalloc-symbolize: $(cat sym.err)"
mv shared shared.gone
eq "symbolized: leak_site" "$(site named.pb.gz '')" "10 40960 "
# named in the process by the plugin libheapalloc0 carries in its private
# folder, the binary gone before pprof reads it
dpkg -L libheapalloc0 | grep -q '^/usr/lib/.*/heapalloc/libheapalloc-sym\.so$' ||
	fail "libheapalloc0 does not carry heapalloc/libheapalloc-sym.so"
cc -g -O1 -DSERVED -o served prog.c $(pkg-config --cflags --libs heapalloc) || fail "cc -DSERVED"
mkdir d_served
HEAPPROFILE="$work/d_served/p" HEAP_PROFILE_SAMPLE_INTERVAL=1 ./served >served.out 2>served.err ||
	fail "served: status $?: $(cat served.err)"
rm -f served
eq "served, named in the process: leak_site" "$(site served.pb.gz '')" "10 40960 "
finish
