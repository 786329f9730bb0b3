#!/bin/sh
# alloc_profile_toggle_modes.sh — alloc_profile_toggle (profiling started and
# stopped three times under traffic: patterns, usable sizes, realloc
# contents) again with sampled and unsampled blocks mixed (interval 4096),
# with exact totals and with HEAP_PROFILE_EXACT_TOTALS=0, where only blocks
# that may be sampled carry a header.  Env: top_builddir.
t=${top_builddir:-.}/tests/integration/alloc_profile_toggle
[ -x "$t" ] || { echo "HARD ERROR: $t not built"; exit 99; }
status=0
for exact in 1 0; do
	HEAP_PROFILE_SAMPLE_INTERVAL=4096 HEAP_PROFILE_EXACT_TOTALS=$exact "$t" >/dev/null 2>&1
	rc=$?
	if [ $rc = 0 ]; then
		echo "ok: alloc_profile_toggle, interval 4096, exact totals $exact"
	else
		echo "FAIL: alloc_profile_toggle, interval 4096, exact totals $exact: exit $rc"
		status=1
	fi
done
exit $status
