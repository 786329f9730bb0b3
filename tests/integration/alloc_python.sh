#!/bin/sh
# alloc_python.sh — a real program under LD_PRELOAD: python3 runs an
# allocation-heavy script (dicts, lists, strings, big bytes objects, threads)
# and must print exactly what it prints without heapalloc.  The script also
# reports, through ctypes, whether heapalloc is loaded, so the preloaded run
# is known to have used it.  PYTHONMALLOC=malloc sends every Python object
# through malloc, not only the big ones.  Skips (77) without python3.  Env: HA_LIB, PYTHON3.
. "$top_srcdir/tests/lib/emu.sh"
# under emulation Debian's arm64 python3, its standard library beside it
emu_root "python3 of the library's architecture"
lib=${HA_LIB:-}
py=${PYTHON3:-}
if [ -n "${HA_EMULATED:-}" ]; then
	py=$emu_dir/usr/bin/python3
	PYTHONHOME=$emu_dir/usr
	export PYTHONHOME
fi
[ -n "$py" ] || py=$(command -v python3 2>/dev/null)
[ -n "$py" ] && "$py" -c 'pass' 2>/dev/null || { echo "SKIP: python3 not available"; exit 77; }
[ -n "$lib" ] && [ -f "$lib" ] || { echo "HARD ERROR: HA_LIB='$lib' is not a file"; exit 99; }

tmp=${TMPDIR:-/tmp}/alloc_python.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
cat > "$tmp/work.py" <<'PY'
import hashlib, json, sys, threading, zlib

def digest(obj):
    return hashlib.sha256(repr(obj).encode()).hexdigest()[:16]

# dicts and lists of many small objects, grown and shrunk
d = {}
for i in range(100000):
    d["k%d" % i] = [i, str(i) * (i % 7), (i, i * 2)]
for i in range(0, 100000, 3):
    del d["k%d" % i]
print("dict", len(d), digest(sorted(d.items())[:1000]))

# strings: joins, splits, replaces
s = "-".join(str(i) for i in range(100000))
parts = s.split("-")
t = s.replace("9", "nine").upper()
print("str", len(s), len(parts), len(t), hashlib.sha256(t.encode()).hexdigest()[:16])

# big bytes objects, resized through bytearray and compression
blobs = [bytes([i % 251]) * (i * 65536 + 17) for i in range(1, 40)]
ba = bytearray()
for b in blobs:
    ba += b
    if len(ba) > 30 << 20:
        del ba[: len(ba) // 2]
z = zlib.compress(bytes(ba), 6)
print("bytes", len(ba), len(z), hashlib.sha256(zlib.decompress(z)).hexdigest()[:16])

# json round trip of a nested structure
doc = {"items": [{"id": i, "tags": ["t%d" % (i % 13)] * (i % 5), "v": i / 7} for i in range(20000)]}
text = json.dumps(doc, sort_keys=True)
print("json", len(text), json.loads(text)["items"][19999]["id"])

# threads allocating and handing objects to each other
out = []
lock = threading.Lock()
def work(k):
    local = [list(range(k, k + 500)) for _ in range(200)]
    with lock:
        out.append(sum(map(sum, local)))
ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
for th in ts: th.start()
for th in ts: th.join()
print("threads", sorted(out))

# report the allocator, to stderr (differs by design between the runs)
try:
    import ctypes
    ha = ctypes.CDLL(None)
    try:
        ha.heapalloc_get_stats
        sys.stderr.write("allocator: heapalloc\n")
    except AttributeError:
        sys.stderr.write("allocator: other\n")
except Exception as e:
    sys.stderr.write("allocator: unknown (%s)\n" % e)
PY

PYTHONMALLOC=malloc PYTHONHASHSEED=0 "$py" "$tmp/work.py" > "$tmp/plain.out" 2> "$tmp/plain.err"
rc1=$?
PYTHONMALLOC=malloc PYTHONHASHSEED=0 LD_PRELOAD=$lib "$py" "$tmp/work.py" > "$tmp/ha.out" 2> "$tmp/ha.err"
rc2=$?
status=0
[ $rc1 = 0 ] || { echo "HARD ERROR: python3 failed without heapalloc ($rc1)"; cat "$tmp/plain.err"; exit 99; }
[ $rc2 = 0 ] || { echo "FAIL: python3 under LD_PRELOAD exited $rc2"; cat "$tmp/ha.err"; status=1; }
if ! cmp -s "$tmp/plain.out" "$tmp/ha.out"; then
	echo "FAIL: output differs under LD_PRELOAD"
	diff "$tmp/plain.out" "$tmp/ha.out"
	status=1
fi
if grep -q "allocator: other" "$tmp/ha.err"; then
	echo "FAIL: heapalloc_get_stats not visible in the preloaded python"
	status=1
fi
grep "allocator:" "$tmp/ha.err"
[ $status = 0 ] && { echo "ok: same output with and without heapalloc:"; cat "$tmp/ha.out"; }
exit $status
