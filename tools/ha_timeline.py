#!/usr/bin/env python3
"""heapalloc timeline PREFIX [-o chart.svg|chart.png] [--width PIXELS]

Owns the timeline of one profiled run: in-use and cumulative allocated bytes
(and RSS where the dump log has it) over the seconds since the log's first
row (a dump or a timeline row), each dump marked by the kind of its reason,
and the peak.  Reads PREFIX.log (dumplog.c's tab-separated lines); without a
log, the PREFIX.NNNN.heap headers, their mtimes and their .stats sidecars.
Prints the series as a text table on stdout; with -o also draws it
(matplotlib, Agg backend, imported only then, so the table needs nothing
beyond Python 3).
"""
import argparse
import os
import re
import sys
from decimal import Decimal, InvalidOperation

import ha_textdump

PROG = "heapalloc timeline"

# Dump reason -> (kind, legend label, marker), in legend order.  The reasons
# are the profiler's (prof/session/triggers.c, dump.c, memwatch.c, helper.c); anything else
# is a program's own HeapProfilerDump / heapalloc_profile_dump reason.
KINDS = [
    ("alloc", "allocation interval", "o"),
    ("free", "deallocation interval", "v"),
    ("inuse", "in-use interval", "^"),
    ("time", "time interval", "s"),
    ("signal", "signal", "P"),
    ("rss", "RSS growth", "D"),
    ("oom", "pre-OOM", "X"),
    ("exit", "exit", "p"),
    ("explicit", "explicit (API)", "*"),
    ("unknown", "reason unknown", "."),
]
KIND_LABEL = {k: label for k, label, _ in KINDS}
KIND_MARKER = {k: m for k, _, m in KINDS}


def reason_kind(reason):
    """The kind of a dump from its reason text."""
    if reason is None:
        return "unknown"
    if reason == "timeline":
        return "row"          # the helper's row between dumps: no marker
    if reason.startswith("Exiting"):
        return "exit"
    if " allocated cumulatively" in reason:
        return "alloc"
    if " freed cumulatively" in reason:
        return "free"
    if re.match(r"\d+ MB currently in use", reason):
        return "inuse"
    if re.match(r"\d+ sec since the last dump", reason):
        return "time"
    if reason == "signal" or reason.startswith("signal;"):
        return "signal"
    if "% of RLIMIT_AS" in reason or "% of the cgroup limit" in reason:
        return "oom"
    if re.match(r"RSS \d+ MB, grew", reason):
        return "rss"
    return "explicit"


class Row:
    __slots__ = ("seq", "time", "allocated", "freed", "in_use", "rss", "file", "reason")

    def __init__(self, seq, time, allocated, freed, in_use, rss, file, reason):
        self.seq, self.time = seq, time          # time: Decimal epoch seconds
        self.allocated, self.freed, self.in_use = allocated, freed, in_use
        self.rss, self.file, self.reason = rss, file, reason   # rss/allocated may be None


