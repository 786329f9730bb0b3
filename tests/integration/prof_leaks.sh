#!/bin/sh
# `heapalloc leaks PID` on tests/integration/prof_leaks.c, every block sampled
# (HEAP_PROFILE_SAMPLE_INTERVAL=64, blocks of 4000 bytes): running and then
# stopped for the scan, the leaks (10 dropped blocks, a cycle of 2) are
# found to the byte in the -o profile as go pprof reads it (last_site's,
# still in the allocator's popped stack slots, too), and nothing
# referenced is called a leak: a global array, pointers into the middle of
# blocks, pointers in a packed struct, a list held block by block, blocks
# known only to another thread's stack.  --fail exits 3; the program's
# output and exit status are unchanged; bad input is one stderr line.  The
# same scan at exit (HEAP_PROFILE_LEAKS, HEAP_PROFILE_LEAKS_STATUS), which
# also skips the memory the allocator holds free (a freed block's stale
# pointer hides no leak there).
PROF_WORK="$top_builddir/tests/integration/prof_leaks"
. "$top_srcdir/tests/lib/prof_lib.sh"
need_go
H="$top_builddir/tools/heapalloc"

# From outside.  Under qemu-user the scan's roots hold the emulator's own
# writable memory too (the program's registers live there: ptrace gives
# qemu's), whose words may equal a leaked block's address: a leak may be
# missed, never invented, as at exit below.
emu=${HA_EMULATED:-}
rm -f "$tmp/in"
mkfifo "$tmp/in"
HEAP_PROFILE_SAMPLE_INTERVAL=64 "$W" "$tmp/ready" <"$tmp/in" >"$tmp/prog.out" 2>"$tmp/prog.err" &
pid=$!
exec 7>"$tmp/in"
wait_ready "$tmp/ready" $pid
[ -s "$tmp/ready" ] || { fail "the program never got ready: $(cat "$tmp/prog.err")"; finish; }

for mode in running stopped; do
	f="$tmp/$mode.pb.gz"
	[ $mode = stopped ] && stop=--stop || stop=
	timeout 60 "$H" leaks $pid $stop -o "$f" >"$tmp/$mode.out" 2>"$tmp/$mode.err" ||
		fail "$mode: leaks exited $?: $(cat "$tmp/$mode.err")"
	if [ -z "$emu" ]; then
		grep -q "^scan: 15 of .* the process $mode" "$tmp/$mode.out" ||
			fail "$mode: the scan line: $(sed -n 2p "$tmp/$mode.out")"
		grep -Eq '^ +39\.1 KiB +10 +0%  leak_site prof_leaks\.c:[0-9]+ <- main' "$tmp/$mode.out" ||
			fail "$mode: no named leak_site row: $(cat "$tmp/$mode.out")"
		eq "$mode: leak_site" "$(flat inuse_space "$f" leak_site)" 40000
		eq "$mode: cycle_site" "$(flat inuse_space "$f" cycle_site)" 8000
		eq "$mode: last_site" "$(flat inuse_space "$f" last_site)" 9000
	else
		grep -Eq "^scan: 1[0-5] of .* the process $mode" "$tmp/$mode.out" ||
			fail "$mode ($emu): the scan line: $(sed -n 2p "$tmp/$mode.out")"
		grep -Eq ' +[0-9]+ +0%  leak_site prof_leaks\.c:[0-9]+ <- main' "$tmp/$mode.out" ||
			fail "$mode ($emu): no named leak_site row: $(cat "$tmp/$mode.out")"
		l=$(flat inuse_space "$f" leak_site) c=$(flat inuse_space "$f" cycle_site)
		t=$(flat inuse_space "$f" last_site)
		[ "${l:-0}" -ge 4000 ] && [ "${l:-0}" -le 40000 ] && [ "${c:-0}" -le 8000 ] &&
			[ "${t:-0}" -le 9000 ] ||
			fail "$mode ($emu): leak_site $l (want 4000..40000), cycle_site $c (<= 8000), last_site $t (<= 9000)"
		echo "$mode ($emu): leak_site $l of 40000, cycle_site $c of 8000, last_site $t of 9000 (the emulator's memory is scanned too)"
	fi
	for site in cache_site inner_site packed_site chain_site stack_site; do
		eq "$mode: $site" "$(flat inuse_space "$f" $site)" 0
	done
done
timeout 60 "$H" leaks $pid --fail >/dev/null 2>"$tmp/fail.err"
eq "--fail with leaks: status" $? 3
"$H" leaks 0 2>"$tmp/bad.err" >/dev/null
eq "pid 0: status" $? 2
eq "pid 0: one line" "$(wc -l <"$tmp/bad.err")" 1
"$H" leaks $$ 2>"$tmp/none.err" >/dev/null
eq "no heapalloc: status" $? 1
eq "no heapalloc: one line" "$(wc -l <"$tmp/none.err")" 1

exec 7>&-
wait $pid
eq "the program's status" $? 0
eq "the program's output" "$(cat "$tmp/prog.out")" "done 1"

