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
    __slots__ = ('start', 'end', 'perms', 'offset', 'inode', 'path', 'line')

    def __init__(self, line):
        f = line.split(None, 5)
        a, b = f[0].split('-')
        self.start, self.end = int(a, 16), int(b, 16)
        self.perms, self.offset, self.inode = f[1], int(f[2], 16), int(f[4])
        self.path = f[5].rstrip('\n') if len(f) > 5 else ''
        self.line = line


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


# ---- ELF: finding heapalloc_root -------------------------------------------
# Where the root is, cheapest first, so that a process without heapalloc is
# refused after a few small reads of each mapped object, never a whole file:
# 1. the dynamic symbols of each loaded object, looked up in its memory as
#    the dynamic loader does (PT_DYNAMIC, then DT_GNU_HASH or DT_HASH):
#    libheapalloc.so (stripped or not: dh_strip keeps .dynsym), or a program
#    that exports it (-rdynamic);
# 2. the program file's .symtab (a static link, not stripped): its section
#    headers, symbol table and their string table only;
# 3. a static link stripped: the program's initialised data (the root is in
#    .data), searched for the root's magic with a layout, size, version and
#    pid that fit.

PT_LOAD, PT_DYNAMIC = 1, 2
PF_X = 1
ET_EXEC = 2
DT_NULL, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ = 0, 4, 5, 6, 10
DT_GNU_HASH = 0x6ffffef5
DT_FLAGS_1, DF_1_PIE = 0x6ffffffb, 0x08000000
MAX_DATA_SCAN = 64 << 20        # bytes of the program's data searched, at most
_PAGE = os.sysconf('SC_PAGE_SIZE')


def _gnu_hash(name):
    h = 5381
    for c in name:
        h = (h * 33 + c) & 0xffffffff
    return h


def _sysv_hash(name):
    h = 0
    for c in name:
        h = ((h << 4) + c) & 0xffffffff
        g = h & 0xf0000000
        h ^= g >> 24
        h &= ~g & 0xffffffff
    return h


