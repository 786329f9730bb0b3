"""pyalloc — a real program: python3 doing allocation-heavy work.

bench/run runs Debian's /usr/bin/python3 on this script under LD_PRELOAD,
with PYTHONMALLOC=malloc so every object, not only those over pymalloc's
512 B, comes from the allocator under test.  The job: build records (dicts
of strings, lists and numbers), serialise them to JSON and back, index and
sort them, grow and slice strings, and drop most of it — repeated in rounds.
Prints "allocator <file defining malloc>" and "records_per_sec <n>".
argv[1]: scale in percent.
"""
import json
import os
import sys
import time


def allocator():
    # dladdr on malloc would name python3 itself (its PLT is the canonical
    # address), so report the preloaded object if it is really mapped.
    with open("/proc/self/maps") as f:
        maps = f.read()
    for lib in os.environ.get("LD_PRELOAD", "").split():
        real = os.path.realpath(lib)
        if real in maps:
            return real
    for line in maps.splitlines():
        if "/libc.so" in line:
            return line.split()[-1]
    return "unknown"


def one_round(n, seed):
    recs = []
    for i in range(n):
        k = (i * 2654435761 + seed) & 0xFFFFFFFF
        recs.append({
            "id": k,
            "name": "user-%d-%s" % (k, "x" * (k % 40)),
            "tags": ["t%d" % (k % (j + 3)) for j in range(k % 12)],
            "score": (k % 1000) / 7.0,
            "blob": str(k) * (1 + k % 64),
        })
    text = json.dumps(recs)
    back = json.loads(text)
    index = {r["name"]: r for r in back}
    by_score = sorted(back, key=lambda r: (r["score"], r["id"]))
    out = []
    for r in by_score[::3]:
        s = r["name"]
        for t in r["tags"]:
            s += "," + t
        out.append(s[: 10 + len(s) // 2])
    total = sum(len(s) for s in out) + len(index)
    del recs, back, index, by_score, text
    return total, out[::50]


def main():
    scale = float(sys.argv[1]) / 100.0 if len(sys.argv) > 1 else 1.0
    records = max(200, int(10000 * scale))
    per_round = min(5000, records)
    rounds = max(1, records // per_round)
    print("allocator", allocator())
    keep = []
    t0 = time.perf_counter()
    check = 0
    for r in range(rounds):
        total, sample = one_round(per_round, r)
        check += total
        keep.append(sample)
        if len(keep) > 4:
            keep.pop(0)
    t = time.perf_counter() - t0
    print("checksum", check)
    print("records_per_sec %.0f" % (rounds * per_round / t))


main()
