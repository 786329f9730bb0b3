#!/bin/sh
# HEAP_PROFILE_HTTP: a running C/C++ program (tests/integration/prof_http, every
# allocation recorded) is read over HTTP.  go tool pprof on the URL gives
# each known site its exact bytes (inuse from /heap, alloc from /allocs, the
# default sample type of each), ?seconds=2 only the window's allocations and
# frees, ?debug=1 the text form; the index, 404, 405, 400; no files and no
# stderr line; a bind failure is one line and the program runs on; a fork
# child does not keep the socket, an exec'd descendant does not serve; a
# unix socket serves the same and is removed at exit.  With the program's
# binary deleted, go tool pprof on the URL alone names every site, with its
# file:line (the profile carries its names: libheapalloc-sym.so).
. "$top_srcdir/tests/lib/prof_lib.sh"
H="$top_builddir/tests/integration/prof_http"
C="$top_srcdir/tests/integration/prof_http_client.py"
PY=${PYTHON3:-$(command -v python3 || true)}
[ -n "$PY" ] || { echo "SKIP: python3 not found"; exit 77; }
PPROF_TMPDIR=$tmp/pprof
export PPROF_TMPDIR

# serve NAME ADDR — start $H serving on ADDR (files in $tmp/NAME.*), its
# commands from the fifo on fd 3; sets A (the bound address) and P (pid)
serve() {
	rm -f "$tmp/$1.ctl" "$tmp/$1.addr"
	mkfifo "$tmp/$1.ctl"
	(cd "$tmp/run" && HEAP_PROFILE_HTTP=$2 HEAP_PROFILE_HTTP_ADDR_FILE="$tmp/$1.addr" \
		HEAP_PROFILE_SAMPLE_INTERVAL=1 exec "$H" <"$tmp/$1.ctl" >"$tmp/$1.out" 2>"$tmp/$1.err") &
	P=$!
	exec 3>"$tmp/$1.ctl"
	for _ in $(seq 100); do [ -s "$tmp/$1.addr" ] && break; sleep 0.05; done
	A=$(cat "$tmp/$1.addr" 2>/dev/null)
	[ -n "$A" ] || { fail "$1: no address in $tmp/$1.addr: $(cat "$tmp/$1.err")"; exec 3>&-; finish; }
}
# stop NAME — end its input, wait; its exit status in RC
stop() { exec 3>&-; wait "$P"; RC=$?; }
# req METHOD TARGET — the status code; headers in $tmp/r.h, body in $tmp/r
req() { "$PY" "$C" req "$A" "$1" "$2" "$tmp/r"; }
# top INDEX URL NAME — go pprof's flat value of NAME (0 when not listed)
top() {
	"$GO" tool pprof -top -unit=B -nodefraction=0 -nodecount=100000 -sample_index="$1" \
		"$H" "$2" 2>"$tmp/pprof.err" |
		awk -v n="$3" '$NF == n { v = $1; sub(/B$/, "", v); print v; found = 1; exit }
			END { if (!found) print 0 }'
}

mkdir "$tmp/run"
mkfifo "$tmp/ctl2"
serve a 127.0.0.1:0
case $A in 127.0.0.1:[1-9]*) ;; *) fail "bound address '$A'" ;; esac

# the index, unknown paths, methods, parameters
eq "index" "$(req GET /debug/pprof/)" 200
grep -q "href='heap?debug=1'" "$tmp/r" && grep -q "href='allocs?debug=1'" "$tmp/r" ||
	fail "index does not list heap and allocs: $(cat "$tmp/r")"
grep -qi '^Content-Type: text/html' "$tmp/r.h" || fail "index type: $(cat "$tmp/r.h")"
eq "404" "$(req GET /debug/pprof/goroutine)" 404
eq "404 root" "$(req GET /)" 404
eq "405 POST" "$(req POST /debug/pprof/heap)" 405
grep -qi '^Allow: GET, HEAD$' "$tmp/r.h" || fail "405 without Allow: $(cat "$tmp/r.h")"
eq "405 DELETE" "$(req DELETE /debug/pprof/allocs)" 405
eq "seconds=301" "$(req GET '/debug/pprof/heap?seconds=301')" 400
eq "seconds=x" "$(req GET '/debug/pprof/heap?seconds=x')" 400
eq "seconds and debug" "$(req GET '/debug/pprof/heap?seconds=1&debug=1')" 400
eq "HEAD" "$(req HEAD /debug/pprof/heap)" 200
eq "HEAD body" "$(wc -c <"$tmp/r")" 0
# the next request on the same connection slot is not taken for a HEAD
eq "400 after HEAD" "$(req 'G@T' /debug/pprof/heap)" 400
eq "400 body after HEAD" "$(cat "$tmp/r")" "malformed request line"
grep -qi '^Connection: close$' "$tmp/r.h" || fail "no Connection: close"