def read_log(path):
    """Rows of the dump log at path ([] when missing or empty); malformed
    lines (a run killed mid-write cannot leave one, but a hand edit can)
    are skipped with a warning."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        return []
    except OSError as e:
        print(f"{PROG}: cannot read {path}: {e.strerror}", file=sys.stderr)
        return []
    rows = []
    for n, line in enumerate(lines, 1):
        if not line or line.startswith("#"):
            continue
        f = line.split("\t")
        try:
            if len(f) < 8:
                raise ValueError
            rows.append(Row(int(f[0]), Decimal(f[1]), int(f[2]), int(f[3]), int(f[4]),
                            int(f[5]), f[6], "\t".join(f[7:])))
        except (ValueError, InvalidOperation):
            print(f"{PROG}: {path}:{n}: not a dump log line, skipped", file=sys.stderr)
    return rows


RECORD_RE = re.compile(r"\s*(\d+):\s*(\d+)\s*\[\s*(\d+):\s*(\d+)\s*\]")
RATE_RE = re.compile(r"@ heap_v2/(\d+)")


def heap_totals(path):
    """(in-use bytes, allocated bytes) a text profile stands for, summed
    over its records and unsampled as pprof does, or None.  The header line
    holds the sampled sums only."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    lines = text.split("\n")
    m = RECORD_RE.match(lines[0][len("heap profile:"):]) if lines[0].startswith("heap profile:") else None
    if not m:
        return None
    r = RATE_RE.search(lines[0])
    rate = int(r.group(1)) if r else 1
    inuse, alloc = [], []
    for line in lines[1:]:
        if line.startswith("MAPPED_LIBRARIES"):
            break
        rec = RECORD_RE.match(line)
        if rec:
            c1, s1, c2, s2 = (int(g) for g in rec.groups())
            inuse.append((c1, s1))
            alloc.append((c2, s2))
    if r:
        try:
            pairs = ha_textdump.unsample_pairs(inuse + alloc, rate)
        except ha_textdump.UnsampleError as e:
            print(f"{PROG}: {path}: {e}", file=sys.stderr)
            return None
        inuse, alloc = pairs[:len(inuse)], pairs[len(inuse):]
    return sum(b for _, b in inuse), sum(b for _, b in alloc)


