# ha_pb.py — reads gzipped profile.proto (pprof's format) with the Python
# standard library alone: the wire format (varints, tags, lengths, each
# checked against its message's end) and the decoding of a Profile into
# plain objects.  Validation rules beyond the wire format live in ha_check.
import gzip
import struct
import zlib


class PbError(Exception):
    """A malformed message; off is the byte offset in the decompressed profile."""

    def __init__(self, off, msg):
        Exception.__init__(self, msg)
        self.off = off


def gunzip(data):
    """The decompressed profile; PbError(None, ...) for a bad gzip stream."""
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as e:
        raise PbError(None, 'not a valid gzip stream: %s' % e)


def varint(buf, i, end):
    """Decode one varint at buf[i:end]; returns (value, next index)."""
    v = 0
    shift = 0
    start = i
    while True:
        if i >= end:
            raise PbError(start, 'varint runs past the end of its message')
        c = buf[i]
        i += 1
        v |= (c & 0x7f) << shift
        if not c & 0x80:
            return v, i
        shift += 7
        if shift >= 70:
            raise PbError(start, 'varint longer than 10 bytes')


def fields(buf, i, end):
    """Yield (field, wire, value or (start, end), offset) of one message."""
    while i < end:
        off = i
        key = buf[i]
        if key < 0x80:                  # one-byte varints inline: most keys and ids
            i += 1
        else:
            key, i = varint(buf, i, end)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise PbError(off, 'field number 0')
        if wire == 0:
            if i < end and buf[i] < 0x80:
                v = buf[i]
                i += 1
            else:
                v, i = varint(buf, i, end)
        elif wire == 1:
            if i + 8 > end:
                raise PbError(off, 'fixed64 field %d runs past the end' % field)
            v = struct.unpack_from('<Q', buf, i)[0]
            i += 8
        elif wire == 5:
            if i + 4 > end:
                raise PbError(off, 'fixed32 field %d runs past the end' % field)
            v = struct.unpack_from('<I', buf, i)[0]
            i += 4
        elif wire == 2:
            n, i = varint(buf, i, end)
            if i + n > end:
                raise PbError(off, 'field %d: length %d runs past the end of its message' % (field, n))
            v = (i, i + n)
            i += n
        else:
            raise PbError(off, 'field %d has wire type %d (groups and 6, 7 are not used by profile.proto)'
                          % (field, wire))
        yield field, wire, v, off


def ints(buf, field, wire, v, off):
    """A repeated integer field, packed (wire 2) or not (wire 0)."""
    if wire == 0:
        return [v]
    if wire != 2:
        raise PbError(off, 'integer field %d has wire type %d' % (field, wire))
    out = []
    i, end = v
    while i < end:
        x, i = varint(buf, i, end)
        out.append(x)
    return out


def signed(v):
    """An int64 sent as a varint (two's complement in 64 bits)."""
    return v - (1 << 64) if v >= 1 << 63 else v


class Mapping:
    def __init__(self):
        self.id = self.start = self.limit = self.offset = 0
        self.filename = self.build_id = ''
        self.has_functions = False


class Location:
    def __init__(self):
        self.id = self.mapping_id = self.address = 0
        self.lines = []             # [(function id, line)], innermost first


class Function:
    def __init__(self):
        self.id = 0
        self.name = self.system_name = self.filename = ''


class Profile:
    def __init__(self):
        self.sample_types = []      # [(type, unit)]
        self.samples = []           # [([location id, ...] leaf first, [value, ...])]
        self.labels = []            # per sample, {key: number or string}
        self.mappings = {}
        self.locations = {}
        self.functions = {}
        self.period = 0


def read_profile(data):
    """Decode a gzipped (or plain) profile.proto; PbError when it is not one."""
    buf = gunzip(data) if data[:2] == b'\x1f\x8b' else data
    strs = []
    raw = {1: [], 2: [], 3: [], 4: [], 5: []}
    P = Profile()
    for field, wire, v, off in fields(buf, 0, len(buf)):
        if field == 6 and wire == 2:
            strs.append(bytes(buf[v[0]:v[1]]).decode('utf-8', 'replace'))
        elif field in raw and wire == 2:
            raw[field].append(v)
        elif field == 12 and wire == 0:
            P.period = signed(v)

    def s(i):
        if i >= len(strs):
            raise PbError(None, 'string index %d past the string table (%d strings)' % (i, len(strs)))
        return strs[i]

    for a, b in raw[1]:
        t = {1: 0, 2: 0}
        for f, w, v, o in fields(buf, a, b):
            if f in t and w == 0:
                t[f] = v
        P.sample_types.append((s(t[1]), s(t[2])))
    for a, b in raw[2]:
        locs, vals, labs = [], [], {}
        for f, w, v, o in fields(buf, a, b):
            if f == 1:
                locs += ints(buf, f, w, v, o)
            elif f == 2:
                vals += [signed(x) for x in ints(buf, f, w, v, o)]
            elif f == 3 and w == 2:
                lab = {}
                for f2, w2, v2, o2 in fields(buf, v[0], v[1]):
                    if w2 == 0:
                        lab[f2] = v2
                if 1 in lab:
                    labs[s(lab[1])] = s(lab[2]) if lab.get(2) else signed(lab.get(3, 0))
        P.samples.append((locs, vals))
        P.labels.append(labs)
    for a, b in raw[3]:
        m = Mapping()
        for f, w, v, o in fields(buf, a, b):
            if w != 0:
                continue
            if f == 1:
                m.id = v
            elif f == 2:
                m.start = v
            elif f == 3:
                m.limit = v
            elif f == 4:
                m.offset = v
            elif f == 5:
                m.filename = s(v)
            elif f == 6:
                m.build_id = s(v)
            elif f == 7:
                m.has_functions = bool(v)
        P.mappings[m.id] = m
    for a, b in raw[4]:
        l = Location()
        for f, w, v, o in fields(buf, a, b):
            if f == 1 and w == 0:
                l.id = v
            elif f == 2 and w == 0:
                l.mapping_id = v
            elif f == 3 and w == 0:
                l.address = v
            elif f == 4 and w == 2:
                fn, line = 0, 0
                for f2, w2, v2, o2 in fields(buf, v[0], v[1]):
                    if f2 == 1 and w2 == 0:
                        fn = v2
                    elif f2 == 2 and w2 == 0:
                        line = signed(v2)
                l.lines.append((fn, line))
        P.locations[l.id] = l
    for a, b in raw[5]:
        fn = Function()
        for f, w, v, o in fields(buf, a, b):
            if w != 0:
                continue
            if f == 1:
                fn.id = v
            elif f == 2:
                fn.name = s(v)
            elif f == 3:
                fn.system_name = s(v)
            elif f == 4:
                fn.filename = s(v)
        P.functions[fn.id] = fn
    return P
