# ha_remote.py — the profile of a process read from outside (ha_proc.py's
# snapshot), written as an in-process dump writes it: the values calibrated
# to the books as prof/calibrate.c does (same formulas, same comments), the
# gperftools text format (prof/writer.c) or gzipped profile.proto
# (prof/pprof.c) with the target's executable mappings and their build IDs,
# then named by heapalloc-symbolize from the target's own files
# (/proc/PID/map_files: a deleted or replaced binary is still named).
# Also the commands built on it: dump, top and serve.
import gzip
import math
import os
import struct
import sys
import tempfile
import time

import ha_proc
import ha_symbolize

EXACT, BOUNDED, UNSAMPLED = 0, 1, 2


# ---- calibration (prof/calibrate.c) ----------------------------------------

def p_of(avg, r):
    x = avg / r
    return x * (1 - x / 2 * (1 - x / 3)) if x < 1e-3 else 1 - math.exp(-x)


def rse(c, b, r):
    if r <= 1 or not c or not b:
        return 0.0
    p = p_of(b / c, r)
    return math.sqrt(max((1 - p) / c, 0))


def _round_to(x, k, total):
    """Column k of x rounded so that it adds up to total: the floors, then
    one more for the largest fractions (ties to the earlier line), as
    calibrate.c (which bins the fractions in 4096 steps)."""
    n = len(x)
    out = [int(v[k]) if v[k] > 0 else 0 for v in x]
    if not n:
        return out
    s = sum(out)
    big = max(range(n), key=out.__getitem__)
    if s > total:
        out[big] -= min(s - total, out[big])
        return out
    d = total - s
    if d > n:
        out[big] += d - n
        d = n
    if d:
        frac = [v[k] - f for v, f in zip(x, out)]
        for i in sorted(range(n), key=frac.__getitem__, reverse=True)[:d]:
            out[i] += 1
    return out


class Calib:
    pass


def calibrate(lines, r, t, heap, on):
    """Per line [alloc_objects, alloc_space, inuse_objects, inuse_space],
    or None (raw); and what the comments say."""
    c = Calib()
    c.r, c.scaled, c.inuse = r, False, EXACT
    c.books = (t[0], t[0] - t[1] if t[0] > t[1] else 0)
    c.est = [0.0] * 4
    c.factor = [0.0, 0.0]
    c.rse = [0.0, 0.0]
    c.total = [0] * 4
    if r <= 1 or not on or not lines:
        return None, c
    c.bound = max(min(heap, t[0]), c.books[1])
    x = []
    var = [0.0, 0.0]
    for l in lines:
        row = [0.0] * 4
        cc = (l.alloc_count, l.alloc_count - l.free_count)
        bb = (l.alloc_bytes, l.alloc_bytes - l.free_bytes)
        for j in range(2):
            if not l.alloc_count or not l.pcs or not cc[j] or not bb[j]:
                continue
            avg = bb[j] / cc[j]
            p = p_of(avg, r)
            row[2 * j], row[2 * j + 1] = cc[j] / p, bb[j] / p
            c.est[2 * j] += row[2 * j]
            c.est[2 * j + 1] += row[2 * j + 1]
            var[j] += cc[j] * (1 - p) / (p * p) * avg * avg
        x.append(row)
    c.rse = [math.sqrt(var[j]) / c.est[2 * j + 1] if c.est[2 * j + 1] > 0 else 0
             for j in range(2)]
    want_in = float(c.books[1])
    if c.est[3] > want_in + 4 * math.sqrt(var[1]) + 0.5:
        c.inuse = BOUNDED
        want_in = min(c.est[3], float(c.bound))
    want = [0, c.books[0], 0, int(want_in + 0.5)]
    if c.est[3] <= 0 and want[3]:
        c.inuse = UNSAMPLED
        want[3] = 0
    if c.est[1] <= 0:
        return None, c
    for j in range(2):
        f = want[2 * j + 1] / c.est[2 * j + 1] if c.est[2 * j + 1] > 0 else 0
        c.factor[j] = f
        want[2 * j] = int(c.est[2 * j] * f + 0.5)
        for row in x:
            row[2 * j] *= f
            row[2 * j + 1] *= f
    cols = [_round_to(x, k, want[k]) for k in range(4)]
    v = [[cols[k][i] for k in range(4)] for i in range(len(x))]
    for row in v:
        for j in range(2):
            if row[2 * j + 1] and not row[2 * j]:
                row[2 * j] = 1
    c.total = [sum(row[k] for row in v) for k in range(4)]
    c.scaled = True
    return v, c


