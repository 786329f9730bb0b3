#!/bin/sh
# remote_find.sh — `heapalloc dump PID` finds heapalloc_root where a
# packaged or statically linked program has it (tools/ha_proc.py
# find_root): in a libheapalloc.so stripped as dh_strip strips it (.dynsym
# only), looked up in the loaded image's own hash table; in a program
# linked with libheapalloc.a (its .symtab); and in that program stripped
# (no symbol names it: the root in its data, by its magic and pid).  Each
# gives tests/integration/remote_sites.c's profile (its sites by name where the program
# keeps its symbols, the totals its own books to the byte); a process
# without heapalloc is refused in one line.
. "$top_srcdir/tests/lib/ready.sh"
. "$top_srcdir/tests/lib/names_lib.sh"
unset HEAP_PROFILE_SAMPLE_INTERVAL HEAP_PROFILE_HTTP HEAP_PROFILE_FORMAT HEAP_PROFILE_CALIBRATE
H="$top_builddir/tools/heapalloc"
PY=${PYTHON3:-python3}
CC=${CC:-cc}
PKG_CONFIG=$(command -v pkg-config || true)
STRIP=${STRIP:-strip}   # the build's (Makefile.am): a cross build's strips its own architecture
command -v "$STRIP" >/dev/null 2>&1 || { echo "SKIP: no strip"; exit 77; }
libs="$top_builddir/.libs"
[ -f "$libs/libheapalloc.so" ] && [ -f "$libs/libheapalloc.a" ] || { echo "missing $libs"; exit 99; }
mkdir "$tmp/run" "$tmp/lib"

$CC -O2 -g -o "$tmp/bin/sites" "$top_srcdir/tests/integration/remote_sites.c" -ldl -lpthread 2>"$tmp/cc.err" ||
	{ cat "$tmp/cc.err"; echo "cannot build remote_sites"; exit 99; }
# dh_strip's strip of a shared library
cp "$libs/libheapalloc.so" "$tmp/lib/libheapalloc.so.0"
"$STRIP" --remove-section=.comment --remove-section=.note --strip-unneeded "$tmp/lib/libheapalloc.so.0" ||
	exit 99
readelf -SW "$tmp/lib/libheapalloc.so.0" | grep -q ' \.symtab ' && { echo "HARD ERROR: strip kept .symtab"; exit 99; }
# libheapalloc.a linked in, as `pkg-config --libs heapalloc-static` links it
# (the program finds its books with dlsym: that one function exported)
static=
if [ -n "$PKG_CONFIG" ]; then
	# shellcheck disable=SC2046
	$CC -O2 -g -o "$tmp/bin/static" "$top_srcdir/tests/integration/remote_sites.c" \
		$(PKG_CONFIG_PATH="$top_builddir" "$PKG_CONFIG" --define-variable=libdir="$libs" --libs heapalloc-static) \
		-Wl,--export-dynamic-symbol=heapalloc_get_stats_size ${HA_LDFLAGS:-} 2>"$tmp/cc.err" && static=1 || echo "note: no static link: $(head -3 "$tmp/cc.err")"
fi

# run NAME BIN [PRELOAD] — start a copy of BIN (no variable) in hold mode,
# dump it, check the profile (names unless NONAMES is set), stop it
run() {
	cp "$2" "$tmp/run/prog" || exit 99
	rm -f "$tmp/ready" "$tmp/in"
	mkfifo "$tmp/in"
	env ${3:+LD_PRELOAD="$3"} "$tmp/run/prog" "$tmp/ready" hold <"$tmp/in" >"$tmp/$1.out" 2>"$tmp/$1.perr" &
	pid=$!
	exec 7>"$tmp/in"
	if program_ready "$tmp/ready"; then
		timeout 60 "$H" dump $pid -o "$tmp/$1.pb.gz" 2>"$tmp/$1.err" ||
			fail "$1: dump exited $?: $(cat "$tmp/$1.err")"
		grep -q "process $pid: .* in use" "$tmp/$1.err" || fail "$1: $(cat "$tmp/$1.err")"
		[ -f "$tmp/$1.pb.gz" ] &&
			{ "$PY" "$top_srcdir/tests/integration/remote_check.py" "$top_srcdir/tools" "$tmp/$1.pb.gz" "$tmp/ready" \
				1 "$pid" "" "${NONAMES:+-}remote_sites.c" >"$tmp/$1.check" || fail "$1: $(cat "$tmp/$1.check")"; }
	else
		fail "$1: the program never got ready: $(cat "$tmp/$1.perr")"
	fi
	exec 7>&-
	wait $pid
	eq "$1: exit status" $? 0
}

run stripped_lib "$tmp/bin/sites" "$tmp/lib/libheapalloc.so.0"
if [ -n "$static" ]; then
	nm "$tmp/bin/static" | grep -q ' heapalloc_root$' || fail "static: no heapalloc_root in .symtab"
	nm -D "$tmp/bin/static" 2>/dev/null | grep -q ' heapalloc_root$' && fail "static: heapalloc_root exported"
	run static "$tmp/bin/static"
	cp "$tmp/bin/static" "$tmp/bin/static_stripped"
	"$STRIP" "$tmp/bin/static_stripped" || exit 99
	nm "$tmp/bin/static_stripped" 2>&1 | grep -q heapalloc_root && fail "static_stripped: still has symbols"
	NONAMES=1 run static_stripped "$tmp/bin/static_stripped"
fi

# a process without heapalloc: one line, before any file of it is read whole
sleep 60 &
spid=$!
timeout 60 "$H" dump $spid -o "$tmp/none.pb.gz" 2>"$tmp/none.err"
eq "none: exit status" $? 1
eq "none: one line" "$(wc -l <"$tmp/none.err")" 1
grep -q "process $spid does not run heapalloc (no heapalloc_root in the dynamic symbols of its [0-9]* mapped files, its program's symbol table or data)" \
	"$tmp/none.err" || fail "none: $(cat "$tmp/none.err")"
kill $spid
wait $spid 2>/dev/null
finish
