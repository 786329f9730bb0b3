#!/bin/sh
# remote_startstop.sh — `heapalloc dump PID` while the process stops and
# starts profiling underneath it (tests/integration/remote_startstop.c: a session
# started and stopped every few milliseconds, its table freed at each stop,
# two threads allocating throughout).  Every read is either a whole profile
# (heapalloc check and go tool pprof accept it; each site's in use within
# its allocated; the totals on stderr in use <= allocated) or a refusal of
# one line naming why (sampling stopped, or the profile kept changing) with
# no file written: never a crash, a traceback or a torn profile.  Twice:
# with the always-on sampling that each stop restarts, and with
# HEAP_PROFILE_SAMPLE_INTERVAL=0, where sampling is off between sessions.
. "$top_srcdir/tests/lib/ready.sh"
. "$top_srcdir/tests/lib/prof_lib.sh"
need_go
H="$top_builddir/tools/heapalloc"
PY=${PYTHON3:-python3}
CC=${CC:-cc}
READS=${REMOTE_STARTSTOP_READS:-24}
$CC -O2 -g -o "$tmp/prog" "$top_srcdir/tests/integration/remote_startstop.c" -ldl -lpthread 2>"$tmp/cc.err" ||
	{ cat "$tmp/cc.err"; echo "HARD ERROR: cannot build remote_startstop"; exit 99; }

# profile_ok FILE INUSE ALLOC — the profile as pprof reads it (ha_pb, the
# command's own decoder, and go tool pprof): no negative value, in use
# within allocated in all, and calibrated, its sums the totals dump printed
# (a calibrated line may show a little more in use than allocated: its
# two values are scaled by two factors, prof/output/calibrate.c)
profile_ok() {
	"$PY" - "$top_srcdir/tools" "$@" <<'PYEOF' || return 1
import gzip, sys
sys.path.insert(0, sys.argv[1])
import ha_pb
data = open(sys.argv[2], 'rb').read()
inuse, alloc = int(sys.argv[3]), int(sys.argv[4])
p = ha_pb.read_profile(data)
raw = gzip.decompress(data)
strs = [bytes(raw[v[0]:v[1]]).decode() for f, w, v, o in ha_pb.fields(raw, 0, len(raw)) if f == 6]
t = [x for x, _ in p.sample_types]
ao, asp, io, isp = (t.index(k) for k in ('alloc_objects', 'alloc_space', 'inuse_objects', 'inuse_space'))
neg = [v for _, v in p.samples if min(v) < 0]
si, sa = sum(v[isp] for _, v in p.samples), sum(v[asp] for _, v in p.samples)
bad = []
if neg or not p.period:
    bad.append('%d samples with a negative value, period %d' % (len(neg), p.period))
if si > sa:
    bad.append('in use %d above allocated %d' % (si, sa))
if any('calibrated to the allocator' in s for s in strs):
    if sa != alloc:
        bad.append('alloc_space sums to %d, dump printed %d' % (sa, alloc))
    if any(s.startswith('inuse_space: %d bytes in use (exact: ' % inuse) for s in strs) and si != inuse:
        bad.append('inuse_space sums to %d, dump printed %d' % (si, inuse))
if bad:
    print('; '.join(bad))
    sys.exit(1)
PYEOF
	"$GO" tool pprof -raw "$1" >"$tmp/raw" 2>&1 || { echo "go tool pprof: $(head -3 "$tmp/raw")"; return 1; }
}

# reads NAME — READS dumps of $pid, alternating pprof and text
reads() {
	i=0 ok=0 refused=0
	while [ $i -lt "$READS" ]; do
		kill -0 $pid 2>/dev/null || { fail "$1: the process died at read $i: $(tail -3 "$tmp/prog.err")"; return; }
		f="$tmp/$1.$i.pb.gz" fmt=pprof
		[ $((i % 2)) = 1 ] && f="$tmp/$1.$i.heap" fmt=text
		timeout 60 "$H" dump $pid --format $fmt -o "$f" 2>"$tmp/err"
		st=$?
		if [ $st = 0 ]; then
			ok=$((ok + 1))
			line=$(cat "$tmp/err")
			case $line in
			"heapalloc: dump: process $pid: "*" bytes in use, "*" allocated, "*) ;;
			*) fail "$1 read $i: stderr: $line" ;;
			esac
			inuse=$(echo "$line" | sed -n 's/.*: \([0-9]*\) bytes in use, \([0-9]*\) allocated.*/\1/p')
			alloc=$(echo "$line" | sed -n 's/.*: \([0-9]*\) bytes in use, \([0-9]*\) allocated.*/\2/p')
			[ -n "$inuse" ] && [ "$inuse" -le "$alloc" ] || fail "$1 read $i: in use $inuse, allocated $alloc"
			"$H" check "$f" >"$tmp/check" 2>&1 || fail "$1 read $i ($fmt): heapalloc check: $(head -3 "$tmp/check")"
			if [ $fmt = pprof ]; then
				profile_ok "$f" "$inuse" "$alloc" >"$tmp/pok" || fail "$1 read $i: $(cat "$tmp/pok")"
			else
				set -- "$1" $(head -1 "$f" | tr -d ':[]')
				[ "$5" -le "$7" ] 2>/dev/null || fail "$1 read $i: text header: $(head -1 "$f")"
			fi
		elif [ $st = 1 ]; then
			refused=$((refused + 1))
			eq "$1 read $i: refusal lines" "$(wc -l <"$tmp/err")" 1
			grep -Eq "^heapalloc: dump: process $pid (runs heapalloc .* with sampling stopped|: its heap profile kept changing under the reader)" "$tmp/err" ||
				fail "$1 read $i: refusal: $(cat "$tmp/err")"
			[ -e "$f" ] && fail "$1 read $i: refused, yet $f was written"
		else
			fail "$1 read $i: dump exited $st: $(tail -5 "$tmp/err")"
		fi
		i=$((i + 1))
	done
	echo "$1: $ok profiles, $refused refusals in $READS reads"
	[ $ok -gt 0 ] || fail "$1: not one profile in $READS reads"
}

# session NAME [VAR=VALUE...] — run the program, read it, end it
session() {
	name=$1
	shift
	rm -f "$tmp/ready" "$tmp/in"
	mkdir -p "$tmp/$name.d"
	mkfifo "$tmp/in"
	env LD_PRELOAD="$HA_LIB" HEAP_PROFILE_STATS=0 "$@" "$tmp/prog" "$tmp/ready" "$tmp/$name.d/p" \
		<"$tmp/in" >"$tmp/prog.out" 2>"$tmp/prog.err" &
	pid=$!
	exec 7>"$tmp/in"
	program_ready "$tmp/ready" || { fail "$name: the program never got ready: $(cat "$tmp/prog.err")"; finish; }
	reads "$name"
	exec 7>&-
	wait $pid
	eq "$name: exit status" $? 0
	eq "$name: output" "$(cat "$tmp/prog.out")" "cycles N"
	grep -v -e '^Starting tracking the heap$' -e '^Stopping tracking the heap$' \
		-e '^Dumping heap profile to ' -e '^Writing the peak heap profile to ' \
		"$tmp/prog.err" >"$tmp/prog.other"
	eq "$name: other stderr" "$(head -3 "$tmp/prog.other")" ""
}

session always_on
session off HEAP_PROFILE_SAMPLE_INTERVAL=0
finish
