#!/bin/sh
# prof_usdt_poll.sh — tests/integration/prof_usdt_poll (attach and detach by the
# semaphore, no BPF) in an empty directory, in the default mode and with
# HEAP_PROFILE_EXACT_TOTALS=1 (its session runs in compatibility mode;
# probe-only sampling is the same), with the always-on sampling switched
# off (HEAP_PROFILE_SAMPLE_INTERVAL=0): profiling off until a probe or the
# API turns it on.  Env: top_builddir.
prog=${top_builddir:-.}/tests/integration/prof_usdt_poll
[ -x "$prog" ] || { echo "HARD ERROR: $prog not built"; exit 99; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ha_usdt_poll.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
status=0
for exact in 0 1; do
	rm -rf "$tmp/run" && mkdir "$tmp/run" || exit 99
	(cd "$tmp/run" && env -u HEAPPROFILE HEAP_PROFILE_SAMPLE_INTERVAL=0 \
		HEAP_PROFILE_EXACT_TOTALS=$exact "$prog")
	rc=$?
	[ $rc = 77 ] && exit 77
	if [ $rc != 0 ]; then
		echo "FAIL: HEAP_PROFILE_EXACT_TOTALS=$exact: exit $rc"; status=1
	else
		echo "ok: HEAP_PROFILE_EXACT_TOTALS=$exact"
	fi
done
exit $status
