#!/bin/sh
# prof_usdt.sh — the otel_memory probes seen by a real tracer.  bpftrace
# attaches system-wide to otel_memory:alloc and :free in a private copy of
# the library (its own inode: uprobes are per file, so other tests running
# the build's library are not sampled meanwhile), BEFORE the program starts,
# with the always-on sampling switched off (HEAP_PROFILE_SAMPLE_INTERVAL=0:
# profiling off).  tests/integration/prof_usdt (see there) then shows
# that sampling started by itself, allocates 768 MiB in a named thread and
# frees it all.  Checks:
#   - the weights of that thread's alloc probes sum to its bytes within
#     5 standard deviations of the estimate (the program computes
#     sd^2 = sum S^2 (1-p)/p, p = 1 - e^(-S/R), about 1% of the bytes);
#   - every free probe of that thread is for a block its alloc probe
#     reported, and every reported block's free fired;
#   - the allocations the library says it sampled while that thread ran
#     are the thread's alloc probes bpftrace saw;
#   - once bpftrace is gone, sampling stops within 17 MiB and nothing more
#     is sampled (checked by the program through heapalloc_get_stats).
# Then the same with HEAPPROFILE set, in the default and the exact-totals
# mode: the session samples, and its recorded samples are the probes' (same
# checks, the sample count the session's).
# Skips (77) when not root, without bpftrace, where the kernel refuses BPF,
# or when the library was built without <sys/sdt.h>.  Env: HA_LIB, top_builddir.
. "$top_srcdir/tests/lib/emu.sh"
emu_skip "uprobes never fire in code that qemu-user translates"
lib=${HA_LIB:-}
prog=${top_builddir:-.}/tests/integration/prof_usdt
[ -n "$lib" ] && [ -f "$lib" ] || { echo "HARD ERROR: HA_LIB='$lib' is not a file"; exit 99; }
[ -x "$prog" ] || { echo "HARD ERROR: $prog not built"; exit 99; }
if ! readelf -n "$lib" 2>/dev/null | grep -q 'Provider: otel_memory'; then
	echo "SKIP: $lib has no otel_memory probes (configured --disable-usdt or without <sys/sdt.h>)"
	exit 77
fi
[ "$(id -u)" = 0 ] || { echo "SKIP: bpftrace needs root"; exit 77; }
command -v bpftrace >/dev/null 2>&1 || { echo "SKIP: bpftrace is not installed (Debian bpftrace)"; exit 77; }
if ! timeout 60 bpftrace -e 'BEGIN { exit(); }' >/dev/null 2>&1; then
	echo "SKIP: bpftrace cannot load a program here (the kernel forbids BPF)"
	exit 77
fi

# the semaphores need the kernel's uprobe reference counters (4.20 and
# later) through bpftrace; older bpftrace builds say so in --info
if bpftrace --info 2>&1 | grep -qi 'uprobe refcount.*: no'; then
	echo "SKIP: this bpftrace cannot set USDT semaphores (uprobe refcount: no)"
	exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ha_usdt.XXXXXX") || exit 99
bt=
cleanup() {
	[ -n "$bt" ] && kill -KILL "$bt" 2>/dev/null   # its uprobes go with it
	rm -rf "$tmp"
}
trap cleanup EXIT
# the exact file that gets mapped, resolved through the symlinks
copy=$tmp/$(basename "$(readlink -f "$lib")")
cp "$(readlink -f "$lib")" "$copy" || exit 99

cat > "$tmp/probes.bt" <<EOF
BEGIN { printf("ready\n"); }
usdt:$copy:otel_memory:alloc /comm == "ha_usdt_meas"/ {
	@n = @n + 1; @w = @w + arg2; @live[arg0] = 1;
}
usdt:$copy:otel_memory:free /comm == "ha_usdt_meas"/ {
	if (@live[arg0]) { @f = @f + 1; delete(@live[arg0]); } else { @u = @u + 1; }
}
usdt:$copy:otel_memory:alloc { @all = @all + 1; }
END {
	printf("bt alloc %d weight %d freed %d unknown %d all %d left %d\n",
	       @n, @w, @f, @u, @all, @n - @f);
	clear(@live); clear(@n); clear(@w); clear(@f); clear(@u); clear(@all);
}
EOF
# stop_bt: end bpftrace so that it prints its END figures.  SIGINT again each
# second: a signal that lands just before bpftrace blocks in epoll_wait (no
# probe firing any more) only sets its flag, and the next one wakes it.
stop_bt() {
	i=0
	while st=$(ps -o stat= -p $bt) && [ "${st#Z}" = "$st" ]; do   # alive, not a zombie
		kill -INT $bt 2>/dev/null
		i=$((i + 1))
		if [ $i -gt 60 ]; then
			kill -KILL $bt 2>/dev/null
			echo "HARD ERROR: bpftrace did not stop on SIGINT"
			exit 99
		fi
		sleep 1
	done
	wait $bt
	bt=
}

