# ha_proc.py — reading a running process's heap profile from outside: find
# heapalloc_root through the target's maps and ELF symbol tables, then copy
# the stack table and the books out of its memory through /proc/PID/mem.
# Nothing runs in the target and nothing stops it: every read is a copy the
# kernel makes, so a stopped or deadlocked process reads the same.  The
# layout and the read protocol are docs/reference.md's ("Reading a process
# from outside"); prof/root.h is the layout's definition.  A torn read (the
# table changing under us) is detected and re-read, a bad one is never
# followed: every pointer is checked against what the root says before use.
import bisect
import errno
import os
import struct
import time

import ha_layout                # generated from prof/root.h (tools/gen-layout)

LAYOUT = ha_layout.LAYOUT
MAGIC = ha_layout.MAGIC
SYMBOL = 'heapalloc_root'
FLAG_BACKGROUND = ha_layout.FLAGS['background']
FLAG_FILES = ha_layout.FLAGS['files']
FLAG_COMPAT = ha_layout.FLAGS['compat']
FLAG_CALIBRATE = ha_layout.FLAGS['calibrate']
OFFSET = {name: off for name, off, _ in ha_layout.ROOT}
# Layout 1 as first published ended where its meta part begins: a root of
# that size is whole; a part added since is read when the root's size covers it.
ROOT_MIN = dict((f, off) for f, off, _ in ha_layout.PARTS)['meta']
ROOT_SIZE = ha_layout.SIZE['ha_root']


def _root_struct(upto):
    """The struct.Struct of the root's fields below upto, and their names
    (pads skipped, gaps as padding bytes)."""
    fmt, names, at = '<', [], 0
    for name, off, f in sorted(ha_layout.ROOT, key=lambda r: r[1]):
        n = struct.calcsize('<' + f)
        if off + n > upto:
            break
        fmt += '%dx' % (off - at) if off > at else ''
        at = off + n
        if name.endswith('pad_'):
            fmt += '%dx' % n
            continue
        fmt += f
        names.append((name, int(f[:-1]) if f[-1] != 's' and f[:-1] else 0))
    return struct.Struct(fmt), names


_ROOT = {}                      # size -> (Struct, names)
# a field's attribute on Root: the field's own name, but for these
_ATTR = {'table.index': 't_index', 'table.count': 't_count', 'table.chunks': 't_chunks',
         'table.drops': 't_drops', 'table.max': 't_max', 'objmap.stripes': 'o_stripes',
         'meta.ranges': 'meta_ranges', 'meta.count': 'meta_count', 'meta.max': 'meta_max'}
MAX_CHUNKS = 1 << 16            # the reader's own bound on a list walk
MAX_SLOTS = 1 << 26             # and on one stripe of the live-sample map
MAX_NODES = 1 << 20
RETRIES = 50
READER_VERSION = '?'            # this heapalloc's, set by the command


class ProcError(Exception):
    """One line for stderr; the command exits with status 1."""


def _proc(pid, *parts):
    return os.path.join('/proc', str(pid), *parts)


def alive(pid):
    try:
        with open(_proc(pid, 'stat'), 'rb') as f:
            st = f.read()
        return b') Z' not in st and b') X' not in st
    except OSError:
        return False


def exited(pid):
    return ProcError('process %d exited while it was being read' % pid)


def _status_field(pid, name):
    try:
        with open(_proc(pid, 'status')) as f:
            for line in f:
                if line.startswith(name + ':'):
                    return line.split()[1:]
    except OSError:
        pass
    return None


def _has_cap_ptrace():
    caps = _status_field('self', 'CapEff')
    return bool(caps) and int(caps[0], 16) & (1 << 19) != 0


def _yama_scope():
    """kernel.yama.ptrace_scope, 0 without Yama."""
    try:
        with open('/proc/sys/kernel/yama/ptrace_scope') as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def _same_pid_ns(pid):
    try:
        return os.readlink(_proc(pid, 'ns', 'pid')) == os.readlink('/proc/self/ns/pid')
    except OSError:
        return True


