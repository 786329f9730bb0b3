#!/bin/sh
# heapalloc run before a run that cannot write a profile: a fully static
# program, an output directory that is missing or not writable, a setuid
# program run by another user.  Each: heapalloc's first stderr line names
# the cause, the program still runs with its own output and exit status,
# nothing is written, and the generic "no profile written" line is not
# printed.  The unwritable directory runs as nobody when root (setpriv),
# the setuid case needs root and a mount that honours the bit.
. "$top_srcdir/tests/lib/prof_lib.sh"
H="$top_builddir/tools/heapalloc"
ST="$top_builddir/tests/integration/cmd_static"
for f in "$H" "$ST"; do [ -x "$f" ] || { echo "missing $f"; exit 99; }; done
unset LD_PRELOAD
chmod 755 "$tmp"
SETPRIV=$(command -v setpriv || true)
root=false
[ "$(id -u)" = 0 ] && [ -n "$SETPRIV" ] && root=true
as_nobody() { "$SETPRIV" --reuid=nobody --regid=nogroup --clear-groups "$@"; }
# what nobody runs: the build tree's heapalloc, or, in a tree nobody can
# reach (a private home, `make distcheck` under mktemp -d), a copy installed
# into $tmp (make install DESTDIR), with its own library
HN=$H
if $root && ! { as_nobody "$H" --version && as_nobody test -r "$HA_LIB"; } >/dev/null 2>&1; then
	echo "nobody cannot reach $H or $HA_LIB: nobody runs a copy installed into $tmp/stage"
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$top_builddir" install DESTDIR="$tmp/stage" \
		>"$tmp/install.log" 2>&1 || { echo "make install failed:"; cat "$tmp/install.log"; exit 99; }
	HN=$(find "$tmp/stage" -path '*/bin/heapalloc' -type f)
	as_nobody "$HN" --version >/dev/null 2>&1 || { echo "nobody cannot run the staged $HN"; exit 99; }
fi

# expect WHAT STATUS GOT-STATUS STDOUT FIRST-LINE DIR
expect() {
	eq "$1: status" "$3" "$2"
	eq "$1: stdout" "$(cat "$tmp/out")" "$4"
	eq "$1: first line" "$(head -1 "$tmp/err")" "heapalloc: no profile will be written: $5"
	eq "$1: heapalloc's lines" "$(grep -c '^heapalloc: no profile' "$tmp/err")" 1
	[ -d "$6" ] && eq "$1: files" "$(ls "$6")" ""
	return 0
}

# a static binary: LD_PRELOAD never reaches it
mkdir "$tmp/s"
"$H" run -o "$tmp/s/p" -- "$ST" >"$tmp/out" 2>"$tmp/err"
expect "static" 7 $? "static program ran" \
	"$ST is statically linked: LD_PRELOAD cannot load libheapalloc.so into it (link it with -lheapalloc, or libheapalloc.a through heapalloc-static.pc)" \
	"$tmp/s"
eq "static: stderr lines" "$(wc -l <"$tmp/err")" 1
# one with heapalloc linked in is profiled as usual (no such line)
"$H" run -o "$tmp/s/q" -- "$top_builddir/tests/integration/prof_work_static" status 0 >/dev/null 2>"$tmp/err" ||
	fail "prof_work_static exited $?"
grep -q '^heapalloc: profiling ' "$tmp/err" || fail "prof_work_static: $(head -1 "$tmp/err")"

# a missing output directory
"$H" run -o "$tmp/none/p" -- sh -c 'echo out; exit 3' >"$tmp/out" 2>"$tmp/err"
expect "missing dir" 3 $? out "the output directory $tmp/none does not exist (-o $tmp/none/p)" "$tmp/none"
[ -e "$tmp/none" ] && fail "missing dir: $tmp/none was made"
# the default prefix names ./ when the working directory is the problem
mkdir "$tmp/gone" && cd "$tmp/gone" && rmdir "$tmp/gone"
"$H" run -- sh -c 'echo out; exit 4' >"$tmp/out" 2>"$tmp/err"
expect "deleted cwd" 4 $? out "the output directory . does not exist (-o ./heapalloc.sh)" "$tmp/gone"
cd "$tmp" || exit 99

# an output directory this user cannot write
mkdir "$tmp/ro" && chmod 555 "$tmp/ro"
if $root; then
	as_nobody "$HN" run -o "$tmp/ro/p" -- sh -c 'echo out; exit 5' >"$tmp/out" 2>"$tmp/err"
	expect "unwritable dir" 5 $? out "the output directory $tmp/ro is not writable by nobody (-o $tmp/ro/p)" "$tmp/ro"
elif [ "$(id -u)" != 0 ]; then
	"$H" run -o "$tmp/ro/p" -- sh -c 'echo out; exit 5' >"$tmp/out" 2>"$tmp/err"
	expect "unwritable dir" 5 $? out "the output directory $tmp/ro is not writable by $(id -un) (-o $tmp/ro/p)" "$tmp/ro"
fi

# a setuid program run by another user: the loader drops LD_PRELOAD and
# the library (prof_work links it) ignores HEAPPROFILE.  (Not under
# qemu-user: binfmt_misc runs the program with the caller's credentials.)
if [ -n "${HA_EMULATED:-}" ]; then
	echo "setuid case not run: $HA_EMULATED runs a setuid program as its caller"
elif $root && ! findmnt -n -o OPTIONS -T "$tmp" | grep -qw nosuid; then
	cp "$W" "$tmp/suid" && chmod 4755 "$tmp/suid" || exit 99
	mkdir "$tmp/o" && chmod 777 "$tmp/o"
	as_nobody "$HN" run -o "$tmp/o/p" -- "$tmp/suid" status 6 >"$tmp/out" 2>"$tmp/err"
	expect "setuid" 6 $? "" \
		"$tmp/suid is setuid root and runs as nobody: the loader ignores LD_PRELOAD and heapalloc ignores HEAPPROFILE in such a program (run it as its owner, or a copy without the bit)" \
		"$tmp/o"
	# its owner runs it as usual
	"$H" run -o "$tmp/o/p" -- "$tmp/suid" status 0 >/dev/null 2>"$tmp/err"
	grep -q '^heapalloc: profiling ' "$tmp/err" || fail "setuid, as root: $(head -1 "$tmp/err")"
	rm -f "$tmp"/o/*
	# a setuid script: the kernel ignores the bit, so nothing to say
	printf '#!/bin/sh\nexit 2\n' >"$tmp/suid.sh" && chmod 4755 "$tmp/suid.sh"
	as_nobody "$HN" run -o "$tmp/o/p" -- "$tmp/suid.sh" >/dev/null 2>"$tmp/err"
	eq "setuid script: status" $? 2
	grep -q '^heapalloc: profiling ' "$tmp/err" || fail "setuid script: $(head -1 "$tmp/err")"
else
	echo "setuid case not run: needs root, setpriv and a mount without nosuid"
fi
$root || { [ "$fails" -eq 0 ] && { echo "SKIP: the rest passed; the setuid case needs root and setpriv"; exit 77; }; }
finish