def _pct(ratio):
    return '%s%.1f%%' % ('-' if ratio < 0 else '', abs(ratio) * 100)


def comments(c, compat):
    """calibrate.c's ha_calib_comment lines."""
    if c.r <= 1:
        return ['heapalloc: every allocation recorded; values are exact, in requested bytes, '
                'and add up to the totals the dump prints']
    if not c.scaled:
        return ['heapalloc: sampled every %d bytes on average; values are pprof\'s unsampled '
                'estimates (not calibrated)' % c.r]
    out = ['heapalloc: sampled every %d bytes on average; estimates calibrated to the '
           'allocator\'s exact totals (HEAP_PROFILE_CALIBRATE=0: pprof\'s estimates as they '
           'are)' % c.r]
    b = _pct(c.est[1] / c.books[0] - 1 if c.books[0] else 0)
    out.append('alloc_space: %d bytes allocated since the start (exact); the estimates summed '
               'to %d (%s, standard error %s), scaled by %.4f'
               % (c.books[0], int(c.est[1] + 0.5), b, _pct(c.rse[0]), c.factor[0]))
    b = _pct(c.est[3] / c.books[1] - 1 if c.books[1] else 0)
    if c.inuse == UNSAMPLED:
        out.append('inuse_space: %d bytes in use (exact), none of them in a sampled block, so '
                   'no site shows them' % c.books[1])
    elif c.inuse == BOUNDED:
        out.append('inuse_space: %d bytes, the estimate kept between %d (in use now less in '
                   'use at the start) and %d: blocks older than the session were freed, so '
                   'the books cannot give its in use exactly'
                   % (c.total[3], c.books[1], c.bound))
    else:
        out.append('inuse_space: %d bytes in use (exact: in use now less in use at the '
                   'start); the estimates summed to %d (%s, standard error %s), scaled by %.4f'
                   % (c.books[1], int(c.est[3] + 0.5), b, _pct(c.rse[1]), c.factor[1]))
    out.append('bytes: %s; objects scaled with their bytes; label sampling_error: a site\'s '
               'own relative standard error, sqrt((1 - p) / samples), in 0.1%% units'
               % ('requested' if compat else 'size-class (requested above 32 KiB)'))
    return out


def unsample(c, b, r):
    if not c or not b or r <= 1:
        return c, b
    s = 1.0 / (1.0 - math.exp(-(b / c) / r))
    return int(c * s), int(b * s)


class Profile:
    """The values of one snapshot, line by line: [ao, as, io, is]."""

    def __init__(self, snap):
        r = snap.root
        self.snap = snap
        self.rate = r.rate if r.rate > 1 else 1
        self.lines = [l for l in snap.lines if l.alloc_count and l.pcs]
        self.totals = ha_proc.totals(snap)
        cv, self.cal = calibrate(self.lines, r.rate, self.totals, ha_proc.heap_now(snap),
                                 bool(r.flags & ha_proc.FLAG_CALIBRATE))
        if cv is None:
            cv = []
            for l in self.lines:
                ao, ab = unsample(l.alloc_count, l.alloc_bytes, r.rate)
                io, ib = unsample(l.alloc_count - l.free_count, l.alloc_bytes - l.free_bytes,
                                  r.rate)
                cv.append([ao, ab, io, ib])
        self.values = cv
        self.calibrated = self.cal.scaled
        # each bucket's live samples [(bytes, time)], oldest first (None:
        # the target keeps no times)
        self.ages = None
        if getattr(snap, 'ages', None) is not None:
            self.ages = {}
            for idx, req, t, _ in snap.ages:
                self.ages.setdefault(idx, []).append((req, t))
            for a in self.ages.values():
                a.sort(key=lambda x: x[1])

    def comments(self, pid):
        snap = self.snap
        out = comments(self.cal, bool(snap.root.flags & ha_proc.FLAG_COMPAT))
        when = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(snap.time))
        out.append('command: %s (pid %d, read from outside by heapalloc dump at %s; '
                   'heapalloc %s in %s)' % (ha_proc.cmdline(pid), pid, when,
                                            snap.root.version, snap.lib))
        if snap.torn:
            out.append('heapalloc dump: %d sites changing while read were left out'
                       % snap.torn)
        if getattr(snap, 'drops', 0):
            out.append('heapalloc dump: %d samples were dropped, the stack table being full'
                       % snap.drops)
        return out