# run_traced [session|exact]: bpftrace attached, then the program, then the checks
run_traced() {
	rm -f "$tmp/measured" "$tmp/detached" "$tmp/bt.out" "$tmp/prog.out"
	bpftrace "$tmp/probes.bt" > "$tmp/bt.out" 2> "$tmp/bt.err" &
	bt=$!
	i=0
	until grep -qs '^ready' "$tmp/bt.out"; do
		i=$((i + 1))
		if [ $i -gt 600 ] || ! kill -0 $bt 2>/dev/null; then
			echo "HARD ERROR: bpftrace did not attach:"; cat "$tmp/bt.err"
			exit 99
		fi
		sleep 0.1
	done
	if [ "$1" = session ] || [ "$1" = exact ]; then
		rm -rf "$tmp/prof" && mkdir "$tmp/prof"
		exact=0; [ "$1" = exact ] && exact=1
		HEAPPROFILE=$tmp/prof/p HEAP_PROFILE_EXACT_TOTALS=$exact LD_PRELOAD="$copy" \
			timeout 300 "$prog" "$tmp" session > "$tmp/prog.out" 2>&1
		rc=$?
	else
		env -u HEAPPROFILE HEAP_PROFILE_SAMPLE_INTERVAL=0 LD_PRELOAD="$copy" timeout 300 \
			"$prog" "$tmp" > "$tmp/prog.out" 2>&1 &
		pid=$!
		i=0
		until [ -f "$tmp/measured" ]; do
			i=$((i + 1))
			if [ $i -gt 3000 ] || ! kill -0 $pid 2>/dev/null; then
				break
			fi
			sleep 0.1
		done
	fi
	stop_bt
	if [ -z "$1" ]; then
		touch "$tmp/detached"
		wait $pid
		rc=$?
	fi
	echo "--- ${1:-no variable set}"
	cat "$tmp/prog.out" "$tmp/bt.out" | grep -v '^$'
	[ $rc = 0 ] || { echo "FAIL: the program exited $rc"; status=1; return; }

	set -- $(grep '^bt alloc' "$tmp/bt.out")
	n=$3 w=$5 freed=$7 unknown=$9 all=${11}
	set -- $(grep '^measured' "$tmp/prog.out")
	bytes=$2 sd=$5
	samples=$(sed -n 's/^probe samples //p' "$tmp/prog.out")
	[ -n "$n" ] && [ -n "$bytes" ] && [ -n "$samples" ] || { echo "HARD ERROR: missing figures"; exit 99; }
	dev=$((w - bytes)); [ $dev -lt 0 ] && dev=$((-dev))
	if [ "$n" -lt 100 ]; then
		echo "FAIL: only $n alloc probes for $bytes bytes"; status=1
	fi
	if [ $dev -gt $((5 * sd)) ]; then
		echo "FAIL: weights sum to $w for $bytes bytes: off by $dev, more than 5 sd ($sd)"; status=1
	else
		echo "ok: weights $w for $bytes bytes, off by $dev (sd $sd, bound 5 sd)"
	fi
	if [ "$freed" != "$n" ] || [ "$unknown" != 0 ]; then
		echo "FAIL: $n blocks reported, all freed, but $freed free probes matched and $unknown were of unreported blocks"
		status=1
	else
		echo "ok: $freed free probes, one per reported block, none for another"
	fi
	if [ "$samples" != "$n" ]; then
		echo "FAIL: the library sampled (recorded) $samples allocations, bpftrace saw $n"; status=1
	else
		echo "ok: $n samples, each seen at the probe ($all in the whole process)"
	fi
}

status=0
run_traced
run_traced session
run_traced exact
exit $status