def permission_error(pid, e):
    """Which rule refused: the user, Yama's ptrace_scope or the container."""
    uid = _status_field(pid, 'Uid')
    me = os.geteuid()
    cap = _has_cap_ptrace()
    if uid and not cap and any(int(u) != me for u in uid[:3]):
        return ProcError('permission denied reading process %d: it runs as uid %s, you are '
                         'uid %d (reading needs the same user, or CAP_SYS_PTRACE)'
                         % (pid, uid[1], me))
    scope = _yama_scope()
    if scope == 3 or (scope >= 1 and not cap):   # 3: not even CAP_SYS_PTRACE
        return ProcError('permission denied reading process %d: Yama ptrace_scope is %d, '
                         'which allows %s' % (pid, scope,
                                              'only a parent to read its descendants '
                                              '(sysctl kernel.yama.ptrace_scope=0, or '
                                              'CAP_SYS_PTRACE)' if scope == 1 else
                                              'no reader until reboot' if scope == 3 else
                                              'only CAP_SYS_PTRACE'))
    where = ('a container (another PID namespace)' if not _same_pid_ns(pid) else
             'the container or security module (seccomp, AppArmor, SELinux), or the '
             'process is not dumpable (setuid)')
    return ProcError('permission denied reading process %d: refused by %s (%s)'
                     % (pid, where, os.strerror(e.errno)))


class Mem:
    """The target's memory through /proc/PID/mem (the same ptrace access
    check as process_vm_readv: PTRACE_MODE_ATTACH)."""

    def __init__(self, pid):
        self.pid = pid
        try:
            self.fd = os.open(_proc(pid, 'mem'), os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ESRCH):
                raise ProcError('no process %d' % pid)
            if e.errno in (errno.EACCES, errno.EPERM):
                raise permission_error(pid, e)
            raise ProcError('cannot open %s: %s' % (_proc(pid, 'mem'), e.strerror))

    def close(self):
        os.close(self.fd)

    def read(self, addr, n):
        """n bytes at addr, or None when they are not all mapped."""
        if n <= 0:
            return b''
        if addr <= 0 or addr + n > 1 << 64:
            return None
        try:
            b = os.pread(self.fd, n, addr)
        except OSError as e:
            if e.errno == errno.ESRCH or not alive(self.pid):
                raise exited(self.pid)
            return None
        if len(b) != n:
            if not b and not alive(self.pid):
                raise exited(self.pid)
            return None
        return b

    def u64(self, addr):
        b = self.read(addr, 8)
        return None if b is None else struct.unpack('<Q', b)[0]


class Mapping:
    __slots__ = ('start', 'end', 'perms', 'offset', 'inode', 'path')

    def __init__(self, line):
        f = line.split(None, 5)
        a, b = f[0].split('-')
        self.start, self.end = int(a, 16), int(b, 16)
        self.perms, self.offset, self.inode = f[1], int(f[2], 16), int(f[4])
        self.path = f[5].rstrip('\n') if len(f) > 5 else ''


def read_maps(pid):
    try:
        with open(_proc(pid, 'maps')) as f:
            text = f.read()
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ESRCH):
            raise ProcError('no process %d' % pid)
        if e.errno in (errno.EACCES, errno.EPERM):
            raise permission_error(pid, e)
        raise ProcError('cannot read %s: %s' % (_proc(pid, 'maps'), e.strerror))
    if not text and not alive(pid):
        raise exited(pid)
    return text, [Mapping(l) for l in text.splitlines() if l.strip()]


def file_of(pid, m):
    """A path that opens the file mapped at m as the target sees it: its
    map_files entry (a deleted or replaced file too; needs CAP_SYS_ADMIN or
    CAP_CHECKPOINT_RESTORE), else the path through the target's root."""
    mf = _proc(pid, 'map_files', '%x-%x' % (m.start, m.end))
    try:
        os.close(os.open(mf, os.O_RDONLY | os.O_CLOEXEC))
        return mf
    except OSError:
        pass
    p = m.path[:-len(' (deleted)')] if m.path.endswith(' (deleted)') else m.path
    for cand in (_proc(pid, 'root') + p, p):
        if os.path.isfile(cand):
            return cand
    return None


