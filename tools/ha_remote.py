# ha_remote.py — the profile of a process read from outside (ha_proc.py's
# snapshot), written by heapalloc-profile (tools/profile.c): the copied
# tables handed to prof/'s own writers, so that the calibration, the
# gperftools text and the gzipped profile.proto are an in-process dump's,
# with the target's executable mappings and their build IDs; then named by
# heapalloc-symbolize from the target's own files (/proc/PID/map_files: a
# deleted or replaced binary is still named).  Also the commands built on
# it: dump, top and serve.
import os
import subprocess
import sys
import tempfile
import time

import ha_proc
import ha_symbolize

LIFE_BINS = 13                  # prof/prof.h's HA_LIFE_BINS: a line's lifetimes at most


def _clean(text):
    """One line of the tables: control bytes as '?', as ha_cmdline writes them."""
    return ''.join(c if c >= ' ' and c != '\x7f' else '?' for c in text)


def tables(snap, lines=None, ages=True, calibrate=None, command='', notes=()):
    """The tables of snap as heapalloc-profile reads them (tools/profile.c
    says the records): its lines (or lines, (alloc count, alloc bytes,
    free count, free bytes, Line) each), its live samples' times when ages,
    the root's flags (calibration switched off when calibrate is False), the
    command's comment and notes after it, and for an emulated process the
    memory map its program sees (ha_proc.program_view)."""
    r = snap.root
    flags = r.flags if calibrate is not False else r.flags & ~ha_proc.FLAG_CALIBRATE
    out = ['rate %d' % r.rate, 'flags %d' % flags, 'base %d %d' % tuple(r.base),
           'base_req %d %d' % tuple(r.base_req), 'rec %d %d' % tuple(snap.rec)]
    ret, own, nodes = snap.books
    out.append('retired %d %d %d %d %d' % ret)
    out.append('own %d %d %d %d' % own)
    out += ['node %d %d %d %d %d %d' % nd for nd in nodes]
    if lines is None:
        lines = [(l.alloc_count, l.alloc_bytes, l.free_count, l.free_bytes, l)
                 for l in snap.lines]
    for ac, ab, fc, fb, l in lines:
        life = l.life[:LIFE_BINS] if ages else ()
        out.append('line %d %d %d %d %d %d%s %d%s' % (
            l.idx, ac, ab, fc, fb, len(life), ''.join(' %d' % x for x in life), len(l.pcs),
            ''.join(' %d' % pc for pc in l.pcs)))
    if ages and snap.ages is not None:
        out += ['age %d %d %d' % a[:3] for a in snap.ages]
    out.append('command %s' % _clean(command))
    out += ['note %s' % _clean(n) for n in notes]
    if getattr(snap, 'view', False):    # an emulated process: the program's view of its maps
        out += ['map %s' % m.line for m in snap.maps]
    return ('\n'.join(out) + '\n').encode()


class Rendered:
    """A profile heapalloc-profile wrote: its bytes (text, or gzipped
    profile.proto without names), the totals it adds up to (allocated,
    freed), its sites and whether it is calibrated (or exact)."""


def render(libexec, pid, snap, fmt, **how):
    """snap's profile in fmt ('text', 'pprof', 'alloc': alloc_space by
    default), written by heapalloc-profile over tables(snap, **how)."""
    tool = os.path.join(libexec, 'heapalloc-profile')
    rd, wr = os.pipe()
    try:
        try:
            p = subprocess.run([tool, str(pid), fmt, '--summary', str(wr)],
                               input=tables(snap, **how), capture_output=True, pass_fds=(wr,),
                               timeout=600)
        except OSError as e:
            raise ha_proc.ProcError('cannot run %s: %s' % (tool, e.strerror))
        except subprocess.TimeoutExpired:
            raise ha_proc.ProcError('%s took more than 10 minutes' % tool)
        os.close(wr)
        wr = -1
        with os.fdopen(rd, 'rb') as f:
            rd = -1
            summary = f.read().split()
    finally:
        for fd in (rd, wr):
            if fd >= 0:
                os.close(fd)
    if p.returncode != 0 or len(summary) != 4:
        msg = p.stderr.decode('utf-8', 'replace').strip().splitlines()
        if not msg:
            raise ha_proc.ProcError('%s exited %d' % (tool, p.returncode))
        raise ha_proc.ProcError(msg[-1].replace('heapalloc-profile: ', '', 1))
    out = Rendered()
    out.data, out.snap = p.stdout, snap
    out.totals = (int(summary[0]), int(summary[1]))
    out.sites, out.calibrated = int(summary[2]), summary[3] == b'1'
    return out


