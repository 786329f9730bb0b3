"""tests/integration/remote_same.py — an in-process pprof dump and an outside one of the
same tables are the same profile (tests/integration/remote_same.sh says what "same"
holds to and why).

    remote_same.py TOOLS INSIDE OUTSIDE PID

Prints the differences, one a line, and exits 1; else exits 0."""
import gzip
import os
import sys

sys.path.insert(0, sys.argv[1])
import ha_pb

inside_data, outside_data = (open(p, 'rb').read() for p in sys.argv[2:4])
pid = sys.argv[4]
problems = []
# under qemu-user the program dumps the emulator's view of its maps and
# command line (HA_EMULATED, Makefile.am): see below
emu = os.environ.get('HA_EMULATED')


def scalars(data):
    """time_nanos, default sample type, comments of a profile."""
    raw = gzip.decompress(data)
    top = list(ha_pb.fields(raw, 0, len(raw)))
    strs = [bytes(raw[v[0]:v[1]]).decode() for f, w, v, o in top if f == 6]
    time = [v for f, w, v, o in top if f == 9]
    default = [strs[v] for f, w, v, o in top if f == 14]
    return time[0], default, [strs[v] for f, w, v, o in top if f == 13]


def lines(P):
    """Each line's stack, values summed over its parts by age, and its
    labels but age; and [(stack, values, age)] of its age-labelled parts."""
    merged, aged = {}, []
    for (locs, vals), labs in zip(P.samples, P.labels):
        stack = tuple(P.locations[l].address for l in locs)
        key = (stack, tuple(sorted((k, v) for k, v in labs.items() if k != 'age')))
        m = merged.setdefault(key, [0] * len(vals))
        merged[key] = [a + b for a, b in zip(m, vals)]
        if 'age' in labs:
            aged.append((stack, vals, labs['age']))
    return merged, aged


A = ha_pb.read_profile(inside_data)
B = ha_pb.read_profile(outside_data)
if A.sample_types != B.sample_types or A.period != B.period:
    problems.append('sample types %s period %d, outside %s period %d'
                    % (A.sample_types, A.period, B.sample_types, B.period))
maps = [sorted((m.start, m.limit, m.offset, m.filename, m.build_id) for m in P.mappings.values())
        for P in (A, B)]
if emu:
    # the emulator shows the program executable memory of its own making
    # (qemu's signal trampoline page: anonymous, readable only in the
    # kernel's map); every file's mapping must still be the same
    anon = [m for m in maps[0] if not m[3]]
    maps[0] = [m for m in maps[0] if m[3]]
    print('%s: %d executable anonymous mapping(s) of the emulator\'s in the in-process '
          'profile left out: %s' % (emu, len(anon), ['%x-%x' % m[:2] for m in anon]))
if maps[0] != maps[1]:
    problems.append('mappings differ: %s' % set(maps[0]).symmetric_difference(maps[1]))
if not any(m[4] for m in maps[0]):
    problems.append('no mapping has a build ID')
ta, da, ca = scalars(inside_data)
tb, db, cb = scalars(outside_data)
if da != db:
    problems.append('default sample type %s, outside %s' % (da, db))
# the calibration's comments (everything before the command's) the same
cut = [next((i for i, c in enumerate(x) if c.startswith('command: ')), None) for x in (ca, cb)]
if None in cut or ca[:cut[0]] != cb[:cut[1]] or cut[0] < 3:
    problems.append('comments differ: %s | outside %s' % (ca, cb))
elif not emu and not (cb[cut[1]].startswith(ca[cut[0]] + ' (pid %s, read from outside' % pid)):
    problems.append('command comment %r, outside %r' % (ca[cut[0]], cb[cut[1]]))
elif emu and not (cb[cut[1]].startswith('command: ') and
                  ' %s (pid %s, read from outside' % (ca[cut[0]][9:], pid) in cb[cut[1]]):
    # /proc/PID/cmdline is the kernel's: binfmt_misc's interpreter and the
    # program's path before the arguments the program sees
    problems.append('command comment %r, outside %r (%s)' % (ca[cut[0]], cb[cut[1]], emu))
ma, aa = lines(A)
mb, ab = lines(B)
if ma != mb:
    differ = [(k, ma.get(k), mb.get(k)) for k in set(ma) | set(mb) if ma.get(k) != mb.get(k)]
    problems.append('%d lines inside, %d outside; differing (line, inside, outside): %s'
                    % (len(ma), len(mb), differ[:3]))
if len(ma) < 3 or not aa:
    problems.append('a profile of %d lines, %d aged parts: too little to compare' % (len(ma), len(aa)))
if not any(k[1] and dict(k[1]).get('sampling_error') for k in ma):
    problems.append('no line has a sampling_error label (not sampled?)')
# ages: by stack, the outside read's no younger, and older by at most the
# seconds between the two dumps (rounded up, and one for the rounding)
late = (tb - ta) // 1000000000 + 2 if tb >= ta else -1
if late < 0:
    problems.append('the outside dump is timed before the in-process one')
for stack in {s for s, _, _ in aa} | {s for s, _, _ in ab}:
    ia = sorted(a for s, _, a in aa if s == stack)
    ib = sorted(a for s, _, a in ab if s == stack)
    if not ia or not ib or ib[0] < ia[0] or ib[-1] > ia[-1] + late:
        problems.append('ages of %s: %s inside, %s outside (%d s apart at most)'
                        % ([hex(x) for x in stack[:2]], ia, ib, late))
if problems:
    sys.stdout.write('\n'.join(problems) + '\n')
    sys.exit(1)