# ?debug=1: the gperftools text form
eq "debug=1" "$(req GET '/debug/pprof/heap?debug=1')" 200
head -1 "$tmp/r" | grep -q '^heap profile: .* @ heapprofile$' || fail "debug=1 header: $(head -1 "$tmp/r")"
grep -q '^MAPPED_LIBRARIES:$' "$tmp/r" || fail "debug=1: no MAPPED_LIBRARIES"
grep -Eq '^ +1000: +1000000 \[ +1000: +1000000\] @' "$tmp/r" || fail "debug=1: no http_keep line"
grep -qi '^Content-Type: text/plain' "$tmp/r.h" || fail "debug=1 type"

eq "heap" "$(req GET /debug/pprof/heap)" 200
grep -qi '^Content-Type: application/octet-stream$' "$tmp/r.h" || fail "heap type: $(cat "$tmp/r.h")"
[ "$(head -c2 "$tmp/r" | od -An -tx1 | tr -d ' ')" = 1f8b ] || fail "heap is not gzip"

if [ -n "$GO" ] && [ -x "$GO" ]; then
	U="http://$A/debug/pprof"
	# default sample types: inuse_space for /heap, alloc_space for /allocs
	"$GO" tool pprof -raw "$U/heap" 2>/dev/null | grep -q 'inuse_space/bytes\[dflt\]' ||
		fail "/heap default is not inuse_space"
	"$GO" tool pprof -raw "$U/allocs" 2>/dev/null | grep -q 'alloc_space/bytes\[dflt\]' ||
		fail "/allocs default is not alloc_space"
	# site         inuse_space (/heap)  alloc_space (/allocs)
	while read -r site ib ab; do
		eq "$site inuse_space" "$(top inuse_space "$U/heap" "$site")" "$ib"
		eq "$site alloc_space" "$(top alloc_space "$U/allocs" "$site")" "$ab"
	done <<-'END'
	http_keep 1000000 1000000
	http_free 0 1000000
	http_new 1000000 1000000
	END
	eq "inuse_objects http_new" "$(top inuse_objects "$U/heap" http_new)" 200
	# ?seconds=2: the window allocates 100 x 3000 at http_window and frees
	# 100 of http_keep's 1000-byte blocks; nothing else happens at the sites
	PROF_HTTP_SENT="$tmp/d.sent" "$PY" "$C" req "$A" GET '/debug/pprof/heap?seconds=2' "$tmp/d" \
		>"$tmp/d.st" &
	q=$!
	for _ in $(seq 200); do [ -f "$tmp/d.sent" ] && break; sleep 0.05; done
	sleep 0.3                     # the helper reads it at once; the window then begins
	echo window >&3
	wait $q
	eq "delta status" "$(cat "$tmp/d.st")" 200
	eq "delta http_window inuse" "$(top inuse_space "$tmp/d" http_window)" 300000
	eq "delta http_window alloc" "$(top alloc_space "$tmp/d" http_window)" 300000
	eq "delta http_keep inuse" "$(top inuse_space "$tmp/d" http_keep)" -100000
	eq "delta http_keep alloc" "$(top alloc_space "$tmp/d" http_keep)" 0
	eq "delta http_new" "$(top alloc_space "$tmp/d" http_new)" 0
	eq "delta http_free" "$(top alloc_space "$tmp/d" http_free)" 0
	"$GO" tool pprof -raw "$tmp/d" 2>/dev/null | grep -Eq '^Duration: 2\.[0-9]' ||
		fail "delta duration: $("$GO" tool pprof -raw "$tmp/d" 2>&1 | grep Duration)"
	# /allocs?seconds=1 with nothing happening: no site allocated
	eq "allocs delta" "$("$PY" "$C" req "$A" GET '/debug/pprof/allocs?seconds=1' "$tmp/e")" 200
	eq "quiet delta http_keep" "$(top alloc_space "$tmp/e" http_keep)" 0
