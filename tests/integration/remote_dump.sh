#!/bin/sh
# remote_dump.sh — `heapalloc dump PID`: the heap profile of a process that
# set nothing, read from outside.  tests/integration/remote_sites.c (built as a user
# builds it, libheapalloc preloaded, no profiling variable) keeps 128 MiB at
# site_big and 64 MiB at site_small, and frees everything site_gone made;
# its binary is deleted before the dump; the same built as C++.  The named profile must give each
# site its bytes within 4 of the standard errors it states (label
# sampling_error), site_gone nothing in use, the totals the program's own
# books (heapalloc_get_stats) to the byte, names and file:line with the
# binary gone, and the comments the pid and command.  The same from the
# process SIGSTOPped and deadlocked inside the allocator with its lock
# held; 40 dumps in a row of a 4-thread churn leave it unchanged; `top -n
# 3` of a growing heap puts the growing site first; `serve` answers go tool
# pprof; each error (no heapalloc, no process, a zombie, an unknown layout,
# sampling switched off, another user) is one stderr line and exit status 1.
. "$top_srcdir/tests/lib/ready.sh"
. "$top_srcdir/tests/lib/names_lib.sh"
unset HEAP_PROFILE_SAMPLE_INTERVAL HEAP_PROFILE_HTTP HEAP_PROFILE_FORMAT HEAP_PROFILE_CALIBRATE
H="$top_builddir/tools/heapalloc"
PY=${PYTHON3:-python3}
CC=${CC:-cc}
CXX=${CXX:-c++}
$CC -O2 -g -o "$tmp/bin/sites" "$top_srcdir/tests/integration/remote_sites.c" -ldl -lpthread 2>"$tmp/cc.err" &&
	$CXX -O2 -g -x c++ -o "$tmp/bin/sites_cxx" "$top_srcdir/tests/integration/remote_sites.c" -ldl -lpthread \
		2>>"$tmp/cc.err" || { cat "$tmp/cc.err"; echo "cannot build remote_sites"; exit 99; }
mkdir "$tmp/run" "$tmp/cwd"

# start MODE [BIN] — run a copy of the program (no variable), wait for
# READY, delete the copy; $pid, stdin held open through the fifo $tmp/in
start() {
	cp "$tmp/bin/${2:-sites}" "$tmp/run/prog" || exit 99
	rm -f "$tmp/ready" "$tmp/in"
	mkfifo "$tmp/in"
	(cd "$tmp/cwd" && exec env LD_PRELOAD="$HA_LIB" "$tmp/run/prog" "$tmp/ready" "$1" \
		<"$tmp/in" >"$tmp/prog.out" 2>"$tmp/prog.err") &
	pid=$!
	exec 7>"$tmp/in"
	program_ready "$tmp/ready" || { fail "$1: the program never got ready: $(cat "$tmp/prog.err")"; finish; }
	rm -f "$tmp/run/prog"
}

# stop — close its stdin and wait; $status
stop() {
	exec 7>&-
	wait $pid
	status=$?
}

# dump NAME [ARGS] — heapalloc dump PID -o $tmp/NAME.pb.gz, within 60 s
dump() {
	n=$1
	shift
	timeout 60 "$H" dump $pid -o "$tmp/$n.pb.gz" "$@" 2>"$tmp/$n.err" ||
		fail "$n: dump exited $?: $(cat "$tmp/$n.err")"
}

# check NAME EXACT — the sites, totals, names and comments of NAME.pb.gz;
# EXACT: the totals must be the books the program printed
check() {
	"$PY" "$top_srcdir/tests/integration/remote_check.py" "$top_srcdir/tools" "$tmp/$1.pb.gz" "$tmp/ready" \
		"$2" "$pid" "" remote_sites.c || fail "$1: $(cat "$tmp/$1.check")"
}

