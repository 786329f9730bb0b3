# ha_growth.py — `heapalloc growth OLD NEW`: the call sites whose in-use bytes
# grew most between two dumps of one process, either format (ha_dump),
# heap_v2/R dumps unsampled as pprof does.  Frames are named by
# heapalloc-symbolize (ha_symbolize) unless NEW already carries names, shown
# with file:line and pprof's short names (ha_names), each site led by its
# first frame outside the standard libraries.
import os
import sys

import ha_dump
import ha_names
import ha_pb
import ha_symbolize


def human(n):
    for unit, size in (('GiB', 1 << 30), ('MiB', 1 << 20), ('KiB', 1 << 10)):
        if abs(n) >= size:
            return '%.1f %s' % (n / size, unit)
    return '%d B' % n


def frame_text(f, full):
    name = f.name if full else ha_names.short_name(f.name)
    if f.source and f.line > 0:
        return '%s %s:%d' % (name, os.path.basename(f.source), f.line)
    return name


def frames_at(D, a, shown, full, cache):
    """[(text, standard?)] of the frames at address a, innermost first."""
    got = cache.get((a, shown))
    if got is None:
        named = D.frames.get(a)
        module = D.module_of(a) if a > 0 else ''
        if not named:
            got = [('0x%x' % shown, ha_names.is_standard('', '', module))]
        else:
            got = [(frame_text(f, full), ha_names.is_standard(ha_names.short_name(f.name), f.source, module))
                   for f in named]
        cache[(a, shown)] = got
    return got


def site(D, key, full, cache):
    """'lead <- callers...  [via library frames, leaf first]' for one stack."""
    frames = []                     # (text, standard?)
    for a, shown in zip(key, D.shown[key]):
        frames += frames_at(D, a, shown, full, cache)
    lead = next((k for k, (_, std) in enumerate(frames) if not std), 0)
    # callers up to the program's outermost frame: libc's start-up
    # (__libc_start_main, _start, start_thread) below main is left out
    last = max([k for k, (_, std) in enumerate(frames) if not std] or [len(frames) - 1])
    text = ' <- '.join(t for t, _ in frames[lead:last + 1])
    if lead:
        text += '  [via %s]' % ' <- '.join(t for t, _ in frames[:lead])
    return text


def name(D, keys, binaries, tool_dir, err):
    """Frames for D's addresses through heapalloc-symbolize, unless the
    stacks keys are all named already."""
    if not D.unnamed(keys) or not any(path.startswith('/') for _, _, path in D.modules):
        return                          # named already, or no file to name them from
    data, warnings = ha_symbolize.symbolized(tool_dir, D.path, binaries)
    for w in warnings:
        err('growth: %s' % w)
    if data is not None:
        try:
            D.name_from(ha_pb.read_profile(data))
        except ha_pb.PbError as e:
            err('growth: heapalloc-symbolize wrote an unreadable profile (%s); frames stay addresses'
                % e.args[0])


def growth(tool_dir, old, new, top, binaries, full, err):
    try:
        Dold = ha_dump.load(old)
        Dnew = ha_dump.load(new)
    except ha_dump.LoadError as e:
        err('growth: %s' % e)
        return 1
    name(Dnew, Dnew.stacks, binaries, tool_dir, err)
    # one process: NEW's names hold for OLD's addresses; OLD is named itself
    # only for stacks that were freed before NEW and hold other addresses
    for a, f in Dnew.frames.items():
        Dold.frames.setdefault(a, f)
    Dold.modules += [m for m in Dnew.modules if m not in Dold.modules]
    name(Dold, set(Dold.stacks) - set(Dnew.stacks), binaries, tool_dir, err)
    # stacks that show as the same site are one site (pprof merges by name
    # too): a call site that the compiler copied, one line in two places
    sites = {}
    caches = {id(Dold): {}, id(Dnew): {}}
    for D, k in ((Dold, 0), (Dnew, 1)):
        for key, (objs, size) in D.stacks.items():
            S = Dnew if key in Dnew.stacks else Dold
            text = site(S, key, full, caches[id(S)])
            t = sites.setdefault(text, [0.0, 0.0, 0.0, 0.0])
            t[2 * k] += objs
            t[2 * k + 1] += size
    rows = []
    for text, (oo, ob, no, nb) in sites.items():
        grew = round(nb) - round(ob)
        if grew > 0:
            rows.append((grew, round(ob), round(nb), round(no) - round(oo), text))
    rows.sort(key=lambda r: (-r[0], r[4]))
    total = sum(r[0] for r in rows)
    rows = rows[:top]
    out = sys.stdout
    out.write('in-use growth %s -> %s: %s in %d site%s%s\n' % (
        old, new, human(total), len(rows), '' if len(rows) == 1 else 's',
        ' (unsampled estimates)' if Dold.sampled or Dnew.sampled else ''))
    out.write('%12s %12s %12s %8s  %s\n' % ('grew', 'old', 'new', 'objects',
                                           'site: first frame of the program, then its callers'))
    for grew, o, n, objs, text in rows:
        out.write('%12d %12d %12d %+8d  %s\n' % (grew, o, n, objs, text))
    return 0
