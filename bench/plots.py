"""bench/plots.py — the chart of bench/run: each allocator's ratio to glibc.

Two panels, wall time and peak RSS, one group of bars per workload and one
bar per allocator (glibc itself is the line at 1×), on a log2 axis from 1/8×
to 32×; a bar beyond that is cut at the edge and labelled with its value; a
failed or skipped run is a red × on the 1× line.  Drawn with matplotlib (Agg
backend, Debian's python3-matplotlib); without it there is no chart and
bench/run still writes the tables.
"""
import os
import sys

import report

# the same matplotlib lookup the timeline command uses (Debian's package
# seen from a pyenv or venv python3 too)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from ha_timeline import have_matplotlib  # noqa: E402

# log2 of the axis' ends: 1/8x ... 32x
LO, HI = -3, 5
PALETTE = {"glibc": "#7f7f7f", "heapalloc": "#d62728", "heapalloc-prof": "#ff7f0e",
           "heapalloc-prof-compat": "#8c564b", "tcmalloc-nosample": "#17becf",
           "tcmalloc-sampled": "#9edae5", "heapalloc-prof-all": "#e8b04a",
           "tcmalloc": "#1f77b4",
           "tcmalloc-heapprof": "#6baed6", "jemalloc": "#2ca02c", "jemalloc-prof": "#98df8a",
           "mimalloc": "#9467bd"}
PANELS = (("wall", "wall time"), ("rss", "peak RSS"))


def ratios(allocs, runs):
    """The workloads that ran, the allocators shown (all but glibc and the
    skipped), and (metric, workload, allocator) -> median ratio to glibc, or
    None where either side has no successful run."""
    summ = report.summarize(runs)
    wl = [w[0] for w in report.WORKLOADS if any(r["workload"] == w[0] for r in runs)]
    shown = [a["name"] for a in allocs if not a["skip"] and a["name"] != "glibc"]
    out = {}
    for metric, _ in PANELS:
        for w in wl:
            g = summ.get((w, "glibc"))
            base = g[metric] if g and g["ok"] else None
            for a in shown:
                s = summ.get((w, a))
                out[(metric, w, a)] = s[metric] / base if base and s and s["ok"] else None
    return wl, shown, out


def write_svg(path, info, allocs, runs, mode):
    """Draw the chart to path (written as path.tmp, then renamed); False,
    after one line on stderr, when matplotlib cannot be imported."""
    if not have_matplotlib():
        print("bench/run: no chart: matplotlib cannot be imported (Debian: python3-matplotlib);"
              " %s not written" % path, file=sys.stderr)
        return False
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"     # text stays text: searchable
    matplotlib.rcParams["svg.hashsalt"] = "heapalloc-bench"   # same data, same file
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator

    wl, shown, val = ratios(allocs, runs)
    n = max(len(shown), 1)
    bar = min(0.8 / n, 0.2)    # a group fills at most 0.8 of a workload's slot
    width = max(8.0, 2.5 + len(wl) * (0.12 + 0.09 * n))
    fig, axes = plt.subplots(2, 1, figsize=(width, 8.5), dpi=100, sharex=True)
    fig.suptitle("heapalloc benchmarks: ratio to glibc (lower is better, log scale)\n"
                 "%s · %s cores · %s · %s · %s mode" % (
                     info.get("cpu", ""), info.get("nproc", "?"), info.get("memory", ""),
                     info.get("date", ""), mode["name"]), fontsize=11)
    lo, hi = 2.0 ** LO, 2.0 ** HI
    for ax, (metric, title) in zip(axes, PANELS):
        for j, a in enumerate(shown):
            xs, ys = [], []
            for i, w in enumerate(wl):
                x = i + (j + 0.5 - n / 2) * bar
                r = val[(metric, w, a)]
                if r is None:
                    ax.plot(x, 1.0, marker="x", color="#c00", markersize=4, linestyle="none")
                    continue
                xs.append(x)
                ys.append(r)
                if r > hi or r < lo:   # the value, on the cut end of its bar
                    ax.annotate("%.2g×" % r, (x, hi if r > hi else lo), fontsize=6,
                                rotation=90, ha="center", va="top" if r > hi else "bottom",
                                xytext=(0, -2 if r > hi else 2), textcoords="offset points",
                                bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none",
                                          alpha=0.85))
            clipped = [min(max(r, lo), hi) for r in ys]
            ax.bar(xs, [c - 1.0 for c in clipped], bottom=1.0, width=bar * 0.9,
                   color=PALETTE.get(a, "#333"), label=a)
        ax.set_yscale("log", base=2)
        ax.set_ylim(lo, hi)
        ax.yaxis.set_major_locator(FixedLocator([2.0 ** e for e in range(LO, HI + 1)]))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_yticklabels(["%g×" % 2.0 ** e for e in range(LO, HI + 1)])
        ax.grid(axis="y", color="#ddd", linewidth=0.8)
        ax.set_axisbelow(True)
        ax.axhline(1.0, color="black", linewidth=0.9)
        ax.set_title(title, loc="left", fontsize=10, fontweight="bold")
        ax.set_ylabel("%s, × glibc's (median)" % title)
        ax.set_xlim(-0.5, len(wl) - 0.5)
    axes[-1].set_xticks(range(len(wl)))
    axes[-1].set_xticklabels(wl, rotation=30, ha="right")
    axes[-1].set_xlabel("workload")
    handles, labels = axes[0].get_legend_handles_labels()
    handles.append(plt.Line2D([], [], marker="x", color="#c00", linestyle="none"))
    labels.append("failed or skipped")
    fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0 - 2.2 / width, 0.88),
               fontsize=8, frameon=False)
    fig.subplots_adjust(left=0.9 / width, right=1.0 - 2.4 / width, top=0.88, bottom=0.12,
                        hspace=0.25)
    tmp = path + ".tmp"
    fig.savefig(tmp, format="svg", metadata={"Date": None})
    plt.close(fig)
    os.replace(tmp, path)
    return True
