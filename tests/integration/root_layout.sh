#!/bin/sh
# root_layout.sh — heapalloc_root's layout has one source, prof/root.h:
# the offsets tools/gen-layout computes from it (and writes into
# tools/ha_layout.py, the reader outside's) are the compiler's own (its
# --c output compiles), the generated module in the build is current, and
# the reader takes every field of the root from it (no literal offset or
# struct format of the root left in tools/ha_proc.py).
. "$top_srcdir/tests/lib/prof_lib.sh"
PY=${PYTHON3:-$(command -v python3 || true)}
[ -n "$PY" ] || { echo "SKIP: python3 not found"; exit 77; }
"$PY" "$top_srcdir/tools/gen-layout" --c "$top_srcdir/prof/root.h" >"$tmp/layout.c" ||
	{ echo "HARD ERROR: tools/gen-layout --c failed"; exit 99; }
${CC:-cc} -std=c11 -fsyntax-only -I"$top_srcdir" "$tmp/layout.c" 2>"$tmp/cc.err" ||
	fail "the compiler's layout is not gen-layout's: $(grep -m3 'gen-layout' "$tmp/cc.err")"
"$PY" "$top_srcdir/tools/gen-layout" "$top_srcdir/prof/root.h" >"$tmp/ha_layout.py" || exit 99
cmp -s "$tmp/ha_layout.py" "$top_builddir/tools/ha_layout.py" ||
	fail "$top_builddir/tools/ha_layout.py is not what prof/root.h gives (make rebuilds it)"
# the reader: every field of the generated root, read back from a root
# whose every byte says where it is
out=$("$PY" - "$top_srcdir/tools" "$top_builddir/tools" <<'PYEOF' 2>&1
import struct, sys
sys.dont_write_bytecode = True
sys.path[:0] = sys.argv[1:3]
import ha_layout, ha_proc
raw = bytearray(ha_layout.SIZE['ha_root'])
want = {}
for name, off, f in ha_layout.ROOT:
    n = struct.calcsize('<' + f)
    if f.endswith('s') or name.endswith('pad_'):
        continue
    each = n // int(f[:-1] or 1)
    vals = [(off + 1) * 16 + k for k in range(n // each)]
    struct.pack_into('<' + f, raw, off, *vals)
    want[name] = vals[0] if len(vals) == 1 else tuple(vals)
raw[0:8] = ha_layout.MAGIC
r = ha_proc.Root(bytes(raw))
bad = 0
for name, v in want.items():
    got = getattr(r, ha_proc._ATTR.get(name, name.rpartition('.')[2]))
    if got != v:
        print('%s: read %r, want %r' % (name, got, v))
        bad += 1
if r.meta != (want['meta.ranges'], want['meta.count'], want['meta.max']):
    print('meta: %r' % (r.meta,))
    bad += 1
# a root of layout 1 as first published (no meta part): read, no meta
short = ha_proc.Root(bytes(raw[:ha_proc.ROOT_MIN]))
if short.meta is not None or short.gen != want['session.gen']:
    print('the first root: meta %r, gen %r' % (short.meta, short.gen))
    bad += 1
sys.exit(1 if bad else 0)
PYEOF
) || fail "the reader's root: $out"
# no hand-written layout of the root in the reader
grep -nE "struct\.Struct\('<8s|addr \+ [0-9]+|raw, 1[0-9]\)" "$top_srcdir/tools/ha_proc.py" &&
	fail "tools/ha_proc.py still spells a root offset or format by hand"
finish