def who(pid, snap, reader='heapalloc dump'):
    """The profile's command comment, its notes: whose tables, read when,
    and what the read saw."""
    when = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(snap.time))
    command = ('%s (pid %d, read from outside by %s at %s; heapalloc %s in %s)'
               % (ha_proc.cmdline(pid), pid, reader, when, snap.root.version, snap.lib))
    notes = []
    if snap.torn:
        notes.append('heapalloc dump: %d sites changing while read were left out' % snap.torn)
    if getattr(snap, 'drops', 0):
        notes.append('heapalloc dump: %d samples were dropped, the stack table being full'
                     % snap.drops)
    return dict(command=command, notes=notes)


def name_profile(tool_dir, pid, maps, data):
    """heapalloc-symbolize over the gzipped profile data, with the target's
    own files as the binaries (those of maps' executable mappings: a
    snapshot's maps, as its program sees them).  (named bytes or None,
    [warnings])."""
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

def read_snapshot(pid):
    """(snapshot, maps) of the target now."""
    _, maps = ha_proc.read_maps(pid)
    mem = ha_proc.Mem(pid)
    try:
        snap = ha_proc.sampling_snapshot(pid, mem, maps, '; nothing to dump')
        return snap, snap.maps
    finally:
        mem.close()


def profile_bytes(where, pid, fmt, names=True):
    """The profile of pid in fmt ('pprof' or 'alloc': gzipped, named;
    'text'): its Rendered, and warning lines."""
    snap, maps = read_snapshot(pid)
    prof = render(where.libexec, pid, snap, fmt, **who(pid, snap))
    if fmt == 'text' or not names:
        return prof, []
    named, warns = name_profile(where.tools, pid, maps, prof.data)
    prof.data = named or prof.data
    return prof, warns


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


def dump(where, pid, out, fmt, err):
    try:
        prof, warns = profile_bytes(where, pid, fmt)
    except ha_proc.ProcError as e:
        err('dump: %s' % e)
        return 1
    for w in warns:
        err('dump: %s' % w)
    if out is None:
        out = 'heapalloc.%d.%s' % (pid, 'heap' if fmt == 'text' else 'pb.gz')
    if out == '-':
        sys.stdout.buffer.write(prof.data)
        sys.stdout.flush()
    else:
        try:
            write_atomic(out, prof.data)
        except OSError as e:
            err('dump: cannot write %s: %s' % (out, e.strerror))
            return 1
    a, f = prof.totals
    err('dump: process %d: %d bytes in use, %d allocated, %d sites%s -> %s'
        % (pid, a - f, a, prof.sites, '' if prof.calibrated else ' (not calibrated)',
           'stdout' if out == '-' else out))
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

    def __init__(self, where, pid, rows, err, older=3600):
        self.where, self.pid, self.rows, self.err = where, pid, rows, err
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
        snap, maps = read_snapshot(self.pid)
        prof = render(self.where.libexec, self.pid, snap, 'pprof', **who(self.pid, snap))
        raw = prof.data
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
                named, warns = name_profile(self.where.tools, self.pid, maps, raw)
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
            ages = line_ages(ha_pb.read_profile(raw))
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
        r = snap.root
        aged = snap.ages is not None
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


def line_ages(P):
    """Stack (its locations' addresses) -> [(age in seconds, in-use bytes)]
    of the age-labelled samples of the decoded profile P (pprof.c's
    split_line cut the lines by their samples' ages)."""
    out = {}
    ii = [t for t, u in P.sample_types].index('inuse_space')
    for (locs, vals), labs in zip(P.samples, P.labels):
        if 'age' in labs:
            key = tuple(P.locations[l].address for l in locs)
            out.setdefault(key, []).append((labs['age'], vals[ii]))
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


def top(where, pid, count, interval, rows, err, older=3600):
    """count: refreshes in plain text (0: a live screen until ^C)."""
    t = Top(where, pid, rows, err, older)
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


def serve(where, pid, addr, err):
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
                data = profile_bytes(where, pid, 'text' if text else
                                     'alloc' if path.endswith('allocs') else 'pprof')[0].data
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