# ---- ELF: the symbol table and the load bias ------------------------------

def _elf_symbol(data, name):
    """(st_value, st_size) of name in .dynsym or .symtab of a 64-bit
    little-endian ELF image in data, or None; also the lowest PT_LOAD vaddr."""
    if data[:4] != b'\x7fELF' or data[4] != 2 or data[5] != 1:
        return None, None
    phoff, shoff = struct.unpack_from('<QQ', data, 32)
    phentsize, phnum, shentsize, shnum = struct.unpack_from('<HHHH', data, 54)
    low = None
    for i in range(phnum):
        o = phoff + i * phentsize
        if o + 56 > len(data):
            break
        p_type, _, _, p_vaddr = struct.unpack_from('<IIQQ', data, o)
        if p_type == 1 and (low is None or p_vaddr < low):
            low = p_vaddr
    want = name.encode()
    secs = []
    for i in range(shnum):
        o = shoff + i * shentsize
        if o + 64 > len(data):
            return None, low
        secs.append(struct.unpack_from('<IIQQQQIIQQ', data, o))
    for kind in (11, 2):        # SHT_DYNSYM first, then SHT_SYMTAB
        for s in secs:
            if s[1] != kind or s[6] >= len(secs):
                continue
            strs = secs[s[6]]
            so, ss = strs[4], strs[5]
            off, size, ent = s[4], s[5], s[9] or 24
            for k in range(off, min(off + size, len(data)) - ent + 1, ent):
                st_name, _, _, _, st_value, st_size = struct.unpack_from('<IBBHQQ', data, k)
                if not st_value or st_name >= ss:
                    continue
                a = so + st_name
                if data[a:a + len(want) + 1] == want + b'\0':
                    return (st_value, st_size), low
    return None, low


def find_root(pid, maps):
    """The address of heapalloc_root in the target: the libheapalloc
    mapping's ELF first, then the program's, then every other file."""
    files = []
    seen = set()
    for m in maps:
        if not m.path.startswith('/') or m.path in seen or m.inode == 0:
            continue
        seen.add(m.path)
        files.append(m.path)
    exe = maps[0].path if maps else ''
    files.sort(key=lambda p: (0 if 'heapalloc' in os.path.basename(p) else
                              1 if p == exe else 2))
    for path in files:
        first = [m for m in maps if m.path == path]
        base = min((m for m in first), key=lambda m: m.offset)
        if base.offset != 0:
            continue
        f = file_of(pid, base)
        if not f:
            continue
        try:
            with open(f, 'rb') as fh:
                data = fh.read()
        except OSError:
            continue
        sym, low = _elf_symbol(data, SYMBOL)
        if sym is None:
            continue
        bias = base.start - (low & ~0xfff if low else 0)
        return bias + sym[0], path
    return None, None


# ---- the root, the table and the books -------------------------------------

class Root:
    """The root's fields as attributes (prof/root.h's names; _ATTR's where
    two parts share one), those its size covers."""

    def __init__(self, raw):
        size = min(len(raw), ROOT_SIZE)
        if size not in _ROOT:
            _ROOT[size] = _root_struct(size)
        st, names = _ROOT[size]
        vals = list(st.unpack_from(raw, 0))
        for name, count in names:
            if count:
                v, vals = tuple(vals[:count]), vals[count:]
            else:
                v = vals.pop(0)
            setattr(self, _ATTR.get(name, name.rpartition('.')[2]), v)
        self.version = self.version.split(b'\0', 1)[0].decode('ascii', 'replace')
        self.meta = ((self.meta_ranges, self.meta_count, self.meta_max)
                     if hasattr(self, 'meta_max') else None)


class Line:
    __slots__ = ('pcs', 'alloc_count', 'alloc_bytes', 'free_count', 'free_bytes', 'idx', 'life')


class Snapshot:
    """What one read of the target gave: the root, the lines, the books."""


