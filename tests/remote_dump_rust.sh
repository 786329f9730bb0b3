#!/bin/sh
# remote_dump_rust.sh — `heapalloc dump PID` of a Rust program whose global
# allocator is the crate (tools/rust/heapalloc), started with no variable:
# tests/rust_crate/src/bin/remote_sites.rs (tests/remote_sites.c's `hold`
# mode) built with cargo --offline, linked both ways (shared, and
# HEAPALLOC_STATIC=1: heapalloc_root in the program's own symbol table),
# its binary deleted before the dump.  The named profile must give site_big
# and site_small their bytes within 4 of the standard errors of sampling at
# 512 KiB, site_gone nothing in use, the totals the program's own books
# (heapalloc::stats()) to the byte, and Rust names (remote_sites::site_big)
# with file:line in remote_sites.rs.  The program's exit status stays 0 and
# it writes nothing but its READY file.
. "$top_srcdir/tests/prof_lib.sh"
[ -n "${CARGO:-}" ] && [ -x "$CARGO" ] || CARGO=$(command -v cargo || true)
[ -n "$CARGO" ] || { echo "SKIP: cargo not found"; exit 77; }
H="$top_builddir/tools/heapalloc"
PY=${PYTHON3:-python3}
libs="$top_builddir/.libs"
[ -f "$libs/libheapalloc.so" ] && [ -f "$libs/libheapalloc.a" ] || { echo "missing $libs"; exit 99; }
# the path dependency ../../tools/rust/heapalloc, as in the source tree
mkdir -p "$tmp/src/tests" "$tmp/src/tools/rust" "$tmp/run" "$tmp/cwd" || exit 99
cp -R "$top_srcdir/tests/rust_crate" "$tmp/src/tests/" &&
	cp -R "$top_srcdir/tools/rust/heapalloc" "$tmp/src/tools/rust/" &&
	chmod -R u+w "$tmp/src" || exit 99

for mode in shared static; do
	target="$top_builddir/tests/remote_dump_rust.$mode.target"
	st=; [ $mode = static ] && st=1
	# as tests/rust_crate.sh: the archive's own link flags (a sanitizer's runtime)
	rf=; [ $mode = static ] && for f in ${HA_LDFLAGS:-}; do
		rf="$rf -C link-arg=$f"
		case $f in -fsanitize=*undefined*) rf="$rf -C link-arg=-lubsan" ;; esac
	done
	RUSTFLAGS="${rf# }" HEAPALLOC_LIB_DIR="$libs" HEAPALLOC_STATIC="$st" CARGO_TARGET_DIR="$target" \
		"$CARGO" build --offline -q --manifest-path "$tmp/src/tests/rust_crate/Cargo.toml" \
		--bin remote_sites 2>"$tmp/cargo.err" ||
		{ cat "$tmp/cargo.err"; fail "$mode: cargo cannot build remote_sites"; continue; }
	cp "$target/debug/remote_sites" "$tmp/run/prog" || exit 99
	rm -f "$tmp/ready" "$tmp/in"
	mkfifo "$tmp/in" || exit 99
	(cd "$tmp/cwd" && exec "$tmp/run/prog" "$tmp/ready" <"$tmp/in" >"$tmp/prog.out" 2>"$tmp/prog.err") &
	pid=$!
	exec 7>"$tmp/in"
	i=0
	while [ ! -f "$tmp/ready" ] && [ $i -lt 600 ]; do
		kill -0 $pid 2>/dev/null || break
		sleep 0.1
		i=$((i + 1))
	done
	[ -f "$tmp/ready" ] || { fail "$mode: the program never got ready: $(cat "$tmp/prog.err")"; exec 7>&-; wait $pid; continue; }
	rm -f "$tmp/run/prog"
	timeout 60 "$H" dump $pid -o "$tmp/$mode.pb.gz" 2>"$tmp/$mode.err" ||
		fail "$mode: dump exited $?: $(cat "$tmp/$mode.err")"
	"$PY" - "$top_srcdir/tools" "$tmp/$mode.pb.gz" "$tmp/ready" "$pid" >"$tmp/$mode.check" <<'EOF' ||
import gzip, math, sys
sys.path.insert(0, sys.argv[1])
import ha_pb
data = open(sys.argv[2], 'rb').read()
p = ha_pb.read_profile(data)
f = open(sys.argv[3]).read().split()
want = dict(zip(f[0::2], map(int, f[1::2])))
pid = sys.argv[4]
types = [t for t, u in p.sample_types]
ia, ii = types.index('alloc_space'), types.index('inuse_space')
problems = []
def site(name):
    """In-use bytes of the samples with a frame of Rust function NAME, and
    that frame's file:line."""
    inuse, files = 0, set()
    for locs, vals in p.samples:
        hit = [(p.functions[fn].name, p.functions[fn].filename, line)
               for l in locs for fn, line in p.locations[l].lines
               if p.functions[fn].name == 'remote_sites::' + name]
        if hit:
            inuse += vals[ii]
            files.add('%s:%d' % (hit[0][1].split('/')[-1], hit[0][2]))
    return inuse, files
tot_in = sum(v[ii] for l, v in p.samples)
tot_al = sum(v[ia] for l, v in p.samples)
if tot_al != want['alloc']:
    problems.append('alloc_space total %d, the books say %d' % (tot_al, want['alloc']))
if tot_in != want['alloc'] - want['free']:
    problems.append('inuse_space total %d, the books say %d' % (tot_in, want['alloc'] - want['free']))
# a site's relative standard error at 512 KiB: sqrt((1 - p) / samples)
R = 524288
for name, key, size in (('site_big', 'big', 65536), ('site_small', 'small', 512)):
    got, files = site(name)
    pr = 1 - math.exp(-size / R)
    rse = math.sqrt((1 - pr) / max(want[key] * pr / size, 1))
    if abs(got - want[key]) > 4 * rse * want[key]:
        problems.append('%s in use %d, want %d within 4 x %.1f%%' % (name, got, want[key], 100 * rse))
    if not any(x.startswith('remote_sites.rs:') for x in files):
        problems.append('%s has no file:line in remote_sites.rs (%s)' % (name, files))
gone, _ = site('site_gone')
if gone:
    problems.append('site_gone shows %d bytes in use' % gone)
raw = gzip.decompress(data)
strings = [bytes(raw[v[0]:v[1]]).decode() for field, wire, v, off in ha_pb.fields(raw, 0, len(raw))
           if field == 6]
if not any(('pid %s,' % pid) in s and '/run/prog' in s for s in strings):
    problems.append('no comment naming pid %s and its command' % pid)
if problems:
    sys.stdout.write('; '.join(problems) + '\n')
    sys.exit(1)
EOF
		fail "$mode: $(cat "$tmp/$mode.check")"
	exec 7>&-
	wait $pid
	eq "$mode: exit status" $? 0
	eq "$mode: output" "$(cat "$tmp/prog.out" "$tmp/prog.err")" ""
	eq "$mode: no file in its directory" "$(ls "$tmp/cwd")" ""
done
finish