# ---- writers -----------------------------------------------------------------

def maps_text(pid, snap_maps_text):
    """The memory map as writer.c copies it: the 4th permission 's' -> 'p'."""
    out = []
    for line in snap_maps_text.splitlines():
        f = line.split(' ', 2)
        if len(f) > 1 and len(f[1]) == 4 and f[1][3] == 's':
            f[1] = f[1][:3] + 'p'
        out.append(' '.join(f))
    return '\n'.join(out) + '\n'


def text_profile(prof, maps_txt):
    """The gperftools text format, as prof/writer.c writes it."""
    v = prof.values
    io = sum(x[2] for x in v)
    ib = sum(x[3] for x in v)
    ao = sum(x[0] for x in v)
    ab = sum(x[1] for x in v)

    def counts(a, b, c, d):
        return '%6d: %8d [%6d: %8d] @' % (a, b, c, d)
    if prof.calibrated or prof.rate <= 1:
        head = 'heap profile: %s heapprofile\n' % counts(io, ib, ao, ab)
        rows = [(x[2], x[3], x[0], x[1]) for x in v]
    else:
        t = [0, 0, 0, 0]
        rows = []
        for l in prof.lines:
            row = (l.alloc_count - l.free_count, l.alloc_bytes - l.free_bytes,
                   l.alloc_count, l.alloc_bytes)
            rows.append(row)
            t = [a + b for a, b in zip(t, row)]
        head = 'heap profile: %s heap_v2/%d\n' % (counts(*t), prof.rate)
    out = [head]
    shown = {}                  # a return address as written (stacks share most)
    for l, row in zip(prof.lines, rows):
        leaf = l.pcs[:1]
        frames = [' 0x%016x' % (pc - 1) for pc in leaf]
        for pc in l.pcs[1:]:
            t = shown.get(pc)
            if t is None:
                t = shown[pc] = ' 0x%016x' % pc
            frames.append(t)
        out.append(counts(*row) + ''.join(frames) + '\n')
    out.append('\nMAPPED_LIBRARIES:\n')
    out.append(maps_txt)
    return ''.join(out).encode()


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]   # most fields, counts and ids


def _varint(n):
    if 0 <= n < 0x80:
        return _ONE_BYTE[n]
    n &= (1 << 64) - 1
    b = bytearray()
    while n >= 0x80:
        b.append(n & 0x7f | 0x80)
        n >>= 7
    b.append(n)
    return bytes(b)


def _int(field, v):
    return _varint(field << 3) + _varint(v)


def _bytes(field, data):
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _packed(field, vals):
    return _bytes(field, b''.join(map(_varint, vals)))


FIXED = ['', 'alloc_objects', 'count', 'alloc_space', 'bytes', 'inuse_objects',
         'inuse_space', 'space', 'sampling_error', 'permille']


# ---- ages and lifetimes (prof/ages.c, prof/pprof.c's split_line) -------------
# A restatement until the outside dump runs prof/'s own encoder.

LIFE_LABEL = [10 ** (k + 3) - 1 for k in range(12)] + [10 ** 14]
LIFE_RANGE = ['<1us', '1us-10us', '10us-100us', '100us-1ms', '1ms-10ms', '10ms-100ms',
              '100ms-1s', '1s-10s', '10s-100s', '100s-1000s', '1000s-10000s',
              '10000s-100000s', '>=100000s']


def age_seconds(now, t):
    s = (now - t) // 1000000000 if now > t else 0
    return s if s < 4096 else s & ~((1 << (s.bit_length() - 12)) - 1)


def _part(total, cum, part, whole):
    return total * (cum + part) // whole - total * cum // whole if whole else 0


