#!/bin/sh
# cmd_unsample.sh — the commands that read text profiles (heapalloc growth
# through ha_dump.py, heapalloc timeline without a log) unsample heap_v2/R
# lines with the C writer's formula (heapalloc-profile unsample, i.e.
# prof/capture/sampler.c), not a copy: tables of two lines at R = 2^40 are written
# by heapalloc-profile as text (heap_v2/R, uncalibrated) and as pprof
# (unsampled by prof/output/pprof.c), and the Python readers' numbers from the
# text equal the pprof values exactly.  At x = 16 / 2^40 the naive
# 1 - e^(-x) is off: 16 bytes stand for 2^40 + 8 (the series), the naive
# formula says 2^40, so the check can tell the two apart.
. "$top_srcdir/tests/lib/prof_lib.sh"
P="$top_builddir/tools/heapalloc-profile"
PY=${PYTHON3:-python3}
printf '%s\n' 'rate 1099511627776' 'flags 0' 'line 0 1 16 0 0 0 1 4198400' \
	'line 1 3 300 1 100 0 1 4198500' 'command cmd_unsample' >"$tmp/tables"
"$P" $$ text <"$tmp/tables" >"$tmp/p.heap" || fail "text: exit $?"
"$P" $$ pprof <"$tmp/tables" >"$tmp/p.pb.gz" || fail "pprof: exit $?"
head -1 "$tmp/p.heap" | grep -q '@ heap_v2/1099511627776$' || fail "text header: $(head -1 "$tmp/p.heap")"
"$PY" - "$top_srcdir/tools" "$P" "$tmp/p.heap" "$tmp/p.pb.gz" >"$tmp/py.out" 2>&1 <<'PYEOF' ||
import math, sys
sys.path.insert(0, sys.argv[1])
import ha_dump, ha_pb, ha_textdump, ha_timeline
ha_textdump.HELPER = sys.argv[2]
R = 1 << 40
prof = ha_pb.read_profile(open(sys.argv[4], 'rb').read())
types = [t for t, _ in prof.sample_types]
col = {t: types.index(t) for t in types}
c = sorted((v[col['inuse_objects']], v[col['inuse_space']]) for _, v in prof.samples)
py = sorted(tuple(v) for v in ha_dump.load(sys.argv[3]).stacks.values())
fails = 0
def check(what, got, want):
    global fails
    if got != want:
        print('%s: got %r, want %r' % (what, got, want))
        fails += 1
check('in use per line, ha_dump against pprof.c', py, c)
check('the 16-byte line, the series', (1 << 36, (1 << 40) + 8) in c, True)
naive = int(16 / (1 - math.exp(-16 / R)))
check('the naive formula is off here', naive != (1 << 40) + 8, True)
tot = (sum(v[col['inuse_space']] for _, v in prof.samples),
       sum(v[col['alloc_space']] for _, v in prof.samples))
check('timeline totals against pprof.c', ha_timeline.heap_totals(sys.argv[3]), tot)
ha_textdump.HELPER = None
try:
    ha_dump.load(sys.argv[3])
    check('no helper: an error', 'loaded', 'LoadError')
except ha_dump.LoadError as e:
    check('no helper: the reason', 'needs heapalloc-profile' in str(e), True)
sys.exit(fails != 0)
PYEOF
	fail "python: $(cat "$tmp/py.out")"
# the helper's own errors: one line, exit 1
printf 'x\n' | "$P" unsample 5 >/dev/null 2>"$tmp/e1"
eq "bad pair: exit" $? 1
eq "bad pair: line" "$(cat "$tmp/e1")" 'heapalloc-profile: unsample: a line is not "COUNT BYTES"'
"$P" unsample z </dev/null >/dev/null 2>"$tmp/e2"
eq "bad rate: exit" $? 1
eq "bad rate: line" "$(cat "$tmp/e2")" 'heapalloc-profile: unsample: the rate is not a count of bytes: z'
finish
