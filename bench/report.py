"""bench/report.py — the Markdown tables of bench/run from its raw data.

Everything here reads the records bench/run keeps in runs.json (the main
table's runs, the profiling-overhead pass under "overhead") and writes text:
latest.md, quick.md and overhead.md, with the Targets list read off them.
No runs, no files: bench/run calls render_md() and writes what it returns.
"""
import math
import statistics

# bench/run owns the workload table and the overhead pass's configuration
# (scales, families, targets); it hands them over with use() on import.
WORKLOADS = []
OVERHEAD = {}


def use(workloads, overhead):
    global WORKLOADS, OVERHEAD
    WORKLOADS, OVERHEAD = workloads, overhead


# Workloads whose table also splits CPU into user and system time and shows
# minor page faults (taken from wait4, like the rest): the ones where memory
# given back to the kernel and faulted in again is the question.
FAULT_DETAIL = ("handoff", "handoff-large", "large", "frag")

# Each profiled configuration of the pass: its short name (table columns and
# rows), the allocator it is compared with in words, and what it is.
OV_MODE = {
    "heapalloc-prof": ("default", "heapalloc",
                       "`HEAPPROFILE`, default mode: no per-block header, totals from the "
                       "allocator's books"),
    "heapalloc-prof-compat": ("compat", "heapalloc",
                              "`HEAP_PROFILE_EXACT_TOTALS=1`, compatibility mode: gperftools' "
                              "exact requested-size totals, a 16-byte header per block"),
    "heapalloc-prof-all": ("record-all", "heapalloc",
                           "`HEAP_PROFILE_SAMPLE_INTERVAL=1`: every allocation recorded"),
    "jemalloc-prof": ("jemalloc-prof", "jemalloc",
                      "`MALLOC_CONF=prof:true,lg_prof_sample:19` (512 KiB)"),
    "tcmalloc-sampled": ("tcmalloc-sampled", "libtcmalloc",
                         "`TCMALLOC_SAMPLE_PARAMETER=524288` against `=0`"),
    # raw data of earlier passes only
    "heapalloc-prof-est": ("estimate", "heapalloc",
                           "`HEAP_PROFILE_EXACT_TOTALS=0`, the former estimated-totals mode"),
}
PAIR_SIZES = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768]


def ov_families(ov):
    """[(off, [on, ...]), ...] of the overhead pass's data.  Raw data from
    before the peers has no "families": heapalloc against every mode it ran."""
    if not ov or ov.get("skip"):
        return []
    if ov.get("families"):
        return [(off, list(on)) for off, on in ov["families"]]
    cfg = ov.get("configs") or ["heapalloc", "heapalloc-prof"]
    return [(cfg[0], list(cfg[1:]))]


# --- Summaries -------------------------------------------------------------------
def fmt(x, digits=2):
    if x is None:
        return "–"
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return "–"
    return "%.*f" % (digits, x)


def fmt_big(x):
    if x is None:
        return "–"
    if x >= 1e6:
        return "%.2f M" % (x / 1e6)
    if x >= 1e3:
        return "%.1f k" % (x / 1e3)
    return "%.0f" % x


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return a / b if a is not None and b else None


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarize(runs):
    """(workload, alloc) -> summary of its ok runs."""
    groups = {}
    for r in runs:
        groups.setdefault((r["workload"], r["alloc"]), []).append(r)
    out = {}
    for key, rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok"]
        bad = [r["status"] for r in rs if r["status"] != "ok"]
        s = {"n": len(rs), "ok": len(ok), "bad": bad,
             "wall": median(r["wall"] for r in ok), "cpu": median(r["cpu"] for r in ok),
             "wall_q": quartiles(r["wall"] for r in ok),
             "rss": median(r["rss"] for r in ok),
             "user": median(r.get("user") for r in ok),
             "sys": median(r.get("sys") for r in ok),
             "minflt": median(r.get("minflt") for r in ok),
             "dump_files": median(r.get("dump_files") for r in ok),
             "dump_bytes": median(r.get("dump_bytes") for r in ok),
             "fig": {}, "pair": {}, "batch": {}}
        for r in ok:
            for k, v in r.get("figures", {}).items():
                if isinstance(v, float):
                    s["fig"].setdefault(k, []).append(v)
            for kind in ("pair", "batch"):
                for k, v in r.get(kind, {}).items():
                    s[kind].setdefault(k, []).append(v)
        for kind in ("fig", "pair", "batch"):
            s[kind] = {k: median(v) for k, v in s[kind].items()}
        out[key] = s
    return out


def status_note(s, reps=None):
    if s is None:
        return "not run"
    capped = " (slow: %d rep%s)" % (s["n"], "" if s["n"] == 1 else "s") \
        if reps and s["n"] < reps else ""
    if not s["bad"]:
        return "%d/%d ok%s" % (s["ok"], s["n"], capped)
    kinds = {}
    for b in s["bad"]:
        kinds[b] = kinds.get(b, 0) + 1
    return "%d/%d ok; " % (s["ok"], s["n"]) + "; ".join(
        "%s ×%d" % (k, n) for k, n in sorted(kinds.items()))