class _Image:
    """A loaded ELF object, read from the target's memory: its mappings,
    load bias and program headers."""

    def __init__(self, mem, path, maps):
        self.path, self.maps = path, maps
        self.head = min(maps, key=lambda m: m.offset)
        self.lo = min(m.start for m in maps)
        self.hi = max(m.end for m in maps)
        self.bias, self.dyn = None, None
        self.machine, self.type = None, None
        self.code = []          # its PF_X segments' link-time [lo, hi)
        eh = mem.read(self.head.start, 64) if self.head.offset == 0 else None
        if eh is None or eh[:4] != b'\x7fELF' or eh[4] != 2 or eh[5] != 1:
            return
        self.type, self.machine = struct.unpack_from('<HH', eh, 16)
        phoff = struct.unpack_from('<Q', eh, 32)[0]
        phentsize, phnum = struct.unpack_from('<HH', eh, 54)
        if phentsize < 56 or not 0 < phnum < 256:
            return
        ph = mem.read(self.head.start + phoff, phentsize * phnum)
        if ph is None:
            return
        low, dyn = None, None
        for i in range(phnum):
            p_type, p_flags, _, p_vaddr, _, p_filesz, p_memsz = struct.unpack_from(
                '<IIQQQQQ', ph, i * phentsize)
            if p_type == PT_LOAD and (low is None or p_vaddr < low):
                low = p_vaddr
            if p_type == PT_LOAD and p_flags & PF_X:
                self.code.append((p_vaddr, p_vaddr + p_filesz))
            elif p_type == PT_DYNAMIC:
                dyn = (p_vaddr, p_memsz)
        if low is None:
            return
        self.bias = self.head.start - (low & ~(_PAGE - 1))
        self.dyn = dyn

    def _ptr(self, v):
        """A d_ptr: the loader relocates them in place (glibc), or not (musl)."""
        return v if self.lo <= v < self.hi else v + self.bias

    def _dynamic(self, mem):
        """Its dynamic section as {tag: first value}, or None."""
        if self.dyn is None or self.dyn[1] > 1 << 16:
            return None
        raw = mem.read(self.bias + self.dyn[0], self.dyn[1])
        if raw is None:
            return None
        d = {}
        for k in range(0, len(raw) - 15, 16):
            tag, val = struct.unpack_from('<qQ', raw, k)
            if tag == DT_NULL:
                break
            d.setdefault(tag, val)
        return d

    def is_program(self, mem):
        """Whether it is a program, not a library: ET_EXEC, or a PIE (the
        linker's DF_1_PIE: a PT_INTERP would not tell, glibc's libc.so.6
        has one too)."""
        if self.type == ET_EXEC:
            return True
        d = self._dynamic(mem) if self.bias is not None else None
        return bool(d) and d.get(DT_FLAGS_1, 0) & DF_1_PIE != 0

    def holds_code(self, m):
        """Whether its mapping m holds part of an executable segment."""
        return self.bias is not None and any(
            m.start < self.bias + hi and self.bias + lo < m.end for lo, hi in self.code)

    def dynsym(self, mem, name):
        """The address of name among the image's dynamic symbols, or None."""
        d = self._dynamic(mem)
        if d is None:
            return None
        if DT_SYMTAB not in d or DT_STRTAB not in d:
            return None
        symtab, strtab = self._ptr(d[DT_SYMTAB]), self._ptr(d[DT_STRTAB])
        strsz = d.get(DT_STRSZ, 1 << 20)
        want = name.encode()

        def sym(i):
            e = mem.read(symtab + 24 * i, 24)
            if e is None:
                return None, None
            st_name, _, _, shndx, value, _ = struct.unpack_from('<IBBHQQ', e)
            if st_name >= strsz or not value or not shndx:
                return None, e
            n = mem.read(strtab + st_name, len(want) + 1)
            return (self.bias + value if n == want + b'\0' else None), e
        if DT_GNU_HASH in d:
            gh = self._ptr(d[DT_GNU_HASH])
            hdr = mem.read(gh, 16)
            if hdr is None:
                return None
            nbuckets, symoffset, bloom_size, bloom_shift = struct.unpack('<IIII', hdr)
            if not nbuckets or nbuckets > 1 << 24 or bloom_size > 1 << 20:
                return None
            h = _gnu_hash(want)
            word = mem.u64(gh + 16 + 8 * ((h // 64) % bloom_size)) if bloom_size else None
            if word is None:
                return None
            if not (word >> (h % 64)) & (word >> ((h >> bloom_shift) % 64)) & 1:
                return None     # the bloom filter: not here (most objects stop at this read)
            buckets = gh + 16 + 8 * bloom_size
            b = mem.read(buckets + 4 * (h % nbuckets), 4)
            i = struct.unpack('<I', b)[0] if b else 0
            if i < symoffset:
                return None
            chain = buckets + 4 * nbuckets
            for _ in range(1 << 16):
                c = mem.read(chain + 4 * (i - symoffset), 4)
                if c is None:
                    return None
                c = struct.unpack('<I', c)[0]
                if (c | 1) == (h | 1):
                    a, _ = sym(i)
                    if a is not None:
                        return a
                if c & 1:
                    return None
                i += 1
            return None
        if DT_HASH in d:
            hh = self._ptr(d[DT_HASH])
            hdr = mem.read(hh, 8)
            if hdr is None:
                return None
            nbucket, nchain = struct.unpack('<II', hdr)
            if not nbucket or nbucket > 1 << 24:
                return None
            b = mem.read(hh + 8 + 4 * (_sysv_hash(want) % nbucket), 4)
            i = struct.unpack('<I', b)[0] if b else 0
            seen = 0
            while i and i < nchain and seen < 1 << 16:
                a, _ = sym(i)
                if a is not None:
                    return a
                c = mem.read(hh + 8 + 4 * nbucket + 4 * i, 4)
                i = struct.unpack('<I', c)[0] if c else 0
                seen += 1
        return None


def _symtab(path, name):
    """(st_value, lowest PT_LOAD vaddr) of name in the file's .symtab, read
    through its section headers (never the whole file), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        eh = os.pread(fd, 64, 0)
        if len(eh) < 64 or eh[:4] != b'\x7fELF' or eh[4] != 2 or eh[5] != 1:
            return None
        phoff, shoff = struct.unpack_from('<QQ', eh, 32)
        phentsize, phnum, shentsize, shnum = struct.unpack_from('<HHHH', eh, 54)
        if shentsize < 64 or not 0 < shnum < 1 << 16 or phnum >= 256:
            return None
        ph = os.pread(fd, phentsize * phnum, phoff)
        loads = [struct.unpack_from('<IIQQ', ph, i * phentsize)[3]
                 for i in range(len(ph) // phentsize)
                 if struct.unpack_from('<I', ph, i * phentsize)[0] == PT_LOAD]
        sh = os.pread(fd, shentsize * shnum, shoff)
        secs = [struct.unpack_from('<IIQQQQIIQQ', sh, i * shentsize)
                for i in range(len(sh) // shentsize)]
        want = name.encode() + b'\0'
        for s in secs:
            if s[1] != 2 or s[6] >= len(secs):          # SHT_SYMTAB
                continue
            strs = secs[s[6]]
            if s[5] > 1 << 30 or strs[5] > 1 << 30:
                return None
            syms = os.pread(fd, s[5], s[4])
            names = os.pread(fd, strs[5], strs[4])
            ent = s[9] or 24
            at = names.find(b'\0' + want)
            if at < 0:
                return None
            at += 1
            for k in range(0, len(syms) - ent + 1, ent):
                st_name, _, _, _, st_value, _ = struct.unpack_from('<IBBHQQ', syms, k)
                if st_name == at and st_value:
                    return st_value, (min(loads) if loads else 0)
        return None
    except OSError:
        return None
    finally:
        os.close(fd)


def _root_in_data(mem, pid, exe):
    """A stripped static program: the root in its initialised data (its
    writable mappings of the file), told by its magic, a layout, size and
    version that fit and its pid; or None."""
    left = MAX_DATA_SCAN
    # the pid it filled in is its own, in its PID namespace (0: not yet)
    pids = {0, pid} | {int(p) for p in (_status_field(pid, 'NSpid') or []) if p.isdigit()}
    for m in exe.maps:
        if 'w' not in m.perms or 'r' not in m.perms:
            continue
        n = min(m.end - m.start, left)
        left -= n
        buf = mem.read(m.start, n) if n > 0 else None
        if buf is None:
            continue
        at = buf.find(MAGIC)
        while at >= 0:
            if at % 8 == 0 and at + ROOT_MIN <= len(buf):
                layout, size = struct.unpack_from('<II', buf, at + OFFSET['layout'])
                pid_at = struct.unpack_from('<Q', buf, at + OFFSET['pid'])[0]
                ver = buf[at + OFFSET['version']:at + OFFSET['seq']]
                if (0 < layout < 1 << 16 and 64 <= size <= 1 << 16 and b'\0' in ver
                        and pid_at in pids):
                    return m.start + at
            at = buf.find(MAGIC, at + 1)
    return None


def find_root(pid, maps, mem=None):
    """(address of heapalloc_root in the target, the file that holds it), or
    raise the ProcError that says why there is none."""
    own = mem is None
    if own:
        mem = Mem(pid)
    try:
        return _find_root(pid, maps, mem)
    finally:
        if own:
            mem.close()


def _exe_path(pid, maps):
    try:                        # the program: not the first mapping when an
        return os.readlink(_proc(pid, 'exe'))       # allocator reserved low memory
    except OSError:
        return next((m.path for m in maps if m.path.startswith('/')), '')


def _by_path(maps):
    by = {}
    for m in maps:
        if m.path.startswith('/') and m.inode:
            by.setdefault(m.path, []).append(m)
    return by


def _programs(mem, images, exe_path):
    """The paths of the program: /proc/PID/exe; and when that is an
    emulator (qemu-user through binfmt_misc: its process's exe), the mapped
    programs of another machine than it: the one it runs."""
    exe = images.get(exe_path)
    if exe is None:
        return []
    return [exe_path] + [p for p, im in images.items()
                         if exe.machine is not None and im.machine not in (None, exe.machine)
                         and im.is_program(mem)]


def _find_root(pid, maps, mem):
    by = _by_path(maps)
    exe_path = _exe_path(pid, maps)
    images = {p: _Image(mem, p, by[p]) for p in by}
    progs = _programs(mem, images, exe_path)
    # the loader's order where it matters (the program first: a program
    # that refers to the root holds the copy everyone uses), then the
    # library named heapalloc, then the rest
    order = sorted(by, key=lambda p: (0 if p in progs else
                                      1 if 'heapalloc' in os.path.basename(p) else 2))
    for p in order:
        a = images[p].dynsym(mem, SYMBOL)
        if a is not None:
            return a, p
    for exe in (images[p] for p in progs):
        if exe.bias is None:
            continue
        f = file_of(pid, exe.head)
        got = _symtab(f, SYMBOL) if f else None
        if got is not None:
            return exe.bias + got[0], exe.path
        a = _root_in_data(mem, pid, exe)
        if a is not None:
            return a, exe.path
    if not alive(pid):
        raise exited(pid)
    raise ProcError('process %d does not run heapalloc (no %s in the dynamic symbols of its '
                    '%d mapped files, its program\'s symbol table or data)'
                    % (pid, SYMBOL, len(images)))


def program_view(pid, maps, mem, lib):
    """The memory map as the program sees it, when it runs under an
    emulator (qemu-user: /proc/PID/exe, the emulator, is of another machine
    than lib, the file holding heapalloc_root): the emulator's own files, its
    executable anonymous memory (translated code) and the kernel's special
    mappings ([heap], [stack], [vdso]: the emulator's) left out, and the
    program's executable segments marked 'x' (the emulator maps them
    readable only: it runs translations of them), as the emulator shows the
    program its own /proc/self/maps.  None for a process that runs natively.
    Only ELF headers in memory are read."""
    by = _by_path(maps)
    exe_path = _exe_path(pid, maps)
    if lib not in by or exe_path not in by or lib == exe_path:
        return None
    guest = _Image(mem, lib, by[lib]).machine
    host = _Image(mem, exe_path, by[exe_path]).machine
    if guest is None or host is None or guest == host:
        return None
    images = {p: _Image(mem, p, by[p]) for p in by}
    view = []
    for m in maps:
        im = images.get(m.path) if m.inode else None
        if im is not None and im.machine not in (None, guest):
            continue            # the emulator's, or a file of another machine
        if im is None and ('x' in m.perms or m.path.startswith('[')):
            continue
        if im is not None and m.perms[2] != 'x' and m.perms[0] == 'r' and im.holds_code(m):
            v = Mapping(m.line)
            k = m.line.index(' ') + 1
            v.perms = m.perms[:2] + 'x' + m.perms[3:]
            v.line = m.line[:k] + v.perms + m.line[k + 4:]
            m = v
        view.append(m)
    return view


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


_U16, _U32, _U64 = struct.Struct('<H'), struct.Struct('<I'), struct.Struct('<Q')
_QQ = struct.Struct('<QQ')
_PCS = {}


def _bucket(r, buf, off, want_idx):
    """A Line from the bucket at buf[off:], or None when it is torn or not
    bucket want_idx."""
    if off + r.b_size > len(buf):
        return None
    depth = _U16.unpack_from(buf, off + r.b_depth)[0]
    idx = _U32.unpack_from(buf, off + r.b_idx)[0]
    if idx != want_idx or depth > r.depth_max or off + r.b_pcs + 8 * depth > len(buf):
        return None
    l = Line()
    ac = _U64.unpack_from(buf, off + r.b_alloc_count)[0]
    ab = _U64.unpack_from(buf, off + r.b_alloc_bytes)[0]
    fc = _U64.unpack_from(buf, off + r.b_free_count)[0]
    fb = _U64.unpack_from(buf, off + r.b_free_bytes)[0]
    l.alloc_count, l.alloc_bytes = ac, ab
    l.free_count = fc if fc < ac else ac      # frees never exceed allocations
    l.free_bytes = fb if fb < ab else ab
    st = _PCS.get(depth)
    if st is None:
        st = _PCS[depth] = struct.Struct('<%dQ' % depth)
    l.pcs = st.unpack_from(buf, off + r.b_pcs)
    l.idx = idx
    l.life = (struct.unpack_from('<%dQ' % r.life_bins, buf, off + r.b_life)
              if r.b_life and r.life_bins and r.b_life + 8 * r.life_bins <= r.b_size else ())
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
    # the buckets are carved from chunks: copy them whole, a few reads;
    # a chunk's buckets lie between its mem and mem + used as copied
    chunks = {}
    c = mem.u64(r.t_chunks)
    while c and len(chunks) < MAX_CHUNKS and c not in chunks:
        buf = mem.read(c, r.chunk_bytes)
        if buf is None:
            return None
        used = _U64.unpack_from(buf, r.chunk_used)[0]
        chunks[c] = (buf, c + r.chunk_mem + min(used, r.chunk_bytes - r.chunk_mem))
        c = _U64.unpack_from(buf, r.chunk_next)[0]
    bases = sorted(chunks)
    lines, torn = [], 0
    for i, p in enumerate(ptrs):
        k = bisect.bisect_right(bases, p) - 1
        l = None
        if k >= 0 and bases[k] + r.chunk_mem <= p < chunks[bases[k]][1]:
            l = _bucket(r, chunks[bases[k]][0], p - bases[k], i)
        if l is None:           # carved after our copy of its chunk, or torn: read it alone
            buf = mem.read(p, r.b_size) if p else None
            if buf is not None:
                depth = _U16.unpack_from(buf, r.b_depth)[0]
                if depth <= r.depth_max:
                    buf = mem.read(p, max(r.b_size, r.b_pcs + 8 * depth))
                    l = _bucket(r, buf, 0, i) if buf is not None else None
        if l is None:
            torn += 1
            continue
        lines.append(l)
    return lines, torn


def _read_ages(mem, r):
    """The live samples [(bucket index, bytes, allocated at, address)], the map's
    slots copied stripe by stripe (prof/capture/object_map.c; a slot moving while
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
        slots = _U64.unpack_from(raw, o + r.s_slots)[0]
        n = _U64.unpack_from(raw, o + r.s_n)[0]
        used = _U64.unpack_from(raw, o + r.s_used)[0]
        if not slots or not n or not used or n > MAX_SLOTS:
            continue            # no map, or a stripe with no live sample
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
    """The books' parts as the root lays them out: (retired, own, the live
    thread records' (allocated, net, big, cached, requested allocated,
    requested freed)), or None (retry).  heapalloc-profile adds them up
    (ha_books_of, alloc/hooks.h)."""
    for _ in range(RETRIES):
        ret = mem.read(r.retired, 40)
        own = mem.read(r.own, 32)
        if ret is None or own is None:
            return None
        ret = struct.unpack('<5Q', ret)
        own = struct.unpack('<4Q', own)
        nodes = []
        nd = mem.u64(r.registry)
        seen = set()
        while nd and len(seen) < MAX_NODES and nd not in seen:
            seen.add(nd)
            b = mem.read(nd, r.node_size)
            if b is None:
                return None
            if struct.unpack_from('<i', b, r.node_live)[0]:
                nodes.append(tuple(struct.unpack_from('<Q', b, off)[0] for off in (
                    r.node_alloc, r.node_net, r.node_big, r.node_cached, r.node_req_alloc,
                    r.node_req_free)))
            nd = struct.unpack_from('<Q', b, r.node_next)[0]
        again = mem.read(r.retired, 40)
        if again is None:
            return None
        if struct.unpack('<5Q', again) != ret:
            continue            # a thread retired while we walked: its figures moved
        return ret, own, nodes
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
    # between a stop and the start that follows it (the API's stop starts
    # the always-on sampling again): a moment, worth 200 ms of waiting
    deadline = time.monotonic() + 0.2
    while not snap.root.running and snap.root.gen and time.monotonic() < deadline:
        time.sleep(0.01)
        snap = snapshot(pid, mem, maps)
    if not snap.root.running and snap.root.gen:
        raise ProcError('process %d runs heapalloc %s with sampling stopped (its '
                        'session was stopped, and HEAP_PROFILE_SAMPLE_INTERVAL=0 keeps '
                        'the always-on sampling off)%s'
                        % (pid, snap.root.version, nothing))
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
        addr, lib = find_root(pid, maps, mem)
        deadline = time.monotonic() + 2.0
        while True:
            r = read_root(mem, addr, pid)
            if not r.seq & 1:
                # everything the table and the map hold is read before seq
                # is read again: a stop frees them, and a copy of freed
                # memory is thrown away with the seq that changed
                got = _read_lines(mem, r) if r.running else ([], 0)
                books = _read_books(mem, r)
                rec = mem.read(r.rec, 16) if r.running and r.rec else None
                ages = _read_ages(mem, r) if r.running and got is not None else None
                drops = mem.u64(r.t_drops) if r.running and r.t_drops else 0
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
        snap.ages = ages
        snap.drops = drops or 0
        snap.time = time.time()
        # the mappings as the program sees them: an emulated one's
        # (program_view), else the kernel's; `view` says which
        view = program_view(pid, maps, mem, lib)
        snap.maps = view if view is not None else maps
        snap.view = view is not None
        return snap
    finally:
        if own_mem:
            mem.close()


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