def split_line(v, ages, now, life):
    """[(values, ('age', seconds) | ('lifetime', bin) | None)] of a line's
    values v by its live samples' ages [(bytes, time)], oldest first, and
    its lifetime bins, adding up to v."""
    out, rest = [], list(v)
    wb = sum(b for b, t in ages)
    la = (min(v[0], v[2]), min(v[1], v[3]))      # in use may exceed allocated a little
    if ages and wb and (v[2] or v[3]):
        cb = cc = j = 0
        k = len(ages)
        while j < k:
            age, gb, gc = age_seconds(now, ages[j][1]), 0, 0
            while j < k and age_seconds(now, ages[j][1]) == age:
                gb += ages[j][0]
                gc += 1
                j += 1
            ao, ab = _part(la[0], cc, gc, k), _part(la[1], cb, gb, wb)
            io, ib = _part(v[2], cc, gc, k), _part(v[3], cb, gb, wb)
            cb += gb
            cc += gc
            if ao or ab or io or ib:
                out.append(([ao, ab, io, ib], ('age', age)))
                rest = [rest[0] - ao, rest[1] - ab, rest[2] - io, rest[3] - ib]
    lw = sum(life)
    fo, fb = v[0] - la[0], v[1] - la[1]
    if lw and (fo or fb) and rest[0] >= fo and rest[1] >= fb:
        cum = 0
        for b, w in enumerate(life):
            if not w:
                continue
            po, pb = _part(fo, cum, w, lw), _part(fb, cum, w, lw)
            cum += w
            if po or pb:
                out.append(([po, pb, 0, 0], ('lifetime', b)))
                rest[0] -= po
                rest[1] -= pb
    if any(rest):
        out.append((rest, None))
    return out


