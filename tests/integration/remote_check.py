"""tests/integration/remote_check.py — the check of a `heapalloc dump PID` profile of
tests/integration/remote_sites.c (C, C++) or tests/integration/rust_crate's remote_sites.rs, shared
by tests/integration/remote_dump.sh and tests/integration/remote_dump_rust.sh.

    remote_check.py TOOLS PROFILE READY EXACT PID FUNCTION_PREFIX SOURCE

site_big and site_small must hold their bytes (READY's "big" and "small")
within 4 of the standard errors of sampling at the profile's period, with file:line in
SOURCE; site_gone nothing in use (SOURCE starting with '-': a stripped
program, whose sites have no names: these are not checked); with EXACT 1 the totals must be READY's
books to the byte; a comment names PID and its command.  A site's frame is
the function FUNCTION_PREFIX + name (C's may carry a C++ signature).
Prints the problems on one line and exits 1, else exits 0."""
import gzip
import math
import sys

sys.path.insert(0, sys.argv[1])
import ha_pb

data = open(sys.argv[2], 'rb').read()
p = ha_pb.read_profile(data)
f = open(sys.argv[3]).read().split()
want = dict(zip(f[0::2], map(int, f[1::2])))
exact, pid, prefix, source = sys.argv[4] == '1', sys.argv[5], sys.argv[6], sys.argv[7]
types = [t for t, u in p.sample_types]
ia, ii = types.index('alloc_space'), types.index('inuse_space')
raw = gzip.decompress(data)
strings = [bytes(raw[v[0]:v[1]]).decode() for field, wire, v, off in ha_pb.fields(raw, 0, len(raw))
           if field == 6]
problems = []


def site(name):
    """In-use bytes of the samples with a frame of function NAME, and that
    frame's file:line."""
    full = prefix + name
    inuse, files = 0, set()
    for locs, vals in p.samples:
        hit = [(p.functions[fn].name, p.functions[fn].filename, line)
               for l in locs for fn, line in p.locations[l].lines
               if p.functions[fn].name == full or p.functions[fn].name.startswith(full + '(')]
        if hit:
            inuse += vals[ii]
            files.add('%s:%d' % (hit[0][1].split('/')[-1], hit[0][2]))
    return inuse, files


tot_in = sum(v[ii] for l, v in p.samples)
tot_al = sum(v[ia] for l, v in p.samples)
if exact and tot_al != want['alloc']:
    problems.append('alloc_space total %d, the books say %d' % (tot_al, want['alloc']))
if exact and tot_in != want['alloc'] - want['free']:
    problems.append('inuse_space total %d, the books say %d' % (tot_in, want['alloc'] - want['free']))
# a site's relative standard error: sqrt((1 - p) / samples), samples ~ bytes / R;
# with nothing set the target samples at the always-on 2 MiB
R = p.period
if R != 2 << 20:
    problems.append('sampled every %d bytes, not the always-on 2 MiB' % R)
for name, key, size in () if source.startswith('-') else (('site_big', 'big', 65536),
                                                           ('site_small', 'small', 512)):
    got, files = site(name)
    pr = 1 - math.exp(-size / R)
    rse = math.sqrt((1 - pr) / max(want[key] * pr / size, 1))
    if abs(got - want[key]) > 4 * rse * want[key]:
        problems.append('%s in use %d, want %d within 4 x %.1f%%' % (name, got, want[key], 100 * rse))
    if not any(x.startswith(source + ':') for x in files):
        problems.append('%s has no file:line in %s (%s)' % (name, source, files))
gone, _ = site('site_gone')
if gone:
    problems.append('site_gone shows %d bytes in use' % gone)
if not any(('pid %s,' % pid) in s and '/run/prog' in s for s in strings):
    problems.append('no comment naming pid %s and its command' % pid)
if problems:
    sys.stdout.write('; '.join(problems) + '\n')
    sys.exit(1)
