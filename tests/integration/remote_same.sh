#!/bin/sh
# remote_same.sh — an outside dump is an in-process dump of the same tables.
# tests/integration/remote_same.c (HEAPPROFILE set, sampled every 64 KiB, both formats)
# holds still after READY and a first dump of its own; `heapalloc dump PID`
# reads it from outside (text and pprof), the program dumps itself
# (heapalloc_profile_dump), and it is read again.  The books do not move
# meanwhile (the two outside reads agree byte for byte), and then:
#   text   the outside dump and PREFIX.0002.heap are the same bytes: header,
#          every line, the memory map;
#   pprof  (tests/integration/remote_same.py) the same sample types, period, mappings
#          with build IDs, calibration comments, and sample for sample the
#          same stack, values and labels, but `age` — each line's parts by
#          age merged (the split depends on the moment of the dump), every
#          age of the outside read no younger and at most the seconds
#          between the two dumps older — and the command comment, which
#          the outside one extends with the pid and when it was read.
# Both formats go through prof/'s writers (tools/heapalloc-profile).  Under
# qemu-user the program's own dump holds the emulator's view of its maps
# and command line: what is compared there is said where it is.
. "$top_srcdir/tests/lib/ready.sh"
. "$top_srcdir/tests/lib/prof_lib.sh"
H="$top_builddir/tools/heapalloc"
PY=${PYTHON3:-python3}
CC=${CC:-cc}
$CC -O2 -g -o "$tmp/prog" "$top_srcdir/tests/integration/remote_same.c" -ldl 2>"$tmp/cc.err" ||
	{ cat "$tmp/cc.err"; echo "HARD ERROR: cannot build remote_same"; exit 99; }
finish() {
	exec 7>&- 2>/dev/null
	wait $pid 2>/dev/null
	[ "$fails" -eq 0 ] && { echo "PASS"; exit 0; }
	echo "$fails failure(s)"
	exit 1
}

mkfifo "$tmp/in"
(cd "$tmp" && exec env LD_PRELOAD="$HA_LIB" HEAPPROFILE="$tmp/p" HEAP_PROFILE_FORMAT=both \
	HEAP_PROFILE_SAMPLE_INTERVAL=65536 HEAP_PROFILE_TIMELINE_MS=0 "$tmp/prog" "$tmp/ready" \
	<"$tmp/in" >"$tmp/prog.out" 2>"$tmp/prog.err") &
pid=$!
exec 7>"$tmp/in"
program_ready "$tmp/ready" || { fail "the program never got ready: $(cat "$tmp/prog.err")"; finish; }

# outside NAME — heapalloc dump PID, text and pprof, within 60 s each
outside() {
	timeout 60 "$H" dump $pid --format text -o "$tmp/$1.heap" 2>"$tmp/$1.err" &&
		timeout 60 "$H" dump $pid -o "$tmp/$1.pb.gz" 2>>"$tmp/$1.err" ||
		{ fail "$1: dump exited $?: $(cat "$tmp/$1.err")"; finish; }
}

# inside N — the program's own dump number N: PREFIX.000N.{heap,pb.gz}
inside() {
	echo dump >&7
	i=0
	while [ "$(grep -c '^dumped' "$tmp/prog.out")" -lt $1 ] && [ $i -lt 600 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	eq "in-process dump $1" "$(tail -1 "$tmp/prog.out")" "dumped 0"
	[ -f "$tmp/p.000$1.heap" ] && [ -f "$tmp/p.000$1.pb.gz" ] ||
		{ fail "no in-process dump $1: $(ls "$tmp"; cat "$tmp/prog.err")"; finish; }
}

# A thread's figures reach the books read from outside at its slow paths;
# a dump publishes its own thread's at once.  So a first dump, after which
# the books hold still.
inside 1
outside before
inside 2
outside after

# the tables held still: the two outside reads are the same profile
cmp -s "$tmp/before.heap" "$tmp/after.heap" ||
	fail "the books moved between the outside reads: $(diff "$tmp/before.heap" "$tmp/after.heap" | head -4)"
# a sampled, calibrated profile with more than a line or two
head -1 "$tmp/after.heap" | grep -q '@ heapprofile$' ||
	fail "not calibrated: $(head -1 "$tmp/after.heap")"
[ "$(sed '/^$/q' "$tmp/after.heap" | grep -c ' @ 0x')" -ge 3 ] ||
	fail "fewer than 3 lines: $(cat "$tmp/after.heap" | head -5)"
if [ -z "${HA_EMULATED:-}" ]; then
	cmp -s "$tmp/p.0002.heap" "$tmp/after.heap" ||
		fail "text: the outside dump differs from the in-process one: $(diff "$tmp/p.0001.heap" "$tmp/after.heap" | head -6)"
else
	# the program's memory map is the emulator's view of it: the same
	# header and lines, and the same mappings of files (ranges,
	# permissions: the program's code executable, offsets, files), but
	# anonymous memory as the kernel shows it (qemu's own too)
	for f in p.0002 after; do
		sed '/^MAPPED_LIBRARIES:$/q' "$tmp/$f.heap" >"$tmp/$f.lines"
		sed '1,/^MAPPED_LIBRARIES:$/d' "$tmp/$f.heap" | awk '$5 != 0 { $1 = $1; print }' >"$tmp/$f.files"
	done
	cmp -s "$tmp/p.0002.lines" "$tmp/after.lines" ||
		fail "text: the outside dump's lines differ from the in-process one's: $(diff "$tmp/p.0002.lines" "$tmp/after.lines" | head -6)"
	cmp -s "$tmp/p.0002.files" "$tmp/after.files" ||
		fail "text: the outside dump's file mappings differ from the in-process one's: $(diff "$tmp/p.0002.files" "$tmp/after.files" | head -6)"
	grep -q ' r-xp ' "$tmp/after.files" || fail "text: no executable file mapping: $(head -3 "$tmp/after.files")"
	echo "text: lines and file mappings compared, anonymous memory not ($HA_EMULATED: $(wc -l <"$tmp/after.files") file mappings)"
fi
"$PY" "$top_srcdir/tests/integration/remote_same.py" "$top_srcdir/tools" "$tmp/p.0002.pb.gz" "$tmp/after.pb.gz" \
	$pid >"$tmp/same.out" 2>&1 || fail "pprof: $(cat "$tmp/same.out")"
cat "$tmp/same.out"
finish