else
	echo "go not found: the pprof checks of the served profiles are skipped (CI runs them)"
	echo window >&3
fi

# an API start replaces the endpoint's file-less session (dumps work, the
# table starts afresh and is what the endpoint serves)
mkdir "$tmp/api"
echo "api $tmp/api/p" >&3
for _ in $(seq 100); do [ -f "$tmp/api/p.0001.heap" ] && break; sleep 0.05; done
[ -f "$tmp/api/p.0001.heap" ] || fail "API start: no dump"
eq "API: after, served" "$(req GET '/debug/pprof/heap?debug=1')" 200
grep -Eq '^ +50: +200000 \[ +50: +200000\] @' "$tmp/r" || fail "API: http_after not served: $(head -3 "$tmp/r")"
grep -Eq '^ +1000: +1000000 ' "$tmp/r" && fail "API: the old session's http_keep is still served"

# a second program on the same address: one line, runs on, same output
B=$A
(cd "$tmp/run" && HEAP_PROFILE_HTTP=$B "$H" </dev/null >"$tmp/b.out" 2>"$tmp/b.err")
eq "busy address: status" "$?" 0
eq "busy address: output" "$(cat "$tmp/b.out")" bye
eq "busy address: stderr" "$(cat "$tmp/b.err")" \
	"heapalloc: HEAP_PROFILE_HTTP=\"$B\": cannot listen (address in use, errno 98); not serving"
for bad in nonsense 127.0.0.1 :6060 127.0.0.1:70000 '[::1' unix:relative; do
	(cd "$tmp/run" && HEAP_PROFILE_HTTP=$bad "$H" </dev/null >"$tmp/b.out" 2>"$tmp/b.err")
	eq "bad address $bad: status" "$?" 0
	eq "bad address $bad: output" "$(cat "$tmp/b.out")" bye
	eq "bad address $bad: one line" "$(grep -F "heapalloc: HEAP_PROFILE_HTTP=\"$bad\": " "$tmp/b.err" |
		grep -c '; not serving$')" 1
	eq "bad address $bad: nothing else" "$(wc -l <"$tmp/b.err")" 1
done

# an exec'd descendant does not serve (the address file stays ours)
echo spawn >&3
echo fork >&3
stop a
eq "output" "$(cat "$tmp/a.out")" "window done
api dump 22 start 0 dump 0
child: HEAPALLOC_HTTP_ROOT set
spawned 0
forked ok
bye"
eq "exit status" "$RC" 0
eq "address file" "$(cat "$tmp/a.addr")" "$A"
eq "stderr" "$(grep -v "^Starting tracking the heap\$\|^Dumping heap profile to $tmp/api/p\.000[12]\.heap (\(api\|Exiting, .*\))\$" "$tmp/a.err")" ""
eq "no files" "$(ls "$tmp/run")" ""
# the fork child lives on for a second: it must not hold the listener
eq "after exit" "$("$PY" "$C" req "$A" GET /debug/pprof/heap "$tmp/r" 2>&1 | tail -1 |
	grep -c 'ConnectionRefused')" 1

# with HEAPPROFILE too: both, from one table (time dumps, the exit dump)
mkdir "$tmp/both"
(cd "$tmp/run" && HEAPPROFILE="$tmp/both/p" HEAP_PROFILE_TIME_INTERVAL=1 \
	HEAP_PROFILE_HTTP=127.0.0.1:0 HEAP_PROFILE_HTTP_ADDR_FILE="$tmp/t.addr" \
	exec "$H" >"$tmp/t.out" 2>"$tmp/t.err" <"$tmp/ctl2") &
T=$!
exec 4>"$tmp/ctl2"
for _ in $(seq 100); do [ -s "$tmp/t.addr" ] && break; sleep 0.05; done
eq "with HEAPPROFILE: served" "$("$PY" "$C" req "$(cat "$tmp/t.addr")" GET /debug/pprof/allocs "$tmp/r")" 200
sleep 1.6
exec 4>&-
wait $T
eq "with HEAPPROFILE: exit" "$?" 0
grep -q '^Starting tracking the heap$' "$tmp/t.err" || fail "with HEAPPROFILE: no start line"
# (a helper that wakes late on a loaded or emulated machine counts 2 s or more)
grep -q "^Dumping heap profile to $tmp/both/p.0001.heap ([1-9][0-9]* sec since the last dump)$" "$tmp/t.err" ||
	fail "with HEAPPROFILE: no time dump: $(cat "$tmp/t.err")"