def encode_pprof(prof, pid, mem, maps, alloc_default=False):
    """profile.proto (not gzipped), addresses only, as prof/pprof.c; the
    string table comes last, when every string is known."""
    strings = list(FIXED)
    sid = {s: i for i, s in enumerate(strings)}

    def s(x):
        if x not in sid:
            sid[x] = len(strings)
            strings.append(x)
        return sid[x]
    notes = [s(c) for c in prof.comments(pid)]
    out = bytearray()
    for t, u in (('alloc_objects', 'count'), ('alloc_space', 'bytes'),
                 ('inuse_objects', 'count'), ('inuse_space', 'bytes')):
        out += _bytes(1, _int(1, s(t)) + _int(2, s(u)))
    xmaps = [m for m in maps if len(m.perms) > 2 and m.perms[2] == 'x']
    locs = {}
    r = prof.snap.root.rate
    ages, now = prof.ages, prof.snap.now
    for l, v in zip(prof.lines, prof.values):
        ids = []
        for pc in l.pcs:
            a = pc - 1
            if a not in locs:
                locs[a] = len(locs) + 1
            ids.append(locs[a])
        lab = _bytes(3, _int(1, s('bytes')) + _int(3, l.alloc_bytes // l.alloc_count))
        if r > 1:
            ic = l.alloc_count - l.free_count
            e = (rse(ic, l.alloc_bytes - l.free_bytes, r) if ic else
                 rse(l.alloc_count, l.alloc_bytes, r))
            lab += _bytes(3, _int(1, s('sampling_error')) + _int(3, int(e * 1000 + 0.5)) +
                          _int(4, s('permille')))
        parts = (split_line(v, ages.get(l.idx, ()), now, l.life) if ages is not None
                 else [(v, None)])
        for pv, how in parts:
            m = _packed(1, ids) + _packed(2, pv) + lab
            if how and how[0] == 'age':
                m += _bytes(3, _int(1, s('age')) + _int(3, how[1]) + _int(4, s('seconds')))
            elif how:
                m += _bytes(3, _int(1, s('lifetime')) + _int(3, LIFE_LABEL[how[1]]) +
                            _int(4, s('nanoseconds')))
                m += _bytes(3, _int(1, s('lived')) + _int(2, s(LIFE_RANGE[how[1]])))
            out += _bytes(2, m)
    starts = []
    for i, mp in enumerate(xmaps):
        body = _int(1, i + 1) + _int(2, mp.start) + _int(3, mp.end) + _int(4, mp.offset)
        if mp.path:
            body += _int(5, s(mp.path))
        if mp.path.startswith('/'):
            bid = ha_proc.build_id(mem, maps, mp)
            if bid:
                body += _int(6, s(bid))
        out += _bytes(3, body)
        starts.append((mp.start, mp.end, i + 1))
    for a, lid in sorted(locs.items(), key=lambda kv: kv[1]):
        mid = next((k for st, en, k in starts if st <= a < en), 0)
        body = _int(1, lid) + (_int(2, mid) if mid else b'') + _int(3, a)
        out += _bytes(4, body)
    s('space')
    out += _int(9, int(prof.snap.time * 1e9))
    out += _bytes(11, _int(1, s('space')) + _int(2, s('bytes')))
    out += _int(12, prof.rate)
    out += _int(14, s('alloc_space' if alloc_default else 'inuse_space'))
    for n in notes:
        out += _int(13, n)
    for x in strings:
        out += _bytes(6, x.encode('utf-8', 'replace'))
    return bytes(out)


def name_profile(tool_dir, pid, maps, data):
    """heapalloc-symbolize over the gzipped profile data, with the target's
    own files as the binaries.  (named bytes or None, [warnings])."""
    bins = []
    seen = set()
    for m in maps:
        if len(m.perms) > 2 and m.perms[2] == 'x' and m.path.startswith('/') and \
                m.path not in seen:
            seen.add(m.path)
            f = ha_proc.file_of(pid, m)
            if f and f.startswith('/proc/'):
                bins.append(f)
    d = tempfile.mkdtemp(prefix='heapalloc.')
    try:
        p = os.path.join(d, 'raw.pb.gz')
        with open(p, 'wb') as f:
            f.write(data)
        return ha_symbolize.symbolized(tool_dir, p, bins)
    finally:
        import shutil
        shutil.rmtree(d, ignore_errors=True)


# ---- the commands ------------------------------------------------------------

def read_profile(pid):
    """(Profile, maps text, maps, Mem) of the target now."""
    text, maps = ha_proc.read_maps(pid)
    mem = ha_proc.Mem(pid)
    try:
        snap = ha_proc.sampling_snapshot(pid, mem, maps, '; nothing to dump')
        return Profile(snap), text, maps, mem
    except BaseException:
        mem.close()
        raise


def profile_bytes(tool_dir, pid, fmt, names=True, alloc_default=False):
    """The profile of pid in fmt ('pprof': gzipped, named; 'text'), the
    Profile, and warning lines."""
    prof, text, maps, mem = read_profile(pid)
    try:
        if fmt == 'text':
            return text_profile(prof, maps_text(pid, text)), prof, []
        raw = gzip.compress(encode_pprof(prof, pid, mem, maps, alloc_default), 6)
    finally:
        mem.close()
    if not names:
        return raw, prof, []
    named, warns = name_profile(tool_dir, pid, maps, raw)
    return (named or raw), prof, warns


def write_atomic(path, data):
    """data to path through path.tmp and a rename: never a half-written
    file under the final name.  Something not a regular file (/dev/null, a
    FIFO) is written in place, never replaced."""
    import stat
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            with open(path, 'wb') as f:
                f.write(data)
            return
    except FileNotFoundError:
        pass
    tmp = path + '.tmp'
    try:
        os.unlink(tmp)
    except OSError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def dump(tool_dir, pid, out, fmt, err):
    try:
        data, prof, warns = profile_bytes(tool_dir, pid, fmt)
    except ha_proc.ProcError as e:
        err('dump: %s' % e)
        return 1
    for w in warns:
        err('dump: %s' % w)
    if out is None:
        out = 'heapalloc.%d.%s' % (pid, 'heap' if fmt == 'text' else 'pb.gz')
    if out == '-':
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        try:
            write_atomic(out, data)
        except OSError as e:
            err('dump: cannot write %s: %s' % (out, e.strerror))
            return 1
    a, f = prof.totals
    err('dump: process %d: %d bytes in use, %d allocated, %d sites%s -> %s'
        % (pid, a - f, a, len(prof.lines), '' if prof.calibrated or prof.rate <= 1 else
           ' (not calibrated)', 'stdout' if out == '-' else out))
    return 0


def human(n):
    for unit, size in (('GiB', 1 << 30), ('MiB', 1 << 20), ('KiB', 1 << 10)):
        if abs(n) >= size:
            return '%.1f %s' % (n / size, unit)
    return '%d B' % n


def _peak_rss(pid):
    f = ha_proc._status_field(pid, 'VmHWM')
    return int(f[0]) * 1024 if f else 0


class Top:
    """One refresh after another: the sites named once (frames carried
    from refresh to refresh; heapalloc-symbolize runs only for addresses
    not seen before)."""

    def __init__(self, tool_dir, pid, rows, err, older=3600):
        self.tool_dir, self.pid, self.rows, self.err = tool_dir, pid, rows, err
        self.older = older
        self.prev_old = None
        self.frames = {}
        self.modules = []
        self.prev = None
        self.high = 0
        self.warned = False

    def refresh(self):
        import ha_dump
        import ha_growth
        import ha_pb
        prof, text, maps, mem = read_profile(self.pid)
        try:
            raw = gzip.compress(encode_pprof(prof, self.pid, mem, maps), 1)
        finally:
            mem.close()
        d = tempfile.mkdtemp(prefix='heapalloc.')
        try:
            p = os.path.join(d, 'top.pb.gz')
            with open(p, 'wb') as f:
                f.write(raw)
            D = ha_dump.load(p)
            for a, fr in self.frames.items():
                D.frames.setdefault(a, fr)
            D.modules += [m for m in self.modules if m not in D.modules]
            keys = sorted(D.stacks, key=lambda k: -D.stacks[k][1])[:4 * self.rows]
            if D.unnamed(keys):
                named, warns = name_profile(self.tool_dir, self.pid, maps, raw)
                if warns and not self.warned:
                    for w in warns:
                        self.err('top: %s' % w)
                    self.warned = True
                if named:
                    D.name_from(ha_pb.read_profile(named))
                    self.frames.update(D.frames)
                    self.modules = D.modules
                # what is still unnamed stays an address: not asked again
                for k in keys:
                    for a in k:
                        self.frames.setdefault(a, D.frames.get(a) or [])
                        if a not in D.frames and self.frames[a]:
                            D.frames[a] = self.frames[a]
            ages = line_ages(prof)
            cache = {}
            sites = {}
            for k in D.stacks:
                if not D.frames.get(k[0]) and k[0] in self.frames:
                    D.frames.pop(k[0], None)
                t = sites.setdefault(ha_growth.site(D, k, False, cache), [0.0, 0.0, []])
                t[0] += D.stacks[k][0]
                t[1] += D.stacks[k][1]
                t[2] += ages.get(k, [])
        finally:
            import shutil
            shutil.rmtree(d, ignore_errors=True)
        a, f = prof.totals
        inuse = a - f
        self.high = max(self.high, inuse)
        prev = self.prev
        self.prev = {s: v[1] for s, v in sites.items()}
        prev_old = self.prev_old
        old = {s: sum(b for a, b in v[2] if a >= self.older) for s, v in sites.items()}
        self.prev_old = old
        order = sorted(sites.items(), key=lambda kv: (-kv[1][1], kv[0]))[:self.rows]
        r = prof.snap.root
        aged = prof.ages is not None
        out = ['heapalloc top: pid %d  %s' % (self.pid, ha_proc.cmdline(self.pid)[:60]),
               'in use %s   allocated %s   (exact, since heapalloc started)   RSS %s   '
               'peak: RSS %s, in use %s seen' % (human(inuse), human(a), human(ha_proc.rss(self.pid)),
                                                 human(_peak_rss(self.pid)), human(self.high)),
               'sampled every %s; %d sites; %s' % (human(r.rate), len(sites), time.strftime(
                   '%H:%M:%S')),
               '%11s %11s %9s %9s %11s  %s' % ('in use', 'change', 'objects', 'median age',
                                               'older ' + human_age(self.older),
                                               'site (first frame of the program, file:line, '
                                               'then its callers)')]
        growing = []
        for s, (objs, size, sa) in order:
            ch = size - prev.get(s, 0) if prev is not None else 0
            if aged and prev_old is not None and old[s] > prev_old.get(s, 0):
                growing.append(s)
            out.append('%11s %11s %9d %9s %11s  %s' % (
                human(size), ('+' if ch > 0 else '') + human(ch) if prev is not None else '',
                round(objs), human_age(median_age(sa)) if aged and sa else '-',
                human(old[s]) if aged else '-', s))
        if not aged:
            out.append('(no ages: this heapalloc keeps no allocation times)')
        elif prev_old is not None:
            out.append('growing: %s' % ('; '.join(growing) if growing else
                                        'no site\'s bytes older than %s grew since the last view'
                                        % human_age(self.older)))
        return '\n'.join(out) + '\n'


def human_age(s):
    for unit, size in (('d', 86400), ('h', 3600), ('m', 60)):
        if s >= size:
            v = s / size
            return ('%d%s' if v == int(v) else '%.1f%s') % (v, unit)
    return '%ds' % s


def line_ages(prof):
    """Stack (addresses as pprof's locations) -> [(age in seconds, in-use
    bytes)] of its lines' age-labelled parts (split_line)."""
    out = {}
    if prof.ages is None:
        return out
    for l, v in zip(prof.lines, prof.values):
        parts = split_line(v, prof.ages.get(l.idx, ()), prof.snap.now, l.life)
        key = tuple(pc - 1 for pc in l.pcs)
        out.setdefault(key, []).extend((how[1], pv[3]) for pv, how in parts
                                       if how and how[0] == 'age')
    return out


def median_age(parts):
    """The age half of the bytes are older than (parts: [(age, bytes)])."""
    total = sum(b for a, b in parts)
    c = 0
    for a, b in sorted(parts, reverse=True):
        c += b
        if 2 * c >= total:
            return a
    return 0


def top(tool_dir, pid, count, interval, rows, err, older=3600):
    """count: refreshes in plain text (0: a live screen until ^C)."""
    t = Top(tool_dir, pid, rows, err, older)
    live = count == 0
    n = 0
    try:
        while True:
            try:
                screen = t.refresh()
            except ha_proc.ProcError as e:
                err('top: %s' % e)
                return 1
            if live:
                sys.stdout.write('\x1b[H\x1b[2J' + screen)
            else:
                sys.stdout.write(('\n' if n else '') + screen)
            sys.stdout.flush()
            n += 1
            if not live and n >= count:
                return 0
            time.sleep(interval)
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:
        return 0


def serve(tool_dir, pid, addr, err):
    """/debug/pprof/heap and /allocs of pid on addr (HOST:PORT), built per
    request by the code dump uses, until interrupted or the process exits."""
    import http.server
    host, _, port = addr.rpartition(':')
    host = host.strip('[]') or '127.0.0.1'
    if not port.isdigit() or int(port) > 65535:
        err('serve: %r is not HOST:PORT' % addr)
        return 2

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.0'

        def log_message(self, *a):
            pass

        def answer(self, code, ctype, body):
            self.send_response(code)
            self.send_header('Content-Type', ctype)
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            if self.command != 'HEAD':
                self.wfile.write(body)

        def do_GET(self):
            path, _, query = self.path.partition('?')
            if path in ('/debug/pprof', '/debug/pprof/'):
                return self.answer(200, 'text/html', (
                    '<html><body><a href="heap">heap</a> (in use)<br><a href="allocs">allocs</a> '
                    '(allocated) of process %d, read from outside</body></html>\n' % pid).encode())
            if path not in ('/debug/pprof/heap', '/debug/pprof/allocs'):
                return self.answer(404, 'text/plain', b'not found\n')
            text = 'debug=1' in query.split('&')
            try:
                data, _, _ = profile_bytes(tool_dir, pid, 'text' if text else 'pprof',
                                           alloc_default=path.endswith('allocs'))
            except ha_proc.ProcError as e:
                err('serve: %s' % e)
                self.answer(503, 'text/plain', (str(e) + '\n').encode())
                if not ha_proc.alive(pid):
                    self.server.gone = True
                return
            self.answer(200, 'text/plain; charset=utf-8' if text else 'application/octet-stream',
                        data)

        do_HEAD = do_GET

    try:
        fam = http.server.HTTPServer
        if ':' in host:
            import socket

            class V6(http.server.HTTPServer):
                address_family = socket.AF_INET6
            fam = V6
        srv = fam((host, int(port)), Handler)
    except OSError as e:
        err('serve: cannot listen on %s: %s' % (addr, e.strerror))
        return 1
    srv.gone = False
    h, p = srv.server_address[:2]
    err('serve: process %d on http://%s:%d/debug/pprof/' % (pid, '[%s]' % h if ':' in h else h, p))
    try:
        while not srv.gone:
            srv.handle_request()
            if not ha_proc.alive(pid):
                err('serve: process %d exited' % pid)
                return 1
    except KeyboardInterrupt:
        pass
    return 1 if srv.gone else 0
