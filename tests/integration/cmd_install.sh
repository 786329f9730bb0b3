#!/bin/sh
# The installed heapalloc command run by a user other than the one who
# built it: make install into a staging directory (DESTDIR), then as nobody
# its interpreter line (an absolute system path, never a shim in root's
# home), --version, check, run (the staged library preloaded, files
# written), growth (the staged heapalloc-symbolize naming frames), symbolize
# and timeline; and as root dump (the staged heapalloc-profile).  Needs root and setpriv to switch user; skips otherwise.
. "$top_srcdir/tests/lib/prof_lib.sh"
H="$top_builddir/tools/heapalloc"
[ "$(id -u)" = 0 ] || { echo "SKIP: not root (the installed command is run as nobody)"; exit 77; }
SETPRIV=$(command -v setpriv || true)
[ -n "$SETPRIV" ] || { echo "SKIP: setpriv not found"; exit 77; }
as_nobody() { "$SETPRIV" --reuid=nobody --regid=nogroup --clear-groups "$@"; }
chmod 755 "$tmp"
as_nobody test -x "$top_builddir/tests/integration/prof_work" ||
	{ echo "SKIP: nobody cannot reach the build tree $top_builddir"; exit 77; }

D="$tmp/stage"
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$top_builddir" install DESTDIR="$D" >"$tmp/install.log" 2>&1 ||
	{ echo "make install failed:"; cat "$tmp/install.log"; exit 99; }
bin=$(find "$D" -path '*/bin/heapalloc' -type f)
[ -n "$bin" ] && [ -x "$bin" ] || { echo "no bin/heapalloc under $D"; exit 99; }

# the interpreter: absolute, no home directory, and nobody can run it
py=$(head -1 "$bin" | sed -n 's/^#!//p')
case $py in
/root/* | /home/* | *shims* | "") fail "interpreter line '#!$py'" ;;
/*) ;;
*) fail "interpreter '$py' is not an absolute path" ;;
esac
eq "--version" "$(as_nobody "$bin" --version 2>&1)" "$("$H" --version)"

# profiles to read: a leaking run of prof_work, readable by anyone
mkdir "$tmp/w" && chmod 777 "$tmp/w"
HEAPPROFILE="$tmp/w/l" HEAP_PROFILE_SAMPLE_INTERVAL=1 "$W" leak 2 50 4096 2>/dev/null || fail "leak exited $?"
chmod a+r "$tmp"/w/*
as_nobody "$bin" check "$tmp/w/l.0001.heap" >"$tmp/c.out" 2>&1
eq "check: status" $? 0
grep -q "^$tmp/w/l.0001.heap: ok (" "$tmp/c.out" || fail "check: $(cat "$tmp/c.out")"

# run: the staged library, found beside the staged script
. "$top_srcdir/tests/lib/emu.sh"
envp=$(emu_prog env "$tmp/w") || { echo "HARD ERROR: no env stand-in"; exit 99; }
as_nobody "$bin" run -o "$tmp/w/e" -- "$envp" >"$tmp/r.out" 2>"$tmp/r.err"
eq "run: status" $? 0
lib=$(grep '^LD_PRELOAD=' "$tmp/r.out" | sed 's/^LD_PRELOAD=//')
case $lib in "$D"/*/libheapalloc.so*) ;; *) fail "run: preloaded '$lib', not the staged library" ;; esac
eq "run: files" "$(ls "$tmp/w" | grep '^e\.' | tr '\n' ' ')" "e.0001.heap e.0001.stats e.log "

# growth names frames through the staged heapalloc-symbolize
as_nobody "$bin" growth "$tmp/w/l.0002.heap" "$tmp/w/l.0003.heap" >"$tmp/g.out" 2>&1
eq "growth: status" $? 0
eq "growth: first" "$(sed -n 3p "$tmp/g.out" | awk '{ print $1, $2, $3, $4, $5 }')" "204800 204800 409600 +50 leak_site"
as_nobody "$bin" symbolize -o "$tmp/w/s.pb.gz" "$tmp/w/l.0002.heap" 2>/dev/null
eq "symbolize: status" $? 0
[ -s "$tmp/w/s.pb.gz" ] || fail "symbolize: no $tmp/w/s.pb.gz"
as_nobody "$bin" timeline "$tmp/w/l" >"$tmp/t.out" 2>&1
eq "timeline: status" $? 0
eq "timeline: rows" "$(grep -c '^ *[0-9]' "$tmp/t.out")" 3

# dump: a process read from outside, written by the staged helper
# heapalloc-profile (run by root: reading another process needs ptrace's
# permission, which Yama may refuse nobody)
if [ -z "${HA_EMULATED:-}" ]; then
	env LD_PRELOAD="$lib" sleep 60 &
	spid=$!
	sleep 0.5
	"$bin" dump $spid --format text -o "$tmp/w/d.heap" >/dev/null 2>"$tmp/d.err"
	eq "dump: status" $? 0
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	grep -q "^heapalloc: dump: process $spid: .* in use" "$tmp/d.err" || fail "dump: $(cat "$tmp/d.err")"
	head -1 "$tmp/w/d.heap" 2>/dev/null | grep -q '^heap profile: .* @ heap' ||
		fail "dump: no text profile: $(head -1 "$tmp/w/d.heap" 2>&1)"
fi

# nothing compiled beside the installed modules, even when root runs it
"$bin" check "$tmp/w/l.0001.heap" >/dev/null 2>&1 || fail "check as root exited $?"
eq "no __pycache__" "$(find "$D" -name __pycache__ | wc -l)" 0
finish