def read_stats(path):
    """(reason, {name: value}) from a PREFIX.NNNN.stats sidecar, or (None, {})."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None, {}
    reason, vals = None, {}
    for line in text.split("\n"):
        if line.startswith("# heapalloc stats for "):
            m = re.search(r" \((.*)\)$", line)
            reason = m.group(1) if m else None
        elif line and not line.startswith("#"):
            f = line.split(None, 2)
            if len(f) >= 2 and f[1].isdigit():
                vals.setdefault(f[0], int(f[1]))
    return reason, vals


def read_dumps(prefix):
    """Rows from PREFIX.NNNN.heap files: header totals, mtime as the time,
    reason and RSS from the .stats sidecar when there is one."""
    d = os.path.dirname(prefix) or "."
    base = os.path.basename(prefix)
    pat = re.compile(re.escape(base) + r"\.(\d+)\.heap$")
    try:
        names = os.listdir(d)
    except OSError:
        return []
    rows = []
    for name in names:
        m = pat.match(name)
        if not m:
            continue
        path = os.path.join(d, name)
        hdr = heap_totals(path)
        if hdr is None:
            continue
        try:
            mtime = Decimal(os.stat(path).st_mtime_ns) / Decimal(10**9)
        except OSError:
            continue
        reason, vals = read_stats(path[:-len(".heap")] + ".stats")
        in_use = vals.get("heap.in_use", hdr[0])
        rows.append(Row(int(m.group(1)), mtime, hdr[1], None, in_use,
                        vals.get("process.rss"), name, reason))
    rows.sort(key=lambda r: r.seq)
    return rows


def peak_heap(prefix, rows):
    """(in-use bytes, how they are known) of PREFIX.peak.heap, or None: the
    books' exact heap.peak_in_use from the newest .stats sidecar, else
    pprof's estimate from the file's samples."""
    path = prefix + ".peak.heap"
    tot = heap_totals(path)
    if tot is None:
        return None
    d = os.path.dirname(prefix)
    for r in reversed(rows):
        if r.file and r.file.endswith(".heap"):
            _, vals = read_stats(os.path.join(d, r.file[:-len(".heap")] + ".stats"))
            if vals.get("heap.peak_in_use"):
                return vals["heap.peak_in_use"], "the books, from " + r.file[:-5] + ".stats"
            break
    return tot[0], "estimated from its samples"


def fmt_bytes(v):
    if v is None:
        return "-"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if v >= 1 << shift:
            return f"{v / (1 << shift):.1f} {unit}"
    return f"{v} B"


def scale_for(vmax):
    """(divisor, unit) for an axis whose values reach vmax bytes."""
    if vmax >= 2 << 30:
        return 1 << 30, "GiB"
    if vmax >= 2 << 20:
        return 1 << 20, "MiB"
    return 1 << 10, "KiB"


def peak_index(rows):
    """The first row with the highest in_use."""
    best = 0
    for i, r in enumerate(rows):
        if r.in_use > rows[best].in_use:
            best = i
    return best


def print_table(prefix, source, rows, peak, out):
    t0 = rows[0].time
    pi = peak_index(rows)
    nrows = sum(1 for r in rows if r.reason == "timeline")
    what = f"{len(rows) - nrows} dumps" + (f" and {nrows} timeline rows" if nrows else "")
    out.write(f"# {PROG} {prefix}: {what} from {source}, "
              f"peak in use {rows[pi].in_use} bytes ({fmt_bytes(rows[pi].in_use)}) "
              f"at {rows[pi].time - t0:.3f} s\n")
    if peak:
        out.write(f"# {prefix}.peak.heap: {peak[0]} bytes in use ({fmt_bytes(peak[0])}; "
                  f"{peak[1]})\n")
    cols = ["seq", "time_s", "in_use", "allocated", "rss", "kind", "peak", "reason"]
    body = []
    for i, r in enumerate(rows):
        body.append([str(r.seq), f"{r.time - t0:.3f}", str(r.in_use),
                     "-" if r.allocated is None else str(r.allocated),
                     "-" if not r.rss else str(r.rss), reason_kind(r.reason),
                     "peak" if i == pi else "-", r.reason if r.reason else "-"])
    widths = [max(len(c), *(len(b[k]) for b in body)) for k, c in enumerate(cols[:-1])]
    right = {1, 2, 3, 4}   # numbers align right

    def line(cells):
        parts = [c.rjust(widths[k]) if k in right else c.ljust(widths[k])
                 for k, c in enumerate(cells[:-1])]
        return "  ".join(parts + [cells[-1]]).rstrip() + "\n"

    out.write(line(cols))
    for b in body:
        out.write(line(b))


DEBIAN_DIST = "/usr/lib/python3/dist-packages"


def have_matplotlib():
    """Whether matplotlib imports; a python3 from pyenv or a venv first on
    PATH does not see Debian's python3-matplotlib, so its directory is tried
    too."""
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        pass
    if DEBIAN_DIST in sys.path or not os.path.isdir(DEBIAN_DIST):
        return False
    sys.path.append(DEBIAN_DIST)
    try:
        import matplotlib  # noqa: F401,F811
        return True
    except Exception:     # built for another Python: as good as missing
        sys.path.remove(DEBIAN_DIST)
        for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
            del sys.modules[name]
        return False


def draw(prefix, rows, peak, path, width):
    """The chart at path (.svg or .png), width pixels wide."""
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"   # text stays text: searchable titles
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    t0 = rows[0].time
    ts = [float(r.time - t0) for r in rows]
    inuse = [r.in_use for r in rows]
    alloc = [r.allocated for r in rows] if all(r.allocated is not None for r in rows) else None
    rss = [r.rss for r in rows] if any(r.rss for r in rows) else None
    vmax = max(inuse + (alloc or []) + [v or 0 for v in (rss or [])] + ([peak[0]] if peak else []))
    div, unit = scale_for(vmax)

    dpi = 100
    fig, ax = plt.subplots(figsize=(width / dpi, width / dpi * 0.5), dpi=dpi)
    if alloc:
        ax.plot(ts, [v / div for v in alloc], "-", color="tab:gray", lw=1.5,
                label="allocated (cumulative)")
    if rss:
        pts = [(t, v / div) for t, v in zip(ts, rss) if v]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "--", color="tab:green", lw=1.5,
                label="RSS")
    ax.plot(ts, [v / div for v in inuse], "-", color="tab:blue", lw=2, label="in use")

    # one marker per dump on the in-use line, shaped by the kind of its reason
    for kind, label, marker in KINDS:
        sel = [i for i, r in enumerate(rows) if reason_kind(r.reason) == kind]
        if sel:
            ax.plot([ts[i] for i in sel], [inuse[i] / div for i in sel], marker, ls="none",
                    ms=8 if marker != "." else 10, color="tab:blue", mec="black", mew=0.6,
                    label=f"dump: {label}")
    if len(rows) <= 12:   # few enough to name each dump by its number
        for t, v, r in zip(ts, inuse, rows):
            if r.reason == "timeline":
                continue
            ax.annotate(str(r.seq), (t, v / div), textcoords="offset points", xytext=(0, 8),
                        ha="center", fontsize=8, color="tab:blue")

    pi = peak_index(rows)
    ax.plot([ts[pi]], [inuse[pi] / div], "o", ms=16, mfc="none", mec="tab:red", mew=2,
            label=f"peak in use: {fmt_bytes(inuse[pi])} " +
            ("(between dumps)" if rows[pi].reason == "timeline" else f"(dump {rows[pi].seq})"))
    if peak and peak[0] > 0:
        ax.axhline(peak[0] / div, color="tab:red", ls=":", lw=1.2,
                   label=f"{os.path.basename(prefix)}.peak.heap in use: {fmt_bytes(peak[0])}")

    ax.set_title(f"heapalloc timeline: {prefix}")
    ax.set_xlabel("time since the first row (s)")
    ax.set_ylabel(f"bytes ({unit})")
    ax.set_ylim(bottom=0)
    span = ts[-1] - ts[0]
    ax.set_xlim(-0.02 * span - 1e-3, ts[-1] + 0.02 * span + 1e-3)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=10))
    ax.yaxis.set_major_locator(MaxNLocator(nbins=8))
    ax.grid(True, color="0.9")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    fig.tight_layout()
    tmp = path + ".tmp"   # never a half-drawn chart under the final name
    try:
        fig.savefig(tmp, format=os.path.splitext(path)[1][1:].lower(),
                    metadata={"Title": f"heapalloc timeline: {prefix}"})
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        plt.close(fig)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Chart a profiled run: in-use, allocated and RSS bytes over time, "
                    "each dump marked by its reason, and the peak.  Prints the series "
                    "as a table; -o also draws it.")
    p.add_argument("prefix", metavar="PREFIX", help="the run's HEAPPROFILE prefix")
    p.add_argument("-o", "--output", metavar="CHART", help="write the chart (.svg or .png)")
    p.add_argument("--width", type=int, default=1200, metavar="PIXELS",
                   help="chart width in pixels (default 1200; the height is half)")
    return p.parse_args(argv)


def main(argv):
    try:
        args = parse_args(argv)
    except SystemExit as e:   # --help, or a usage error argparse has printed
        return e.code if isinstance(e.code, int) else 2
    prefix = args.prefix
    if args.output and os.path.splitext(args.output)[1].lower() not in (".svg", ".png"):
        print(f"{PROG}: {args.output}: the chart is .svg or .png", file=sys.stderr)
        return 2
    if args.width < 200 or args.width > 10000:
        print(f"{PROG}: --width {args.width}: from 200 to 10000 pixels", file=sys.stderr)
        return 2

    log = prefix + ".log"
    rows, source = read_log(log), log
    if not rows:
        rows, source = read_dumps(prefix), f"{prefix}.NNNN.heap headers and mtimes"
    if not rows:
        print(f"{PROG}: no dumps: {log} is missing or empty and there is no "
              f"{prefix}.NNNN.heap", file=sys.stderr)
        return 1
    peak = peak_heap(prefix, rows)
    try:
        print_table(prefix, source, rows, peak, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:   # `| head`: the reader has what it wanted; the chart still counts
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if args.output:
        if not have_matplotlib():
            print(f"{PROG}: drawing needs matplotlib (Debian: python3-matplotlib)",
                  file=sys.stderr)
            return 1
        try:
            draw(prefix, rows, peak, args.output, args.width)
        except OSError as e:
            print(f"{PROG}: cannot write {args.output}: {e.strerror}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