[ -f "$tmp/both/p.0002.heap" ] || fail "with HEAPPROFILE: no exit dump"

# a unix socket, removed at exit; the port-0 line when no file is named
serve u "unix:$tmp/sock"
eq "unix address" "$A" "unix:$tmp/sock"
eq "unix heap" "$(req GET /debug/pprof/heap)" 200
stop u
eq "unix exit" "$RC" 0
[ -e "$tmp/sock" ] && fail "unix socket left behind"
# a socket file nobody listens on (a dead run's) is replaced; a plain file is not
"$PY" -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$tmp/stale"
(cd "$tmp/run" && HEAP_PROFILE_HTTP="unix:$tmp/stale" "$H" </dev/null >"$tmp/b.out" 2>"$tmp/b.err")
eq "stale socket: stderr" "$(cat "$tmp/b.err")" ""
: >"$tmp/plain"
(cd "$tmp/run" && HEAP_PROFILE_HTTP="unix:$tmp/plain" "$H" </dev/null >"$tmp/b.out" 2>"$tmp/b.err")
eq "plain file: one line" "$(grep -c 'cannot listen (address in use' "$tmp/b.err")" 1
[ -f "$tmp/plain" ] || fail "plain file removed"
(cd "$tmp/run" && HEAP_PROFILE_HTTP=127.0.0.1:0 "$H" </dev/null >/dev/null 2>"$tmp/z.err")
grep -Eqx 'heapalloc: serving heap profiles on http://127\.0\.0\.1:[0-9]+/debug/pprof/' "$tmp/z.err" ||
	fail "port 0 without an address file: $(cat "$tmp/z.err")"
# IPv6 loopback, where the machine has it
if "$PY" -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1",0))' 2>/dev/null; then
	serve v '[::1]:0'
	case $A in '[::1]:'[1-9]*) ;; *) fail "v6 address '$A'" ;; esac
	eq "v6 heap" "$(req GET /debug/pprof/heap)" 200
	stop v
fi

# the binary gone: pprof, given nothing but the URL, names the sites
if [ -n "$GO" ] && [ -x "$GO" ]; then
	mkdir "$tmp/gone"
	cp "$H" "$tmp/gone/prog" || exit 99
	Hkeep=$H
	H="$tmp/gone/prog"
	serve g 127.0.0.1:0
	rm -f "$tmp/gone/prog"
	U="http://$A/debug/pprof"
	# the address is written before main allocates: wait for its sites
	# (http_keep's 1000 and http_new's 200 blocks, by the text form), as an
	# emulated or loaded process may take a while
	for _ in $(seq 300); do
		[ "$(req GET '/debug/pprof/heap?debug=1')" = 200 ] &&
			grep -Eq '^ +1000: +1000000 \[ +1000: +1000000\] @' "$tmp/r" &&
			grep -Eq '^ +200: +1000000 \[ +200: +1000000\] @' "$tmp/r" && break
		sleep 0.1
	done
	# urltop INDEX URL NAME — as top, with no binary
	urltop() {
		"$GO" tool pprof -top -unit=B -nodefraction=0 -nodecount=100000 -sample_index="$1" \
			"$2" 2>"$tmp/pprof.err" |
			awk -v n="$3" '$NF == n { v = $1; sub(/B$/, "", v); print v; found = 1; exit }
				END { if (!found) print 0 }'
	}
	eq "deleted: http_keep inuse" "$(urltop inuse_space "$U/heap" http_keep)" 1000000
	eq "deleted: http_new inuse (C++)" "$(urltop inuse_space "$U/heap" http_new)" 1000000
	eq "deleted: http_free alloc" "$(urltop alloc_space "$U/allocs" http_free)" 1000000
	line=$(grep -n 'keep\[i\] = malloc(1000);' "$top_srcdir/tests/integration/prof_http.c" | cut -d: -f1)
	"$GO" tool pprof -top -lines -nodefraction=0 "$U/heap" 2>/dev/null |
		grep -q "http_keep .*prof_http\.c:$line\$" ||
		fail "deleted: no http_keep prof_http.c:$line in: $("$GO" tool pprof -top -lines "$U/heap" 2>&1 | head -12)"
	stop g
	eq "deleted: exit status" "$RC" 0
	H=$Hkeep
fi
finish
