#!/bin/sh
# HEAP_PROFILE_HTTP against hostile clients (tests/integration/prof_http_client.py
# attack): junk bytes, a 1 MB header, 50 half-open connections, 1000
# requests in a row.  Every answer is the right error or a profile, a
# scrape beside the half-open connections answers at once, a scrape after
# it all answers, and the program's output and exit status are unchanged.
. "$top_srcdir/tests/lib/prof_lib.sh"
H="$top_builddir/tests/integration/prof_http"
C="$top_srcdir/tests/integration/prof_http_client.py"
PY=${PYTHON3:-$(command -v python3 || true)}
[ -n "$PY" ] || { echo "SKIP: python3 not found"; exit 77; }
mkfifo "$tmp/ctl"
HEAP_PROFILE_HTTP=127.0.0.1:0 HEAP_PROFILE_HTTP_ADDR_FILE="$tmp/addr" \
	"$H" <"$tmp/ctl" >"$tmp/out" 2>"$tmp/err" &
P=$!
exec 3>"$tmp/ctl"
for _ in $(seq 100); do [ -s "$tmp/addr" ] && break; sleep 0.05; done
A=$(cat "$tmp/addr")
[ -n "$A" ] || { fail "no address: $(cat "$tmp/err")"; exec 3>&-; finish; }
"$PY" "$C" attack "$A" >"$tmp/attack" 2>&1 || fail "attack: $(grep -v '^[a-z0-9 ]*:' "$tmp/attack" | head -5)"
cat "$tmp/attack"
eq "scrape after" "$("$PY" "$C" req "$A" GET /debug/pprof/heap "$tmp/r")" 200
echo window >&3
exec 3>&-
wait $P
eq "exit status" "$?" 0
eq "output" "$(cat "$tmp/out")" "window done
bye"
eq "stderr" "$(cat "$tmp/err")" ""
finish
