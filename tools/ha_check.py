# ha_check.py — `heapalloc check`: holds each file of a run to the rules
# Go pprof and perl pprof enforce.  Text dumps through ha_textdump's parser,
# gzipped profile.proto through ha_pb's wire reader (tags, wire types,
# lengths, sample types, string and id references), PREFIX.log and .stats
# by their line shapes.  Prints FILE:LINE (or byte offset) per problem.
import os
import re
import sys

from ha_pb import PbError, fields, gunzip, ints
from ha_textdump import parse_text, show

def check_log(data, problems):
    lines = data.decode('utf-8', 'replace').split('\n')
    if lines and lines[-1] == '':
        lines.pop()
    if len(lines) < 2 or not lines[0].startswith('#') or not lines[1].startswith('# seq\t'):
        problems.append((1, 'want two "#" header lines, the second "# seq<TAB>time<TAB>..."'))
        return len(lines)
    for k, l in enumerate(lines[2:], 3):
        if l.startswith('# command:'):     # a descendant names its command line
            continue
        if l.startswith('# peak:'):        # the peak file written, and the true peak
            if not re.match(r'^# peak: [0-9]+ bytes in use at the peak; [^\t]+ holds [0-9]+$', l):
                problems.append((k, 'want "# peak: N bytes in use at the peak; FILE holds M", '
                                 'got %s' % show(l)))
            continue
        f = l.split('\t')
        if (len(f) != 8 or not f[0].isdigit() or not re.match(r'^[0-9]+(\.[0-9]+)?$', f[1])
                or not all(x.isdigit() for x in f[2:6]) or not f[6]):
            problems.append((k, 'want "seq time allocated freed in_use rss file reason" '
                             'separated by tabs, got %s' % show(l)))
        elif int(f[4]) != int(f[2]) - int(f[3]):
            problems.append((k, 'in_use %s is not allocated %s - freed %s' % (f[4], f[2], f[3])))
    return len(lines)


def check_stats(data, problems):
    lines = data.decode('utf-8', 'replace').split('\n')
    if lines and lines[-1] == '':
        lines.pop()
    for k, l in enumerate(lines, 1):
        if l.startswith('#'):
            continue
        if not re.match(r'^[a-z_][a-z0-9_.]* +-?[0-9]+( .*)?$', l):
            problems.append((k, 'want "name value meaning", got %s' % show(l)))
    return len(lines)


# profile.proto: field -> (name, wire type; 'i' = repeated integer, packed or not)
PROFILE_FIELDS = {1: ('sample_type', 2), 2: ('sample', 2), 3: ('mapping', 2), 4: ('location', 2),
                  5: ('function', 2), 6: ('string_table', 2), 7: ('drop_frames', 0),
                  8: ('keep_frames', 0), 9: ('time_nanos', 0), 10: ('duration_nanos', 0),
                  11: ('period_type', 2), 12: ('period', 0), 13: ('comment', 'i'),
                  14: ('default_sample_type', 0)}


