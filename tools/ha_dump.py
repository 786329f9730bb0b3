# ha_dump.py — one heap dump of either format (gperftools text PREFIX.NNNN.heap
# or gzipped pprof PREFIX.NNNN.pb.gz, raw or already named by
# heapalloc-symbolize) as in-use objects and bytes per stack, and the frames
# known for each address.  Stacks are keyed by pprof's addresses: every
# return address stepped back into its call (the text format writes the leaf
# already stepped back, the pprof format all of them), so the two formats of
# one process match.
import ha_pb
from ha_textdump import UnsampleError, parse_text, unsample_pairs


class LoadError(Exception):
    pass


class Frame:
    """One function of a location, inlined ones first: name, source file, line."""

    def __init__(self, name, source='', line=0):
        self.name, self.source, self.line = name, source, line


class Dump:
    def __init__(self, path):
        self.path = path
        self.sampled = False        # values are estimates unsampled from a rate
        self.stacks = {}            # (address, ...) leaf first -> [objects, bytes] in use
        self.shown = {}             # the same key -> the addresses as written in the file
        self.frames = {}            # address -> [Frame] innermost first, where named
        self.modules = []           # [(start, limit, path)] of the mappings

    def module_of(self, addr):
        for start, limit, path in self.modules:
            if start <= addr < limit:
                return path
        return ''

    def unnamed(self, keys):
        """Whether any address of these stacks has no name yet."""
        return any(a not in self.frames for k in keys for a in k)

    def add(self, key, shown, objects, size):
        t = self.stacks.setdefault(key, [0.0, 0.0])
        t[0] += objects
        t[1] += size
        self.shown.setdefault(key, shown)

    def name_from(self, prof):
        """Take frames and mappings from a decoded (named) pprof Profile."""
        maps = {}
        for m in prof.mappings.values():
            maps[m.id] = m.filename
            if m.limit > m.start and (m.start, m.limit, m.filename) not in self.modules:
                self.modules.append((m.start, m.limit, m.filename))
        for loc in prof.locations.values():
            frames = []
            for fid, line in loc.lines:
                fn = prof.functions.get(fid)
                if fn is None:
                    continue
                frames.append(Frame(fn.name or fn.system_name, fn.filename, line))
            a = loc.address or -loc.id
            if frames and a not in self.frames:
                self.frames[a] = frames


def load(path):
    """Read the dump at path; LoadError with a one-line reason when it cannot."""
    try:
        with open(path, 'rb') as f:
            data = f.read()
    except OSError as e:
        raise LoadError('cannot read %s: %s' % (path, e.strerror))
    D = Dump(path)
    if data[:2] == b'\x1f\x8b':
        try:
            prof = ha_pb.read_profile(data)
        except ha_pb.PbError as e:
            where = '' if e.off is None else ' (byte %d of the profile)' % e.off
            raise LoadError('%s: %s%s' % (path, e.args[0], where))
        _from_pprof(D, prof)
        return D
    problems = []
    P = parse_text(path, data, problems)
    if P.header is None or any('bad bucket' in m for _, m in problems):
        ln, msg = problems[0]
        raise LoadError('%s:%d: %s' % (path, ln, msg))
    rate = P.header[4]
    D.sampled = rate > 1
    pairs = [(io, ib) for io, ib, ao, ab, addrs, _ in P.buckets]
    if D.sampled:
        try:
            pairs = unsample_pairs(pairs, rate)
        except UnsampleError as e:
            raise LoadError('%s: %s' % (path, e))
    for (o, b), (io, ib, ao, ab, addrs, _) in zip(pairs, P.buckets):
        key = addrs[:1] + tuple(a - 1 for a in addrs[1:])
        D.add(key, addrs, o, b)
    D.modules = [(s, e, p) for s, e, perms, off, p in P.maps if p]
    return D


def _from_pprof(D, prof):
    types = [t for t, unit in prof.sample_types]
    for want in (('inuse_objects', 'inuse_space'), ('objects', 'space')):
        if all(w in types for w in want):
            io, ib = types.index(want[0]), types.index(want[1])
            break
    else:
        raise LoadError('%s: no inuse_objects and inuse_space sample types (it has %s)'
                        % (D.path, ', '.join(types) or 'none'))
    D.sampled = prof.period > 1
    for locs, vals in prof.samples:
        if max(io, ib) >= len(vals):
            continue
        key = []
        for lid in locs:
            loc = prof.locations.get(lid)
            if loc is None:
                raise LoadError('%s: a sample refers to undefined location id %d' % (D.path, lid))
            key.append(loc.address or -lid)      # a location with no address: its id
        key = tuple(key)
        D.add(key, key, float(vals[io]), float(vals[ib]))
    D.name_from(prof)
