# ha_leaks.py — `heapalloc leaks PID`: the sampled live blocks of a running
# process that nothing points to, per site, weighted into estimated bytes.
# The live samples' addresses come from the process's live-sample map
# (ha_proc.py); the scan of its memory is heapalloc-leakscan's (C:
# tools/leakscan.c says what it reads and what counts as a pointer); the
# profile of the leaked samples, and the estimate per site (pprof's
# unsampling, the site's error) read back from it, is heapalloc-profile's
# (ha_remote.render: prof/output/pprof.c's encoder, as the in-process leak check
# writes its own).
import subprocess
import sys

import ha_pb
import ha_proc
import ha_remote


def scan(libexec, pid, samples, skips, stop):
    """heapalloc-leakscan over samples [(address, bytes)], never reading
    skips [(lo, hi)]: (leaked indices, bytes read, seconds, mode, threads
    stopped)."""
    import os
    tool = os.path.join(libexec, 'heapalloc-leakscan')
    inp = (''.join('skip %x %x\n' % r for r in skips) +
           ''.join('%x %d\n' % (a, n) for a, n in samples)).encode()
    try:
        p = subprocess.run([tool, str(pid)] + (['--stop'] if stop else []), input=inp,
                           capture_output=True, timeout=600)
    except OSError as e:
        raise ha_proc.ProcError('cannot run %s: %s' % (tool, e.strerror))
    if p.returncode != 0:
        msg = p.stderr.decode('utf-8', 'replace').strip().splitlines()
        raise ha_proc.ProcError(msg[-1] if msg else '%s exited %d' % (tool, p.returncode))
    leaked, stats = [], None
    for line in p.stdout.decode().splitlines():
        f = line.split()
        if f[:1] == ['leak']:
            leaked.append(int(f[1]))
        elif f[:1] == ['scan']:
            stats = (int(f[1]), int(f[2]) / 1e9, f[3], int(f[4]))
    if stats is None:
        raise ha_proc.ProcError('%s gave no result' % tool)
    return (leaked,) + stats


def site_names(path, keys):
    """{stack key: 'site <- callers'} from the named profile at path, as top
    names its rows (ha_growth.site); {} when it cannot be read."""
    import ha_dump
    import ha_growth
    try:
        D = ha_dump.load(path)
    except Exception:           # noqa: BLE001 - names are a nicety: addresses then
        return {}
    cache = {}
    return {k: ha_growth.site(D, k, False, cache) for k in keys if k in D.stacks}


def leaks(where, pid, out, stop, fail_status, err):
    try:
        text, maps = ha_proc.read_maps(pid)
        mem = ha_proc.Mem(pid)
        try:
            snap = ha_proc.sampling_snapshot(pid, mem, maps, ': no sampled block to look for')
            if snap.ages is None:
                raise ha_proc.ProcError('process %d runs heapalloc %s, which does not publish '
                                        'its sampled blocks\' addresses' % (pid, snap.root.version))
            samples = snap.ages
            leaked, nbytes, secs, mode, nthreads = scan(
                where.libexec, pid, [(a, n) for _, n, _, a in samples],
                ha_proc.meta_ranges(mem, snap.root), stop)
            by = {}
            for i in leaked:
                idx, n, _, _ = samples[i]
                c = by.setdefault(idx, [0, 0])
                c[0] += 1
                c[1] += n
            lines = {l.idx: l for l in snap.lines if l.alloc_count and l.pcs}
            r = snap.root.rate
            # the leaked samples of a site as its line: raw counts, no
            # books (unsampled, not calibrated), no ages
            found = [(c, b, 0, 0, lines[idx]) for idx, (c, b) in sorted(by.items())
                     if idx in lines]
            notes = ['heapalloc leaks: sampled live blocks nothing points to, per site: values '
                     'are pprof\'s unsampled estimates of the bytes they stand for (sampled every '
                     '%d bytes on average); label sampling_error: the site\'s own relative '
                     'standard error' % max(r, 1),
                     'scan: %d of %d sampled live blocks unreferenced; %d bytes of roots and heap '
                     'read from outside in %.2f s, the process %s' %
                     (len(leaked), len(samples), nbytes, secs,
                      'stopped (every thread, registers as roots)' if mode == 'stopped' else
                      'running (registers not seen)')]
            prof = ha_remote.render(where.libexec, pid, snap, 'pprof', lines=found, ages=False,
                                    calibrate=False, notes=notes,
                                    command='%s (pid %d)' % (ha_proc.cmdline(pid), pid))
        finally:
            mem.close()
    except ha_proc.ProcError as e:
        err('leaks: %s' % e)
        return 1
    # the profile's samples are found's lines, in order: their estimated
    # objects and bytes, and their error (permille)
    P = ha_pb.read_profile(prof.data)
    rows = [(v[1], v[0], c, b, labs.get('sampling_error', 0) / 1000, l)
            for (c, b, _, _, l), (_, v), labs in zip(found, P.samples, P.labels)]
    rows.sort(key=lambda x: -x[0])
    total = sum(x[0] for x in rows)
    data = prof.data
    names = {}
    if rows:
        named, warns = ha_remote.name_profile(where.tools, pid, snap.maps, data)
        for w in warns:
            err('leaks: %s' % w)
        data = named or data
        import os
        import tempfile
        d = tempfile.mkdtemp(prefix='heapalloc.')
        try:
            p = os.path.join(d, 'leaks.pb.gz')
            with open(p, 'wb') as f:
                f.write(data)
            names = site_names(p, [tuple(pc - 1 for pc in x[5].pcs) for x in rows])
        finally:
            import shutil
            shutil.rmtree(d, ignore_errors=True)
    if out is not None:
        try:
            ha_remote.write_atomic(out, data)
        except OSError as e:
            err('leaks: cannot write %s: %s' % (out, e.strerror))
            return 1
    w = sys.stdout.write
    w('heapalloc leaks: pid %d  %s\n' % (pid, ha_proc.cmdline(pid)[:60]))
    w('%s\n' % notes[1])
    w('leaked: ~%s in %d site%s (estimated from %d sampled block%s)\n' % (
        ha_remote.human(total), len(rows), '' if len(rows) == 1 else 's', len(leaked),
        '' if len(leaked) == 1 else 's'))
    if rows:
        w('%11s %7s %7s  %s\n' % ('est. bytes', 'blocks', '+-', 'site (first frame of the '
                                   'program, file:line, then its callers)'))
        shown = {}              # lines of one site (two calls on one line) together
        for eb, eo, c, b, e, l in rows:
            key = tuple(pc - 1 for pc in l.pcs)
            t = shown.setdefault(names.get(key) or '0x%x' % key[0], [0, 0, 0])
            t[0] += eb
            t[1] += c
            t[2] += (e * eb) ** 2     # the lines' errors are independent
        for name, (eb, c, v) in sorted(shown.items(), key=lambda kv: (-kv[1][0], kv[0])):
            w('%11s %7d %6.0f%%  %s\n' % (ha_remote.human(eb), c,
                                           100 * v ** 0.5 / eb if eb else 0, name))
    if out is not None:
        w('profile: %s (go tool pprof -top %s)\n' % (out, out))
    return 3 if fail_status and rows else 0