def read_root(mem, addr, pid):
    raw = mem.read(addr, ROOT_MIN)
    if raw is None:
        raise ProcError('process %d: heapalloc_root at 0x%x is not readable' % (pid, addr))
    if raw[:len(MAGIC)] != MAGIC:
        raise ProcError('process %d: heapalloc_root at 0x%x has no heapalloc magic' % (pid, addr))
    size = struct.unpack_from('<I', raw, OFFSET['size'])[0]
    if size > ROOT_MIN:         # the parts since: what both the root and we know
        raw = mem.read(addr, min(size, ROOT_SIZE)) or raw
    r = Root(raw)
    if r.layout != LAYOUT or r.size < ROOT_MIN:
        raise ProcError('process %d runs heapalloc %s with profile layout version %d; this '
                        'reader (heapalloc %s) knows layout version %d only'
                        % (pid, r.version or '?', r.layout, READER_VERSION, LAYOUT))
    return r


_U16, _U32, _QQ = struct.Struct('<H'), struct.Struct('<I'), struct.Struct('<QQ')
_PCS = {}


def _bucket(r, buf, off, want_idx):
    """A Line from the bucket at buf[off:], or None when it is torn or not
    bucket want_idx."""
    if off + r.b_pcs > len(buf):
        return None
    depth = _U16.unpack_from(buf, off + r.b_depth)[0]
    idx = _U32.unpack_from(buf, off + r.b_idx)[0]
    if idx != want_idx or depth > r.depth_max or off + r.b_pcs + 8 * depth > len(buf):
        return None
    l = Line()
    ac, ab = _QQ.unpack_from(buf, off + r.b_alloc_count)
    fc, fb = _QQ.unpack_from(buf, off + r.b_free_count)
    l.alloc_count, l.alloc_bytes = ac, ab
    l.free_count = fc if fc < ac else ac      # frees never exceed allocations
    l.free_bytes = fb if fb < ab else ab
    st = _PCS.get(depth)
    if st is None:
        st = _PCS[depth] = struct.Struct('<%dQ' % depth)
    l.pcs = st.unpack_from(buf, off + r.b_pcs)
    l.idx = idx
    l.life = (struct.unpack_from('<%dQ' % r.life_bins, buf, off + r.b_life)
              if r.b_life and r.life_bins and r.b_life + 8 * r.life_bins <= r.b_pcs else ())
    return l


def _read_lines(mem, r):
    """The buckets, or None when the table moved under us (retry)."""
    index = mem.u64(r.t_index)
    n = mem.u64(r.t_count)
    if index is None or n is None:
        return None
    if n == 0 or index == 0:
        return [], 0
    if n > r.t_max:
        return None
    idx = mem.read(index, 8 * n)
    if idx is None:
        return None
    ptrs = struct.unpack('<%dQ' % n, idx)
    # the buckets are carved from chunks: copy them whole, a few reads
    chunks = {}
    c = mem.u64(r.t_chunks)
    while c and len(chunks) < MAX_CHUNKS and c not in chunks:
        buf = mem.read(c, r.chunk_bytes)
        if buf is None:
            return None
        chunks[c] = buf
        c = struct.unpack_from('<Q', buf, r.chunk_next)[0]
    bases = sorted(chunks)
    lines, torn = [], 0
    for i, p in enumerate(ptrs):
        k = bisect.bisect_right(bases, p) - 1
        l = None
        if k >= 0 and p < bases[k] + r.chunk_bytes:
            l = _bucket(r, chunks[bases[k]], p - bases[k], i)
        if l is None:           # a chunk newer than our walk, or torn: read it alone
            buf = mem.read(p, r.b_pcs) if p else None
            if buf is not None:
                depth = struct.unpack_from('<H', buf, r.b_depth)[0]
                if depth <= r.depth_max:
                    buf = mem.read(p, r.b_pcs + 8 * depth)
                    l = _bucket(r, buf, 0, i) if buf is not None else None
        if l is None:
            torn += 1
            continue
        lines.append(l)
    return lines, torn


