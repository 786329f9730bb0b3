#!/bin/sh
# A setuid program ignores HEAPPROFILE with a warning and writes nothing,
# and HEAP_PROFILE_HTTP with a warning, serving nothing
# (docs/heap-profile-spec.md §5).  Needs root (to make a setuid copy) and setpriv (to run it as
# nobody); skips otherwise, or when the temp dir is mounted nosuid.
. "$top_srcdir/tests/lib/emu.sh"
emu_skip "binfmt_misc runs a setuid program with its caller's credentials"
. "$top_srcdir/tests/lib/prof_lib.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: not root"; exit 77; }
SETPRIV=$(command -v setpriv || true)
[ -n "$SETPRIV" ] || { echo "SKIP: setpriv not found"; exit 77; }
chmod 755 "$tmp"
cp "$W" "$tmp/work_suid" && chmod 4755 "$tmp/work_suid" || exit 99
mkdir "$tmp/out" && chmod 777 "$tmp/out"
"$SETPRIV" --reuid=65534 --regid=65534 --clear-groups env HEAPPROFILE="$tmp/out/p" \
	"$tmp/work_suid" exit >"$tmp/stdout" 2>"$tmp/err"
rc=$?
[ $rc -eq 127 ] || [ $rc -eq 126 ] && { echo "SKIP: cannot run as nobody here ($rc)"; exit 77; }
grep -q 'Starting tracking' "$tmp/err" && ! grep -q 'setuid' "$tmp/err" &&
	{ echo "SKIP: setuid bit not honoured here (nosuid mount?)"; exit 77; }
eq "exit status" "$rc" 0
eq "warning lines" "$(grep -c '^heapalloc: HEAPPROFILE ignored in a setuid/setgid program$' "$tmp/err")" 1
eq "files written" "$(ls "$tmp/out" | wc -l | tr -d ' ')" 0
# HEAP_PROFILE_HTTP: one line, nothing bound (port 0 would print its address)
"$SETPRIV" --reuid=65534 --regid=65534 --clear-groups env HEAP_PROFILE_HTTP=127.0.0.1:0 \
	"$tmp/work_suid" exit >"$tmp/stdout" 2>"$tmp/err"
eq "HTTP: exit status" "$?" 0
eq "HTTP: stderr" "$(cat "$tmp/err")" "heapalloc: HEAP_PROFILE_HTTP ignored in a setuid/setgid program"
finish