def headline(wname, s):
    if s is None or not s["ok"]:
        return "–"
    f = s["fig"]
    if wname == "pairs":
        small = [s["pair"].get(str(z)) for z in PAIR_SIZES if z <= 512]
        g = geomean(small)
        return "16–512 B: %s ns/pair" % fmt(g, 1) if g else "–"
    if wname == "frag":
        return "final RSS %s MiB (live %s MiB)" % (
            fmt(f.get("final_rss_kib") and f["final_rss_kib"] / 1024, 1),
            fmt(f.get("live_final_kib") and f["live_final_kib"] / 1024, 1))
    if wname == "mixed":
        if f.get("mixed_ns") is None:
            return "–"
        return "16–256 B random: %s ns/pair (16 B: %s, 128 B: %s, 16/32 B alternating: %s)" % (
            fmt(f["mixed_ns"], 1), fmt(f.get("fixed16_ns"), 1), fmt(f.get("fixed128_ns"), 1),
            fmt(f.get("alt_ns"), 1))
    key = dict((w[0], w[4]) for w in WORKLOADS).get(wname)
    if key and f.get(key) is not None:
        return "%s %s" % (fmt_big(f[key]), key.replace("_per_sec", "/s").replace("_", " "))
    return "–"


def quartiles(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None, None
    if len(xs) == 1:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def own_time_per_op(wname, rec):
    """The workload's own time per operation (arbitrary unit), if it has one:
    pairs: geomean of 16-512 B ns/pair; others: 1 / its ops-per-second figure."""
    if wname == "pairs":
        return geomean([rec.get("pair", {}).get(str(z)) for z in PAIR_SIZES if z <= 512])
    if wname == "mixed":
        return rec.get("figures", {}).get("mixed_ns")
    key = dict((w[0], w[4]) for w in WORKLOADS).get(wname)
    v = rec.get("figures", {}).get(key) if key and key.endswith("_per_sec") else None
    return 1.0 / v if v else None


def ov_configs(ov):
    """The allocators the overhead pass ran, heapalloc off first ([] if it
    did not run)."""
    return [n for off, ons in ov_families(ov) for n in [off] + ons]


def ov_off_of(ov, on):
    """The configuration a profiled one is compared with (its allocator, off)."""
    for off, ons in ov_families(ov):
        if on in ons:
            return off
    return dict((n, off) for off, ons in OVERHEAD["families"] for n in ons).get(on, "heapalloc")


def ov_unmeasured(ov):
    """Profiled configuration -> why the pass has no runs of it."""
    ran = ov_configs(ov)
    out = {}
    for _, ons in OVERHEAD["families"]:
        for name in ons:
            if name in ran:
                continue
            if not ov:
                out[name] = "the pass did not run"
            elif ov.get("skip"):
                out[name] = "the pass did not run: %s" % ov["skip"]
            elif name in ov.get("not_run", {}):
                out[name] = ov["not_run"][name]
            else:
                out[name] = "this run's pass predates it"
    return out


def summarize_overhead(ov, on=None):
    """workload -> medians and per-round ratios on/off of the overhead pass,
    for the profiled configuration on (default: heapalloc's default mode)
    against its own allocator with profiling off."""
    on = on or OVERHEAD["default"]
    off = ov_off_of(ov, on)
    out = {}
    if on not in ov_configs(ov):
        return out
    for wname in ov.get("scale", {}):
        rounds = {}
        for r in ov["runs"]:
            if r["workload"] == wname and r["alloc"] in (off, on):
                rounds.setdefault(r["pairno"], {})[r["alloc"]] = r
        # only the rounds the profiled configuration ran in (see "every")
        if any(on in p for p in rounds.values()):
            rounds = {i: p for i, p in rounds.items() if on in p}
        s = {"scale": ov["scale"][wname], "n": len(rounds), "ok": 0, "bad": [],
             "stopped": ov.get("stopped", {}).get(wname),
             "absent": not any(on in p for p in rounds.values())}
        ok, bad = [], s["bad"]
        for i in sorted(rounds):
            p = rounds[i]
            a, b = p.get(off), p.get(on)
            if a and b and a["status"] == "ok" and b["status"] == "ok":
                ok.append((a, b))
            elif not s["absent"]:
                bad.extend("%s: %s" % (r["alloc"], r["status"]) for r in (a, b)
                           if r and r["status"] != "ok")
                if not (a and b):
                    bad.append("incomplete pair")
        s["ok"] = len(ok)
        if ok:
            s["off_wall"] = median(a["wall"] for a, _ in ok)
            s["on_wall"] = median(b["wall"] for _, b in ok)
            s["off_cpu"] = median(a["cpu"] for a, _ in ok)
            s["on_cpu"] = median(b["cpu"] for _, b in ok)
            for k, f in (("wall", lambda r: r["wall"]), ("cpu", lambda r: r["cpu"]),
                         ("own", lambda r: own_time_per_op(wname, r))):
                rs = [ratio(f(b), f(a)) for a, b in ok]
                rs = [r for r in rs if r is not None]
                s[k + "_r"] = median(rs)
                s[k + "_q"] = quartiles(rs)
            s["rss_d"] = median((b["rss"] - a["rss"]) / 1024 for a, b in ok)
            s["dump_files"] = median(b.get("dump_files") for _, b in ok)
        out[wname] = s
    return out


def above_noise(s):
    """A profiler's cost on a workload is above noise when the lower quartile
    of its per-round wall ratios on_i/off_i is above 1: in at least three
    rounds out of four the profiled run was the slower one."""
    q = s.get("wall_q") if s and s.get("ok") else None
    return bool(q and q[0] is not None and q[0] > 1.0)


def pct(r, digits=1):
    return "–" if r is None else "%+.*f%%" % (digits, (r - 1) * 100)


def pct_range(q):
    if not q or q[0] is None:
        return "–"
    return "%+.1f … %+.1f%%" % ((q[0] - 1) * 100, (q[1] - 1) * 100)


def overhead_title(ov):
    sc = sorted(set(ov.get("scale", {}).values()))
    if "families" in ov:
        what = "each profiler on/off with the same allocator"
        runs = "rounds, order rotating"
    elif "configs" in ov:  # raw data from before the peers
        what, runs = "heapalloc with HEAPPROFILE vs without", "rounds, order rotating"
    else:
        what, runs = "heapalloc with HEAPPROFILE vs without", "alternating pairs"
    if not sc:
        return what
    scales = "%g%%" % sc[0] if len(sc) == 1 else "%g–%g%% (per workload)" % (sc[0], sc[-1])
    return "%s, scale %s, %d %s" % (what, scales, ov.get("pairs", 0), runs)


def ov_cell(s):
    """Median per-round wall ratio and its IQR, one table cell."""
    if s is None:
        return "–"
    if s["absent"]:
        return "not run"
    if not s["ok"]:
        return "**failed**"
    return "%s [%s]" % (pct(s["wall_r"]), pct_range(s["wall_q"]).replace(" … ", "…"))


def peer_check(dsum, psums, wname):
    """heapalloc's default-mode cost against a third of the cheaper peer's on
    one workload: (True/False/None for not judged, text)."""
    h = dsum.get(wname)
    peers = [(ps[wname]["wall_r"], n, ps[wname]) for n, ps in psums.items()
             if ps.get(wname) and ps[wname]["ok"]]
    if not h or not h["ok"]:
        return None, "heapalloc default not measured"
    if not peers:
        return None, "no peer measured"
    r, n, ps = min(peers, key=lambda x: x[0])
    if not above_noise(ps):
        return None, "not judged: cheaper peer (%s %s) within noise" % (OV_MODE[n][0], pct(r))
    limit = 1 + (r - 1) * OVERHEAD["peer_share"]
    ok = h["wall_r"] <= limit
    return ok, "%s vs ⅓ of %s %s = %s: %s" % (pct(h["wall_r"]), OV_MODE[n][0], pct(r),
                                             pct(limit), "yes" if ok else "**no**")


def render_overhead(ov):
    L = ["## Profiling overhead — %s" % overhead_title(ov), ""]
    if ov.get("skip"):
        L += ["Not run: %s." % ov["skip"], ""]
        return L
    fams = ov_families(ov)
    what = {a["name"]: a for a in ov.get("allocs", [])}
    L.append("Configurations, each profiled one against the same allocator with profiling "
             "off:")
    L.append("")
    for off, ons in fams:
        L.append("- **%s**%s against %s" % (
            off, " (%s)" % what[off]["what"] if off in what else " (profiling off)",
            "; ".join("**%s** (*%s*: %s)" % (n, OV_MODE.get(n, (n,))[0],
                                              OV_MODE.get(n, (n, "", n))[2]) for n in ons)))
    L.append("")
    if "configs" in ov:
        how = ("in %d rounds; a round runs each workload once in each configuration, back to "
               "back, the order rotating from round to round — drift of the machine hits all "
               "alike, and each workload's runs are spread over the whole pass.  Each profiled "
               "run is compared with the off run of its own allocator in the same round: a "
               "cell is the median of those per-round wall-time ratios on_i/off_i − 1" %
               ov["pairs"])
        sparse = ["*%s* only every %s round" % (OV_MODE[c][0], {2: "second", 3: "third",
                                                               4: "fourth"}.get(k, "%dth" % k))
                  for c, k in ov.get("every", {}).items() if c in ov_configs(ov) and k > 1]
        if sparse:
            how += (" (%s, from the first on: its cost is far above the noise, and it would "
                    "take most of the pass's time)" % ", ".join(sparse))
    else:
        how = ("off then on, in %d rounds of one pair per workload.  A cell is the median of "
               "the per-pair ratios on_i/off_i − 1" % ov["pairs"])
    L.append("Each workload runs at a larger scale than the main table's 100%% (so every run "
             "lasts a few tenths of a second), %s, and in brackets their interquartile range "
             "(IQR, the middle half of the rounds): the spread the noise leaves, so a target "
             "inside it cannot be told apart.  *Above noise*: a profiler's cost on a workload "
             "counts as above noise when its IQR lies wholly above 0%% (the lower quartile of "
             "its per-round ratios is above 1: the profiled run was the slower one in at "
             "least three rounds out of four).  The last column checks heapalloc's default "
             "mode against a third of the cheaper peer's cost (the lower of jemalloc-prof and "
             "tcmalloc-sampled) where that cost is above noise.  *geomean*: of the per-workload "
             "medians.  The pass took %s s." % (how, fmt(ov.get("elapsed_s"), 0)))
    L.append("")
    sums = {n: summarize_overhead(ov, n) for _, ons in fams for n in ons}
    wnames = list(ov.get("scale", {}))
    head = ["workload", "scale", "rounds ok"]
    for off, ons in fams:
        head.append("%s off s" % off)
        head += [OV_MODE.get(n, (n,))[0] for n in ons]
    psums = {n: sums[n] for n in OVERHEAD["peers"] if n in sums}
    dsum = sums.get(OVERHEAD["default"], {})
    if dsum and psums:
        head.append("default ≤ ⅓ cheaper peer?")
    L.append("| " + " | ".join(head) + " |")
    L.append("|---|---:|---:|" + "---:|" * (len(head) - 3))
    for wname in wnames:
        first = next((sums[n][wname] for _, ons in fams for n in ons if wname in sums[n]),
                     None)
        if first is None:
            L.append("| %s | %g%% | – |%s" % (wname, ov["scale"][wname],
                                              " not run |" * (len(head) - 3)))
            continue
        home = sums[fams[0][1][0]].get(wname) or first
        row = [wname, "%g%%" % ov["scale"][wname], "%d/%d" % (home["ok"], home["n"])]
        for off, ons in fams:
            offs = next((sums[n][wname] for n in ons if sums[n].get(wname)
                         and sums[n][wname]["ok"]), None)
            row.append(fmt(offs["off_wall"], 3) if offs else "–")
            row += [ov_cell(sums[n].get(wname)) for n in ons]
        if dsum and psums:
            row.append(peer_check(dsum, psums, wname)[1])
        L.append("| " + " | ".join(row) + " |")
    row = ["geomean", "", ""]
    for off, ons in fams:
        row.append("")
        for n in ons:
            rs = [x["wall_r"] for x in sums[n].values() if x["ok"]]
            row.append("**%s**" % pct(geomean(rs)) if rs else "–")
    if dsum and psums:
        row.append("")
    L.append("| " + " | ".join(row) + " |")
    L.append("")
    L.append("Details: medians of off and on, wall and CPU (user+sys) in seconds; *on/off* "
             "the median of the per-round ratios with its IQR; *own time/op* is the "
             "workload's own figure (pairs: 16–512 B ns/pair; others: 1/ops per second), "
             "which leaves out process start and exit; *dumps*: profile files the profiled "
             "run wrote (heapalloc: by default one per GiB allocated, and one at exit) — "
             "their cost is part of the overhead.")
    L.append("")
    L.append("| workload | mode | against | rounds ok | wall off s | wall on s | wall on/off | IQR "
             "| CPU off s | CPU on s | CPU on/off | IQR | own time/op on/off | IQR "
             "| peak RSS on−off MiB | dumps |")
    L.append("|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|---|---:|---|---:|---:|")
    notes = []
    for wname in wnames:
        for off, ons in fams:
            for n in ons:
                s = sums[n].get(wname)
                if s is None:
                    continue
                if s["bad"]:
                    notes.append("%s, %s: %s" % (wname, OV_MODE[n][0], "; ".join(s["bad"])))
                mode = OV_MODE.get(n, (n,))[0]
                if s["absent"]:
                    L.append("| %s | %s | %s | – | not run | | | | | | | | | | | |" % (
                        wname, mode, off))
                    continue
                if not s["ok"]:
                    L.append("| %s | %s | %s | 0/%d | **failed** | | | | | | | | | | | |" % (
                        wname, mode, off, s["n"]))
                    continue
                L.append("| %s | %s | %s | %d/%d | %s | %s | %s | %s | %s | %s | %s | %s | %s "
                         "| %s | %s | %s |"
                         % (wname, mode, off, s["ok"], s["n"], fmt(s["off_wall"], 3),
                            fmt(s["on_wall"], 3), pct(s["wall_r"]), pct_range(s["wall_q"]),
                            fmt(s["off_cpu"], 3), fmt(s["on_cpu"], 3), pct(s["cpu_r"]),
                            pct_range(s["cpu_q"]), pct(s["own_r"]), pct_range(s["own_q"]),
                            "%+.1f" % s["rss_d"], fmt(s["dump_files"], 0)))
    for wname, why in ov.get("stopped", {}).items():
        notes.append("%s: %s" % (wname, why))
    for n, why in ov_unmeasured(ov).items():
        notes.append("**%s** (%s): not measured — %s" % (n, OV_MODE[n][2], why))
    L.append("")
    if notes:
        L += ["Notes: " + "; ".join(notes) + ".", ""]
    return L


def ov_mode_label(n):
    if n == OVERHEAD["default"]:
        return "heapalloc's default profiling mode vs off"
    return "heapalloc with %s vs off" % OV_MODE[n][2]


def overhead_target_lines(ov):
    """The profiling-overhead verdicts, read off the pass; [] if it did not
    run.  heapalloc's default mode: geomean and worst workload (wall); and
    against the peers' samplers: at most a third of the cheaper peer's cost
    wherever that cost is above noise."""
    if not ov_configs(ov):
        return []
    lines = []
    unmeasured = ov_unmeasured(ov)
    dname = OVERHEAD["default"]
    src = "profiling-overhead pass: %s; median of per-round wall ratios [IQR]" % (
        overhead_title(ov))
    if dname in unmeasured:
        return ["- %s: not measured — %s" % (ov_mode_label(dname), unmeasured[dname])]
    dsum = summarize_overhead(ov, dname)
    rows, rs, worst, undecided, failed = [], [], None, [], []
    for wname, s in dsum.items():
        if s["absent"] or not s["ok"]:
            rows.append("%s %s" % (wname, "not run" if s["absent"] else "failed"))
            failed.append(wname)
            continue
        rows.append("%s %s [%s]" % (wname, pct(s["wall_r"]), pct_range(s["wall_q"])))
        rs.append(s["wall_r"])
        if worst is None or s["wall_r"] > worst[0]:
            worst = (s["wall_r"], wname)
        q1, q3 = s["wall_q"]
        if q1 is not None and q1 <= OVERHEAD["worst_target"] < q3:
            undecided.append(wname)
    g = geomean(rs)
    gok = g is not None and not failed and g <= OVERHEAD["geomean_target"]
    wok = worst is not None and not failed and worst[0] <= OVERHEAD["worst_target"]
    line = ("- %s (wall, %s): %s; geomean %s — target ≤ +%g%%: %s; worst %s%s — target no "
            "workload above +%g%%: %s" % (
                ov_mode_label(dname), src, ", ".join(rows), pct(g),
                (OVERHEAD["geomean_target"] - 1) * 100, "**meets**" if gok else "**misses**",
                pct(worst and worst[0]), " (%s)" % worst[1] if worst else "",
                (OVERHEAD["worst_target"] - 1) * 100, "**meets**" if wok else "**misses**"))
    if undecided:
        line += " (within the noise for %s: the IQR straddles +%g%%)" % (
            ", ".join(undecided), (OVERHEAD["worst_target"] - 1) * 100)
    lines.append(line)
    psums = {n: summarize_overhead(ov, n) for n in OVERHEAD["peers"] if n not in unmeasured}
    if not psums:
        lines.append("- heapalloc's default mode against the peers' samplers: not measured — "
                     "%s" % "; ".join("%s: %s" % (n, unmeasured[n]) for n in OVERHEAD["peers"]))
    else:
        judged, bad, rows = [], [], []
        for wname in dsum:
            ok, txt = peer_check(dsum, psums, wname)
            rows.append("%s %s" % (wname, txt))
            if ok is not None:
                judged.append(wname)
                if not ok:
                    bad.append(wname)
        if not judged:
            v = "not judged (no workload where the cheaper peer's cost is above noise)"
        else:
            v = "**meets**" if not bad else "**misses** (%s)" % ", ".join(bad)
        lines.append("- heapalloc's default mode against the peers' samplers at 512 KiB "
                     "(%s; wall): %s — target: heapalloc's cost at most a third of the cheaper "
                     "peer's on every workload where that peer's cost is above noise (its IQR "
                     "wholly above 0%%), judged on %d of %d workloads: %s" % (
                         " and ".join(OV_MODE[n][0] for n in psums), "; ".join(rows),
                         len(judged), len(dsum), v))
    for n in [x for _, ons in OVERHEAD["families"] for x in ons]:
        if n == dname or n in OVERHEAD["peers"]:
            continue
        if n in unmeasured:
            lines.append("- %s: not measured — %s" % (ov_mode_label(n), unmeasured[n]))
            continue
        ss = summarize_overhead(ov, n)
        rs = [(s["wall_r"], w) for w, s in ss.items() if s["ok"]]
        if rs:
            lines.append("- %s (wall, profiling-overhead pass, no target): geomean %s, worst "
                         "%s (%s)" % (ov_mode_label(n), pct(geomean([r for r, _ in rs])),
                                      pct(max(rs)[0]), max(rs)[1]))
    return lines


# The workloads where heapalloc is to be at least as fast as the best peer, and
# the peers it is compared with.
PEER_WORKLOADS = ("prodcons", "larson", "ownthreads", "mixed", "xthread", "server",
                  "realloc", "frag", "python")
PEERS = ("tcmalloc", "jemalloc", "mimalloc")
HANDOFF_RSS_TARGET = 1.2


def peer_lines(summ, get):
    """heapalloc against the best peer, per workload, by the workload's own
    time per operation as a ratio to glibc (process start and exit left out);
    and the handoff stress's time, faults and RSS against glibc."""
    lines, rows, missed = [], [], []
    for w in PEER_WORKLOADS:
        g, h = get(w, "glibc"), get(w, "heapalloc")
        if not g or not h:
            continue

        def rel(s):
            if w == "frag":  # no per-op figure: wall
                return ratio(s["wall"], g["wall"])
            return ratio(own_time_per_op(w, {"figures": s["fig"], "pair": s["pair"]}),
                         own_time_per_op(w, {"figures": g["fig"], "pair": g["pair"]}))
        hr = rel(h)
        peers = [(rel(get(w, p)), p) for p in PEERS if get(w, p)]
        peers = [(r, p) for r, p in peers if r is not None]
        if hr is None or not peers:
            continue
        best = min(peers)
        if hr > best[0]:
            missed.append(w)
        rows.append("%s %s (best peer %s %s)" % (w, fmt(hr), best[1], fmt(best[0])))
    if rows:
        lines.append("- heapalloc against the best peer (own time per op, frag: wall; ×glibc): "
                     "%s — target ≤ the best peer on each: %s" % (
                         ", ".join(rows), "**meets**" if not missed else
                         "**misses** (%s)" % ", ".join(missed)))
    for w in ("handoff", "handoff-large"):
        g, h = get(w, "glibc"), get(w, "heapalloc")
        if not g or not h:
            continue
        rw, rf, rr = ratio(h["wall"], g["wall"]), ratio(h["minflt"], g["minflt"]), \
            ratio(h["rss"], g["rss"])
        ok = (rw is not None and rw <= 1.0 and rf is not None and rf <= 1.0
              and rr is not None and rr <= HANDOFF_RSS_TARGET)
        lines.append("- %s: heapalloc/glibc wall %s, sys %s, minor faults %s, peak RSS %s — "
                     "target wall ≤ 1, faults ≤ 1, RSS ≤ %g: %s" % (
                         w, fmt(rw), fmt(ratio(h["sys"], g["sys"])), fmt(rf), fmt(rr),
                         HANDOFF_RSS_TARGET, "**meets**" if ok else "**misses**"))
    return lines


# --- Targets (issues 2 and 3), read off the summaries ------------------------------
def targets(summ, allocs, ov=None, main=True):
    """The Targets list.  ov: the profiling-overhead pass (runs.json's
    "overhead"), which the profiling-overhead verdicts are read from;
    main=False: only that pass ran (--overhead-only), so only its lines."""
    names = {a["name"] for a in allocs if not a["skip"]}
    lines = []
    ov_lines = overhead_target_lines(ov)
    if not main:
        return ov_lines or ["- issue 3, profiling overhead: the pass did not run (%s)" % (
            (ov or {}).get("skip") or "no data")]

    def get(w, a):
        s = summ.get((w, a))
        return s if s and s["ok"] else None

    def verdict(ok):
        return "**meets**" if ok else "**misses**"

    ha, gl, mi = get("pairs", "heapalloc"), get("pairs", "glibc"), get("pairs", "mimalloc")
    if "heapalloc" not in names:
        lines.append("- heapalloc was not run (see the allocator list); no target can be read.")
        return lines
    # Issue 2: single-thread 16–512 B pairs.
    if ha and gl:
        small = [str(z) for z in PAIR_SIZES if z <= 512]
        for kind in ("pair", "batch"):
            rg = geomean([ratio(ha[kind].get(z), gl[kind].get(z)) for z in small])
            worst = max(small, key=lambda z: ratio(ha[kind].get(z), gl[kind].get(z)) or 0)
            txt = "- issue 2, single-thread 16–512 B (%s): heapalloc/glibc time %s (geomean; " \
                  "worst %s B: %s) — target ≤ 1.00: %s" % (
                      kind, fmt(rg), worst, fmt(ratio(ha[kind].get(worst), gl[kind].get(worst))),
                      verdict(rg is not None and rg <= 1.0))
            if mi:
                rm = geomean([ratio(ha[kind].get(z), mi[kind].get(z)) for z in small])
                txt += "; heapalloc/mimalloc %s — target ≤ 1.25: %s" % (
                    fmt(rm), verdict(rm is not None and rm <= 1.25))
            lines.append(txt)
    else:
        lines.append("- issue 2, single-thread pairs: no successful heapalloc/glibc runs")
    # Issue 2: 2-thread server mix throughput.
    hs, gs = get("server", "heapalloc"), get("server", "glibc")
    if hs and gs:
        tr = ratio(hs["fig"].get("ops_per_sec"), gs["fig"].get("ops_per_sec"))
        wr = ratio(gs["wall"], hs["wall"])
        lines.append("- issue 2, 2-thread server mix: heapalloc throughput %s× glibc's "
                     "(ops/s; by wall time %s×) — target ≥ 2×: %s" % (
                         fmt(tr), fmt(wr), verdict(tr is not None and tr >= 2.0)))
    else:
        lines.append("- issue 2, server mix: no successful heapalloc/glibc runs")
    # Issue 2: fragmentation peak RSS.
    hf, gf = get("frag", "heapalloc"), get("frag", "glibc")
    if hf and gf:
        rr = ratio(hf["rss"], gf["rss"])
        lines.append("- issue 2, fragmentation peak RSS: heapalloc/glibc %s (%s vs %s MiB; "
                     "final RSS %s vs %s MiB) — target ≤ 1.10: %s" % (
                         fmt(rr, 3), fmt(hf["rss"] / 1024, 1), fmt(gf["rss"] / 1024, 1),
                         fmt(hf["fig"].get("final_rss_kib", 0) / 1024, 1),
                         fmt(gf["fig"].get("final_rss_kib", 0) / 1024, 1),
                         verdict(rr is not None and rr <= 1.10)))
    else:
        lines.append("- issue 2, fragmentation: no successful heapalloc/glibc runs")
    hl, gll, ml = get("large", "heapalloc"), get("large", "glibc"), get("large", "mimalloc")
    if hl and gll:
        lines.append("- malloc-large (mimalloc 2.0.9's weak spot): heapalloc wall %s× glibc%s" % (
            fmt(ratio(hl["wall"], gll["wall"])),
            ", %s× mimalloc" % fmt(ratio(hl["wall"], ml["wall"])) if ml else ""))
    lines.extend(peer_lines(summ, get))
    # Issue 3: profiling overhead, per workload and profiling mode.  The
    # verdicts come from the profiling-overhead pass; at scale 100% the main
    # table's short runs (20-40 ms) are too noisy for a few-percent target, so
    # its comparison is only shown, after them, without a verdict.
    wnames = [w[0] for w in WORKLOADS]
    lines.extend(ov_lines)
    for mname in ("heapalloc-prof", "heapalloc-prof-compat"):
        over, rows = [], []
        for w in wnames:
            off, on = get(w, "heapalloc"), get(w, mname)
            if off and on:
                r = ratio(on["wall"], off["wall"])
                c = ratio(on["cpu"], off["cpu"])
                over.append(r)
                rows.append("%s %+.1f%% (CPU %+.1f%%)" % (w, (r - 1) * 100, (c - 1) * 100))
            elif summ.get((w, mname)):
                rows.append("%s failed" % w)
        tput = []
        for w in wnames:
            key = dict((x[0], x[4]) for x in WORKLOADS).get(w)
            off, on = get(w, "heapalloc"), get(w, mname)
            if off and on and key and key.endswith("_per_sec"):
                r = ratio(off["fig"].get(key), on["fig"].get(key))
                if r:
                    tput.append("%s %+.1f%%" % (w, (r - 1) * 100))
        if tput:
            rows.append("by the workloads' own timing (time per op): " + ", ".join(tput))
        off, on = get("pairs", "heapalloc"), get("pairs", mname)
        if off and on:
            small = [str(z) for z in PAIR_SIZES if z <= 512]
            pr = geomean([ratio(on["pair"].get(z), off["pair"].get(z)) for z in small])
            br = geomean([ratio(on["batch"].get(z), off["batch"].get(z)) for z in small])
            if pr and br:
                rows.append("pairs' own 16–512 B ns/pair %+.1f%% (pair), %+.1f%% (batch)" % (
                    (pr - 1) * 100, (br - 1) * 100))
        if ov_lines:
            label = ("- issue 3, %s: the same comparison in the main table above "
                     "(secondary: 20–40 ms runs at 100%%, too noisy for a few-percent target; "
                     "not part of the verdict)" % ov_mode_label(mname))
            tail = ""
        else:
            label = "- issue 3, %s (main table)" % ov_mode_label(mname)
            tail = (" — not judged (the profiling-overhead pass did not run%s; "
                    "`bench/run --overhead-only` runs it)" % (
                        ": " + ov["skip"] if ov and ov.get("skip") else ""))
        if not over and rows:
            lines.append("%s: %s — no successful runs to compare%s" % (
                label, ", ".join(rows), tail))
        elif over:
            lines.append("%s, wall: %s; geomean %+.1f%%, worst %+.1f%%%s" % (
                label, ", ".join(rows), (geomean(over) - 1) * 100, (max(over) - 1) * 100,
                tail))
        elif not ov_lines:
            lines.append("- issue 3, %s: not measured (no %s runs in the main table, and the "
                         "profiling-overhead pass did not run%s)" % (
                             ov_mode_label(mname), mname,
                             ": " + ov["skip"] if ov and ov.get("skip") else ""))
    rows, rs = [], []
    for w in wnames:
        a, g = get(w, "heapalloc-prof-all"), get(w, "tcmalloc-heapprof")
        if a and g:
            r = ratio(a["wall"], g["wall"])
            rs.append(r)
            rows.append("%s %s" % (w, fmt(r)))
        elif summ.get((w, "heapalloc-prof-all")) and not a:
            rows.append("%s failed" % w)
    if rows:
        lines.append("- issue 3, record-every-allocation vs gperftools' heap profiler "
                     "(wall, heapalloc/gperftools): %s — target < 1 on every workload: %s" % (
                         ", ".join(rows),
                         verdict(rs and max(rs) < 1.0 and len(rs) == len(wnames))))
    rows = []
    for w in wnames:
        off = get(w, "heapalloc")
        for a in ("heapalloc-prof", "heapalloc-prof-compat", "heapalloc-prof-all"):
            on = get(w, a)
            if off and on:
                rows.append((w, a, (on["rss"] - off["rss"]) / 1024, on["dump_files"],
                             on["dump_bytes"]))
    if rows:
        lines.append("- issue 3, profiler memory (peak RSS over heapalloc off; dump files, "
                     "bytes): " + "; ".join(
                         "%s/%s %+.1f MiB, %s files %s KiB" % (
                             w, a.replace("heapalloc-", ""), d, fmt(f, 0),
                             fmt(b and b / 1024, 0)) for w, a, d, f, b in rows))
    return lines


# --- Report ------------------------------------------------------------------------
def render_md(info, allocs, runs, mode, ov=None):
    summ = summarize(runs)
    only_ov = mode["name"] == "overhead"
    wl = [w for w in WORKLOADS if any(r["workload"] == w[0] for r in runs)]
    L = []
    L.append("# heapalloc benchmarks (%s)" % mode["name"])
    L.append("")
    L.append("Generated by `bench/run` from real runs; do not edit by hand "
             "(raw data: `bench/results/raw/%s/`)." % mode.get("stamp", "?"))
    L.append("")
    L.append("| | |")
    L.append("|---|---|")
    for k, label in (("date", "date"), ("cpu", "CPU"), ("nproc", "cores (nproc)"),
                     ("memory", "memory"), ("kernel", "kernel"), ("compiler", "compiler"),
                     ("cflags", "workload CFLAGS"), ("configure", "configure flags"),
                     ("commit", "heapalloc commit"), ("load_start", "load average at start"),
                     ("load_end", "load average at end")):
        L.append("| %s | %s |" % (label, str(info.get(k, "?")).replace("|", "\\|")))
    if only_ov:
        L.append("| mode | overhead only (`--overhead-only`): the profiling-overhead pass "
                 "alone, no main table |")
        L.append("")
        L.extend(render_overhead(ov or {"skip": "no data"}))
        L.append("## Targets (profiling overhead)")
        L.append("")
        L.extend(targets(summ, allocs, ov, main=False))
        L.append("")
        return "\n".join(L)
    L.append("| mode | %s: workload scale %s%%, %d repetitions (%d when a run takes over "
             "%gs), timeout %ss per run, allocators interleaved; %s |" % (
                 mode["name"], mode["scale"], mode["reps"], mode["slow_reps"], mode["slow_s"],
                 mode["timeout"],
                 "then the profiling-overhead pass (section at the end)" if ov
                 else "no profiling-overhead pass (%s)" % (
                     "skipped in quick mode" if mode["name"] == "quick"
                     else "not in this run's data")))
    L.append("")
    L.append("Medians over the repetitions.  Wall and CPU (user+sys) in seconds, peak RSS "
             "in MiB, each also as a ratio to glibc (lower is better).")
    L.append("")
    L.append("## Allocators")
    L.append("")
    for a in allocs:
        L.append("- **%s** — %s%s%s" % (a["name"], a["what"],
                                        " (`%s`)" % a["lib"] if a["lib"] else "",
                                        ": **%s**" % a["skip"] if a["skip"] else ""))
    L.append("")
    for wname, _, _, what, _ in wl:
        L.append("## %s — %s" % (wname, what))
        L.append("")
        L.append("| allocator | wall s | wall IQR | ×glibc | CPU s | ×glibc | peak RSS MiB "
                 "| ×glibc | workload's figure | runs |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
        g = summ.get((wname, "glibc"))
        g = g if g and g["ok"] else None
        for a in allocs:
            if a["skip"]:
                L.append("| %s | | | | | | | | %s | |" % (a["name"], a["skip"]))
                continue
            s = summ.get((wname, a["name"]))
            if not s or not s["ok"]:
                L.append("| %s | **failed** | | | | | | | | %s |" % (a["name"], status_note(s)))
                continue
            q = s.get("wall_q") or (None, None)
            L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                a["name"], fmt(s["wall"], 3),
                "%s–%s" % (fmt(q[0], 3), fmt(q[1], 3)) if q[0] is not None else "",
                fmt(ratio(s["wall"], g and g["wall"])),
                fmt(s["cpu"], 3), fmt(ratio(s["cpu"], g and g["cpu"])),
                fmt(s["rss"] / 1024, 1), fmt(ratio(s["rss"], g and g["rss"])),
                headline(wname, s), status_note(s, mode["reps"])))
        L.append("")
        if wname in FAULT_DETAIL:
            L.extend(render_fault_detail(wname, allocs, summ))
        if wname == "pairs":
            for kind, label in (("pair", "malloc then free at once"),
                                ("batch", "100 mallocs, then 100 frees")):
                shown = [a for a in allocs if not a["skip"]]
                L.append("ns per malloc+free pair (%s), median:" % label)
                L.append("")
                L.append("| size | " + " | ".join(a["name"] for a in shown) + " |")
                L.append("|---:|" + "---:|" * len(shown))
                for z in PAIR_SIZES:
                    cells = []
                    for a in shown:
                        s = summ.get(("pairs", a["name"]))
                        v = s["pair" if kind == "pair" else "batch"].get(str(z)) if s else None
                        cells.append(fmt(v, 1))
                    L.append("| %d | %s |" % (z, " | ".join(cells)))
                L.append("")
    if ov:
        L.extend(render_overhead(ov))
    elif mode["name"] == "quick":
        L.append("Profiling-overhead pass: skipped in quick mode (`bench/run --overhead-only` "
                 "runs it alone, about 11 minutes).")
        L.append("")
    L.append("## Targets (issues 2 and 3), read off the tables above")
    L.append("")
    L.extend(targets(summ, allocs, ov))
    L.append("")
    return "\n".join(L)


def render_fault_detail(wname, allocs, summ):
    """CPU split into user and system time, and minor page faults (wait4's
    ru_minflt), medians with their ratio to glibc: memory given back to the
    kernel and faulted in again shows as system time and faults."""
    L = ["User and system CPU (s) and minor page faults, median:", "",
         "| allocator | user s | ×glibc | sys s | ×glibc | minor faults | ×glibc |",
         "|---|---:|---:|---:|---:|---:|---:|"]
    g = summ.get((wname, "glibc"))
    g = g if g and g["ok"] else {}
    for a in allocs:
        s = summ.get((wname, a["name"]))
        if a["skip"] or not s or not s["ok"] or s.get("minflt") is None:
            continue
        L.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            a["name"], fmt(s["user"], 3), fmt(ratio(s["user"], g.get("user"))),
            fmt(s["sys"], 3), fmt(ratio(s["sys"], g.get("sys"))), fmt_big(s["minflt"]),
            fmt(ratio(s["minflt"], g.get("minflt")))))
    L.append("")
    return L