def _read_ages(mem, r):
    """The live samples [(bucket index, bytes, allocated at, address)], the map's
    slots copied stripe by stripe (prof/object_map.c; a slot moving while
    read may be missed or seen twice: a sample's age, never a total), or
    None when the target has no times (an older heapalloc)."""
    if not r.slot_time or not r.o_stripes or r.slot_size < r.slot_time + 8:
        return None
    raw = mem.read(r.o_stripes, r.nstripes * r.stripe_size)
    if raw is None:
        return None
    out = []
    keep = (1 << 63) - 1
    mask = (1 << r.addr_bits) - 1
    for i in range(r.nstripes):
        o = i * r.stripe_size
        slots = struct.unpack_from('<Q', raw, o + r.s_slots)[0]
        n = struct.unpack_from('<Q', raw, o + r.s_n)[0]
        if not slots or not n or n > MAX_SLOTS:
            continue
        buf = mem.read(slots, n * r.slot_size)
        if buf is None:
            continue
        for j in range(0, n * r.slot_size, r.slot_size):
            key, req = _QQ.unpack_from(buf, j)
            if key:
                t = struct.unpack_from('<Q', buf, j + r.slot_time)[0] & keep
                out.append((key >> r.addr_bits, req, t, (key & mask) << 4))
    return out


def _read_books(mem, r):
    """(allocated, in use, requested allocated, requested freed) as
    ha_books_totals adds them up, or None (retry)."""
    for _ in range(RETRIES):
        ret = mem.read(r.retired, 40)
        own = mem.read(r.own, 32)
        if ret is None or own is None:
            return None
        ret = struct.unpack('<5Q', ret)
        own = struct.unpack('<4Q', own)
        s = [0] * 6
        nd = mem.u64(r.registry)
        seen = set()
        while nd and len(seen) < MAX_NODES and nd not in seen:
            seen.add(nd)
            b = mem.read(nd, r.node_size)
            if b is None:
                return None
            live = struct.unpack_from('<i', b, r.node_live)[0]
            if live:
                for j, off in enumerate((r.node_alloc, r.node_net, r.node_big, r.node_cached,
                                         r.node_req_alloc, r.node_req_free)):
                    s[j] += struct.unpack_from('<Q', b, off)[0]
            nd = struct.unpack_from('<Q', b, r.node_next)[0]
        again = mem.read(r.retired, 40)
        if again is None:
            return None
        if struct.unpack('<5Q', again) != ret:
            continue            # a thread retired while we walked: its figures moved
        m = (1 << 64) - 1
        alloc = (s[0] + ret[0] - own[0]) & m
        inuse = (s[1] - s[3] + s[2] + ret[1] + ret[2] - own[1]) & m
        if inuse >= 1 << 63:
            inuse = 0
        return alloc, inuse, (s[4] + ret[3] - own[2]) & m, (s[5] + ret[4] - own[3]) & m
    return None


def meta_ranges(mem, r):
    """The allocator's own records [(lo, hi)] that a leak scan skips (the
    root's meta part; [] for a root without one)."""
    if not r.meta:
        return []
    ranges, count, cap = r.meta
    n = mem.read(count, 8)
    n = min(struct.unpack('<Q', n)[0], cap) if n else 0
    raw = mem.read(ranges, 16 * n) if n else b''
    if not raw or len(raw) < 16 * n:
        return []
    v = struct.unpack('<%dQ' % (2 * n), raw)
    return list(zip(v[0::2], v[1::2]))


def sampling_snapshot(pid, mem, maps, nothing):
    """snapshot(), refused (ProcError) when the target samples nothing;
    `nothing` ends the message: what the caller then has no use for."""
    snap = snapshot(pid, mem, maps)
    if not snap.root.running:
        raise ProcError('process %d runs heapalloc %s with sampling off '
                        '(HEAP_PROFILE_SAMPLE_INTERVAL=0)%s' % (pid, snap.root.version, nothing))
    return snap