# --- a running process, its binary deleted ---------------------------------
start hold
dump hold
check hold 1 >"$tmp/hold.check"
# the gperftools text format: the same totals in its header
timeout 60 "$H" dump $pid --format text -o "$tmp/hold.heap" 2>"$tmp/text.err" || fail "text: $(cat "$tmp/text.err")"
a=$(awk '{print $6}' "$tmp/ready")
f=$(awk '{print $8}' "$tmp/ready")
eq "text header: in use, allocated" "$(head -1 "$tmp/hold.heap" | tr -d ':[]' | awk '{print $4, $6, $8}')" \
	"$((a - f)) $a heapprofile"
grep -q '^MAPPED_LIBRARIES:' "$tmp/hold.heap" || fail "text: no MAPPED_LIBRARIES"
# stopped: the same profile, and it is still stopped after
kill -STOP $pid
dump stopped
check stopped 1 >"$tmp/stopped.check"
eq "still stopped" "$(awk '{print $3}' /proc/$pid/stat)" T
kill -CONT $pid
# an unknown layout: the root's version field, rewritten in the target
"$PY" - "$pid" <<'EOF' || fail "could not patch the root's layout"
import sys
sys.path[:0] = [__import__('os').environ[d] + '/tools' for d in ('top_srcdir', 'top_builddir')]
import ha_proc, os, struct
pid = int(sys.argv[1])
_, maps = ha_proc.read_maps(pid)
addr, lib = ha_proc.find_root(pid, maps)
fd = os.open('/proc/%d/mem' % pid, os.O_RDWR)
os.pwrite(fd, struct.pack('<I', 7), addr + 8)
EOF
timeout 60 "$H" dump $pid -o "$tmp/bad.pb.gz" 2>"$tmp/bad.err"
eq "unknown layout: exit status" $? 1
eq "unknown layout: one line" "$(wc -l <"$tmp/bad.err")" 1
grep -q "layout version 7; this reader (heapalloc .*) knows layout version 1" "$tmp/bad.err" ||
	fail "unknown layout: $(cat "$tmp/bad.err")"
[ -e "$tmp/bad.pb.gz" ] && fail "unknown layout: a file was written"
stop
eq "hold: exit status" $status 0
eq "hold: no file in its directory" "$(ls "$tmp/cwd")" ""

# --- the same program as C++ (operator new), its binary deleted ------------
start hold sites_cxx
dump cxx
check cxx 1 >"$tmp/cxx.check"
stop
eq "cxx: exit status" $status 0

# --- deadlocked inside the allocator with its lock held --------------------
start lock
dump lock
check lock 0 >"$tmp/lock.check"
stop

# --- 40 dumps (REMOTE_DUMPS) in a row of a 4-thread churn: it runs on
# unchanged ------------------------------------------------------------------
start churn
i=0
while [ $i -lt "${REMOTE_DUMPS:-40}" ]; do
	timeout 60 "$H" dump $pid --format text -o "$tmp/churn.heap" 2>"$tmp/churn.err" ||
		{ fail "churn dump $i: $(cat "$tmp/churn.err")"; break; }
	i=$((i + 1))
done
stop
eq "churn: exit status" $status 0
eq "churn: output" "$(cat "$tmp/prog.out")" "churn 4"
eq "churn: stderr" "$(cat "$tmp/prog.err")" ""
eq "churn: no file in its directory" "$(ls "$tmp/cwd")" ""

# --- top -n 3 of a growing heap: the growing site leads, growing -----------
start grow
timeout 120 "$H" top $pid -n 3 >"$tmp/top.out" 2>"$tmp/top.err" || fail "top: exited $?: $(cat "$tmp/top.err")"
eq "top: three views" "$(grep -c '^heapalloc top: pid '"$pid" "$tmp/top.out")" 3
last=$(awk '/^heapalloc top:/ { v = "" } { v = v $0 "\n" } END { printf "%s", v }' "$tmp/top.out")
first=$(printf "$last" | sed -n '5p')
case $first in
*'+'*'site_grow remote_sites.c:'*) ;;
*) fail "top: the last view's first site is not site_grow, growing: $first" ;;
esac
printf "$last" | sed -n '2p' | grep -q '^in use .* allocated .* RSS .* peak: RSS' ||
	fail "top: no totals line: $(printf "$last" | sed -n '2p')"