# At exit (HEAP_PROFILE_LEAKS, the same scan in the process): the same
# leaks in PREFIX.leaks.pb.gz and on stderr, the program's status kept; with
# HEAP_PROFILE_LEAKS_STATUS=7 the status is 7, the output still whole.
# (stack_site's thread has returned by then: its blocks may be leaks.)
mkdir "$tmp/x" "$tmp/y" "$tmp/z"
HEAPPROFILE="$tmp/x/p" HEAP_PROFILE_LEAKS=1 HEAP_PROFILE_SAMPLE_INTERVAL=64 \
	"$W" "$tmp/x/ready" </dev/null >"$tmp/x.out" 2>"$tmp/x.err"
eq "at exit: status" $? 0
eq "at exit: output" "$(cat "$tmp/x.out")" "done 1"
f="$tmp/x/p.leaks.pb.gz"
if [ -z "${HA_EMULATED:-}" ]; then
	eq "at exit: leak_site" "$(flat inuse_space "$f" leak_site)" 40000
	eq "at exit: cycle_site" "$(flat inuse_space "$f" cycle_site)" 8000
	eq "at exit: last_site" "$(flat inuse_space "$f" last_site)" 9000
else
	# the scan in the process reads the emulator's own writable memory
	# too (qemu-user shares the address space), whose words may equal a
	# leaked block's address: a leak may be missed, never invented
	l=$(flat inuse_space "$f" leak_site)
	[ "${l:-0}" -gt 0 ] && [ "${l:-0}" -le 40000 ] ||
		fail "at exit ($HA_EMULATED): leak_site $l, want 4000..40000"
	echo "at exit ($HA_EMULATED): leak_site $l of 40000 (the emulator's memory is scanned too)"
fi
for site in cache_site inner_site packed_site chain_site; do
	eq "at exit: $site" "$(flat inuse_space "$f" $site)" 0
done
lo=15; [ -n "${HA_EMULATED:-}" ] && lo=10   # (a leak or two may hide in the emulator's memory)
n=$(sed -n 's/^heapalloc: leak check at exit: \([0-9]*\) of 4[89] sampled live blocks nothing points to.*/\1/p' "$tmp/x.err")
[ "${n:-0}" -ge $lo ] && [ "${n:-0}" -le 20 ] ||
	fail "at exit: no report line of $lo..20 leaked: $(grep leak "$tmp/x.err")"
# every allocation sampled: samples carry no header, so the allocator's
# popped stack slots hold the leaked blocks' own addresses (never read)
if [ -z "${HA_EMULATED:-}" ]; then
	mkdir "$tmp/a"
	# and the blocks freed_site left their only pointers in, freed since,
	# are not read: free memory keeps stale words
	HEAPPROFILE="$tmp/a/p" HEAP_PROFILE_LEAKS=1 HEAP_PROFILE_SAMPLE_INTERVAL=1 \
		"$W" "$tmp/a/ready" freed </dev/null >"$tmp/a.out" 2>"$tmp/a.err"
	eq "at exit, every allocation: status" $? 0
	for s in leak_site:40000 cycle_site:8000 last_site:9000 freed_site:4000 cache_site:0 chain_site:0; do
		eq "at exit, every allocation: ${s%:*}" \
			"$(flat inuse_space "$tmp/a/p.leaks.pb.gz" ${s%:*})" ${s#*:}
	done
fi
HEAPPROFILE="$tmp/y/p" HEAP_PROFILE_LEAKS=1 HEAP_PROFILE_LEAKS_STATUS=7 \
	HEAP_PROFILE_SAMPLE_INTERVAL=64 "$W" "$tmp/y/ready" </dev/null >"$tmp/y.out" 2>"$tmp/y.err"
eq "at exit, status 7: status" $? 7
eq "at exit, status 7: output" "$(cat "$tmp/y.out")" "done 1"
HEAPPROFILE="$tmp/z/p" HEAP_PROFILE_SAMPLE_INTERVAL=64 "$W" "$tmp/z/ready" </dev/null \
	>"$tmp/z.out" 2>"$tmp/z.err"
eq "not asked: status" $? 0
[ -e "$tmp/z/p.leaks.pb.gz" ] && fail "not asked: a leaks file was written"
grep -q "leak check" "$tmp/z.err" && fail "not asked: a leak report: $(grep leak "$tmp/z.err")"
# asked with sampling off: one line says there is nothing to check
HEAP_PROFILE_LEAKS=1 HEAP_PROFILE_LEAKS_STATUS=7 HEAP_PROFILE_SAMPLE_INTERVAL=0 "$W" "$tmp/ready" \
	</dev/null >"$tmp/o.out" 2>"$tmp/o.err"
eq "sampling off: status" $? 0
eq "sampling off: stderr" "$(cat "$tmp/o.err")" \
	"heapalloc: HEAP_PROFILE_LEAKS: sampling is off (HEAP_PROFILE_SAMPLE_INTERVAL=0): no block to check"
finish