def snapshot(pid, mem=None, maps=None):
    """Read the target once (retrying torn reads).  Raises ProcError."""
    own_mem = mem is None
    if maps is None:
        _, maps = read_maps(pid)
    if mem is None:
        mem = Mem(pid)
    try:
        addr, lib = find_root(pid, maps)
        if addr is None:
            if not alive(pid):
                raise exited(pid)
            raise ProcError('process %d does not run heapalloc (no %s in its libraries or '
                            'program)' % (pid, SYMBOL))
        deadline = time.monotonic() + 2.0
        while True:
            r = read_root(mem, addr, pid)
            if not r.seq & 1:
                got = _read_lines(mem, r) if r.running else ([], 0)
                books = _read_books(mem, r)
                rec = mem.read(r.rec, 16) if r.running and r.rec else None
                seq = mem.u64(addr + OFFSET['seq'])
                if got is not None and books is not None and seq == r.seq:
                    break
            if time.monotonic() > deadline:
                raise ProcError('process %d: its heap profile kept changing under the reader '
                                '(a profiling start or stop in progress); try again' % pid)
            time.sleep(0.001)
        snap = Snapshot()
        snap.root, snap.lib, snap.root_addr = r, lib, addr
        snap.lines, snap.torn = got
        snap.books = books
        snap.rec = struct.unpack('<2Q', rec) if rec else (0, 0)
        snap.ages = _read_ages(mem, r) if r.running else None
        # the clock the samples' times are on (prof/ages.c)
        snap.now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        snap.time = time.time()
        snap.maps = maps
        return snap
    finally:
        if own_mem:
            mem.close()


def totals(snap):
    """The session's totals (allocated, freed), as ha_prof_totals."""
    r = snap.root
    alloc, inuse, ra, rf = snap.books
    if r.rate <= 1 and not r.flags & FLAG_COMPAT:
        a, f = snap.rec
        return a, min(f, a)
    if r.flags & FLAG_COMPAT:
        return max(ra - r.base_req[0], 0), max(rf - r.base_req[1], 0)
    a = max(alloc - r.base[0], 0)
    i = min(max(inuse - r.base[1], 0), a)
    return a, a - i


def heap_now(snap):
    """The whole heap in use now (the calibration's bound)."""
    alloc, inuse, ra, rf = snap.books
    if snap.root.flags & FLAG_COMPAT:
        return max(ra - rf, 0)
    return inuse


def build_id(mem, maps, m):
    """The GNU build ID of the file mapped at m, from its loaded image's
    PT_NOTE (hex), or ''."""
    heads = [x for x in maps if x.path == m.path and x.offset == 0]
    if not heads:
        return ''
    h = heads[0]
    eh = mem.read(h.start, 64)
    if eh is None or eh[:4] != b'\x7fELF' or eh[4] != 2:
        return ''
    phoff = struct.unpack_from('<Q', eh, 32)[0]
    phentsize, phnum = struct.unpack_from('<HH', eh, 54)
    ph = mem.read(h.start + phoff, phentsize * phnum) if phnum < 256 else None
    if ph is None:
        return ''
    loads = []
    notes = []
    for i in range(phnum):
        p_type, _, p_off, p_vaddr, _, p_filesz = struct.unpack_from('<IIQQQQ', ph, i * phentsize)
        if p_type == 1:
            loads.append(p_vaddr)
        elif p_type == 4:
            notes.append((p_vaddr, p_filesz))
    bias = h.start - (min(loads) & ~0xfff if loads else 0)
    for va, sz in notes:
        data = mem.read(bias + va, min(sz, 4096))
        o = 0
        while data and o + 12 <= len(data):
            namesz, descsz, typ = struct.unpack_from('<III', data, o)
            name = data[o + 12:o + 12 + namesz]
            d = o + 12 + ((namesz + 3) & ~3)
            if typ == 3 and name[:3] == b'GNU':
                return data[d:d + descsz].hex()
            o = d + ((descsz + 3) & ~3)
    return ''


def cmdline(pid):
    try:
        with open(_proc(pid, 'cmdline'), 'rb') as f:
            return ' '.join(a.decode('utf-8', 'replace') for a in f.read().split(b'\0') if a)
    except OSError:
        return '?'


def rss(pid):
    try:
        with open(_proc(pid, 'statm')) as f:
            return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
    except (OSError, ValueError, IndexError):
        return 0