eq "top: stderr" "$(cat "$tmp/top.err")" ""

# --- serve: go tool pprof URL reads it, named ------------------------------
"$H" serve $pid 127.0.0.1:0 2>"$tmp/serve.err" &
spid=$!
i=0
while ! grep -q 'http://' "$tmp/serve.err" && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
url=$(sed -n 's/.* on \(http:.*\)$/\1/p' "$tmp/serve.err")
[ -n "$url" ] || fail "serve: no address: $(cat "$tmp/serve.err")"
timeout 120 "$GO" tool pprof -raw "${url}heap" >"$tmp/served.raw" 2>"$tmp/served.err" ||
	fail "serve: go tool pprof: $(cat "$tmp/served.err")"
grep -q 'site_grow.*remote_sites.c' "$tmp/served.raw" || grep -q 'site_grow' "$tmp/served.raw" ||
	fail "serve: no site_grow in the served profile"
timeout 120 "$GO" tool pprof -top -sample_index=alloc_space "${url}allocs" >"$tmp/allocs.top" 2>&1 ||
	fail "serve: allocs: $(cat "$tmp/allocs.top")"
grep -q 'site_gone' "$tmp/allocs.top" || fail "serve: allocs has no site_gone: $(head -20 "$tmp/allocs.top")"
kill $spid
wait $spid 2>/dev/null
stop
eq "grow: exit status" $status 0

# --- errors: one line each, exit status 1 ----------------------------------
# err NAME PATTERN PID — the dump of PID fails with one line matching PATTERN
err() {
	timeout 60 "$H" dump "$3" -o "$tmp/$1.pb.gz" 2>"$tmp/$1.err"
	eq "$1: exit status" $? 1
	eq "$1: one line" "$(wc -l <"$tmp/$1.err")" 1
	grep -q "$2" "$tmp/$1.err" || fail "$1: $(cat "$tmp/$1.err")"
	[ -e "$tmp/$1.pb.gz" ] && fail "$1: a file was written"
}
sleep 60 &
spid=$!
err nolib "process $spid does not run heapalloc" $spid
kill $spid
wait $spid 2>/dev/null
err gone "no process $spid" $spid
# the always-on sampling switched off: nothing to dump, said so
(sleep 60 | env LD_PRELOAD="$HA_LIB" HEAP_PROFILE_SAMPLE_INTERVAL=0 "$tmp/bin/sites" "$tmp/ready.off" hold) &
i=0
while [ ! -f "$tmp/ready.off" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
opid=$(pgrep -n -f "$tmp/ready.off")
err off "process $opid runs heapalloc .* with sampling off (HEAP_PROFILE_SAMPLE_INTERVAL=0)" "$opid"
kill "$opid"
# a zombie (exited, not reaped): it has nothing to read
"$PY" -c "
import os, sys, time
p = os.fork()
if p == 0:
    os._exit(0)
open(sys.argv[1], 'w').write(str(p))
time.sleep(5)" "$tmp/zpid" &
shpid=$!
i=0
while [ ! -s "$tmp/zpid" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
err zombie "process $(cat "$tmp/zpid") exited while it was being read" "$(cat "$tmp/zpid")"
wait $shpid
# another user (when this runs as root and setpriv exists, and that user
# can run the command: not from a tree in a private folder, as distcheck's)
nobody="setpriv --reuid=65534 --regid=65534 --clear-groups"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1 && ! $nobody test -r "$H"; then
	echo "note: the permission case not run: uid 65534 cannot read $H (a private folder)"
elif [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	start hold
	chmod -R a+rX "$tmp" 2>/dev/null
	timeout 60 $nobody "$H" dump $pid \
		-o /dev/null 2>"$tmp/perm.err"
	eq "permission: exit status" $? 1
	eq "permission: one line" "$(wc -l <"$tmp/perm.err")" 1
	grep -q "permission denied reading process $pid: it runs as uid 0, you are uid 65534" \
		"$tmp/perm.err" || fail "permission: $(cat "$tmp/perm.err")"
	stop
else
	echo "note: the permission case needs root and setpriv; not run"
fi
finish