def check_pb(data, problems):
    """Walk a gzipped profile.proto; problems get (byte offset, message)."""
    try:
        buf = gunzip(data)
    except PbError as e:
        problems.append((None, e.args[0]))
        return None
    nstr = 0
    sample_types = 0
    samples = []            # (offset, [location ids], number of values)
    loc_ids = set()
    map_ids = set()
    loc_maps = []           # (offset, mapping id)
    str_refs = []           # (offset, index)
    try:
        for field, wire, v, off in fields(buf, 0, len(buf)):
            spec = PROFILE_FIELDS.get(field)
            if spec is None:
                continue
            name, want = spec
            if want == 'i':
                ints(buf, field, wire, v, off)
                continue
            if wire != want:
                raise PbError(off, 'Profile.%s (field %d) has wire type %d, want %d'
                              % (name, field, wire, want))
            if field == 6:
                nstr += 1
            elif field in (1, 11):
                for f2, w2, v2, o2 in fields(buf, v[0], v[1]):
                    if f2 in (1, 2):
                        if w2 != 0:
                            raise PbError(o2, 'ValueType field %d has wire type %d' % (f2, w2))
                        str_refs.append((o2, v2))
                if field == 1:
                    sample_types += 1
            elif field == 2:
                locs, nval = [], 0
                for f2, w2, v2, o2 in fields(buf, v[0], v[1]):
                    if f2 == 1:
                        locs += ints(buf, f2, w2, v2, o2)
                    elif f2 == 2:
                        nval += len(ints(buf, f2, w2, v2, o2))
                samples.append((off, locs, nval))
            elif field == 3:
                mid = 0
                for f2, w2, v2, o2 in fields(buf, v[0], v[1]):
                    if f2 == 1 and w2 == 0:
                        mid = v2
                    elif f2 in (5, 6) and w2 == 0:
                        str_refs.append((o2, v2))
                if mid == 0:
                    raise PbError(off, 'a mapping with id 0')
                map_ids.add(mid)
            elif field == 4:
                lid, mid = 0, 0
                for f2, w2, v2, o2 in fields(buf, v[0], v[1]):
                    if f2 == 1 and w2 == 0:
                        lid = v2
                    elif f2 == 2 and w2 == 0:
                        mid = v2
                    elif f2 == 4 and w2 == 2:
                        for _ in fields(buf, v2[0], v2[1]):
                            pass
                if lid == 0:
                    raise PbError(off, 'a location with id 0')
                loc_ids.add(lid)
                if mid:
                    loc_maps.append((off, mid))
            elif field == 5:
                for f2, w2, v2, o2 in fields(buf, v[0], v[1]):
                    if f2 in (2, 3, 4) and w2 == 0:
                        str_refs.append((o2, v2))
            elif field == 14:
                str_refs.append((off, v))
    except PbError as e:
        problems.append((e.off, e.args[0]))
        return None
    if not sample_types:
        problems.append((None, 'no sample_type (pprof needs at least one)'))
    if nstr == 0:
        problems.append((None, 'no string table (its first entry must be "")'))
    for off, idx in str_refs:
        if idx >= max(nstr, 1):
            problems.append((off, 'string index %d past the string table (%d strings)' % (idx, nstr)))
            break
    for off, locs, nval in samples:
        bad = [l for l in locs if l not in loc_ids]
        if bad:
            problems.append((off, 'sample refers to undefined location id %d' % bad[0]))
            break
        if nval != sample_types:
            problems.append((off, 'sample has %d values for %d sample types' % (nval, sample_types)))
            break
    for off, mid in loc_maps:
        if mid not in map_ids:
            problems.append((off, 'location refers to undefined mapping id %d' % mid))
            break
    return (len(samples), len(loc_ids), len(map_ids))


def check(args):
    """Check each file; 1 when any has a problem, else 0."""
    bad = 0
    for path in args:
        try:
            with open(path, 'rb') as f:
                data = f.read()
        except OSError as e:
            sys.stdout.write('%s: cannot read: %s\n' % (path, e.strerror))
            bad += 1
            continue
        problems = []
        base = os.path.basename(path)
        if data[:2] == b'\x1f\x8b' or base.endswith('.gz'):
            counts = check_pb(data, problems)
            for off, msg in problems:
                where = '' if off is None else ' (byte %d of the profile)' % off
                sys.stdout.write('%s: %s%s\n' % (path, msg, where))
            if not problems:
                sys.stdout.write('%s: ok (%d samples, %d locations, %d mappings)\n' % ((path,) + counts))
        else:
            if base.endswith('.log'):
                n = check_log(data, problems)
                what = '%d lines' % n
            elif base.endswith('.stats'):
                n = check_stats(data, problems)
                what = '%d lines' % n
            else:
                P = parse_text(path, data, problems)
                what = '%d lines, %d mappings' % (P.lines, len(P.maps))
            for ln, msg in sorted(problems, key=lambda p: p[0]):
                sys.stdout.write('%s:%d: %s\n' % (path, ln, msg))
            if not problems:
                sys.stdout.write('%s: ok (%s)\n' % (path, what))
        bad += bool(problems)
    return 1 if bad else 0

