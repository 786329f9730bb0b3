#!/bin/sh
# The heapalloc command (tools/heapalloc, build-tree copy):
#  run     — exact environment handed to PROG, LD_PRELOAD prepended, the
#            files it names are the files written, PROG's exit status (0, 3,
#            a signal as 128+N, 127 when PROG cannot be executed), a program
#            not linked with heapalloc, bad option values;
#  check   — every file of a real run passes (text, pprof, peak, log,
#            stats); corrupted copies fail with the exact line number;
#  growth  — between two dumps of a program that leaks at leak_site, recording
#            every allocation: leak_site first with its exact bytes and each
#            frame's file:line; pprof's unsampling of heap_v2/R dumps;
#  symbolize — passes through to heapalloc-symbolize.
. "$top_srcdir/tests/lib/prof_lib.sh"
H="$top_builddir/tools/heapalloc"
[ -x "$H" ] || { echo "missing $H"; exit 99; }
unset LD_PRELOAD

# files LISTING — the file names listed after "N files written:" on stderr
files() { sed -n '/files* written:$/,$p' "$1" | sed -n 's/^  //p' | tr '\n' ' '; }

# ---- help ----
for c in run check growth; do
	"$H" $c --help >"$tmp/help" 2>&1 || fail "$c --help exited $?"
	eq "$c --help" "$(head -1 "$tmp/help" | cut -d' ' -f1-3)" "usage: heapalloc $c"
done
"$H" --help >"$tmp/help" 2>&1 || fail "--help exited $?"
grep -q '^  growth OLD NEW' "$tmp/help" || fail "--help lists no growth: $(cat "$tmp/help")"

# ---- run: exit status 0, the default prefix, the files named ----
mkdir "$tmp/r0"
(cd "$tmp/r0" && "$H" run -- "$W" status 0) 2>"$tmp/r0.err"
eq "status 0" $? 0
eq "status 0: first line" "$(head -1 "$tmp/r0.err")" \
	"heapalloc: profiling $W: profiles go to ./heapalloc.prof_work.* ($HA_LIB)"
eq "status 0: files" "$(ls "$tmp/r0" | tr '\n' ' ')" \
	"heapalloc.prof_work.0001.heap heapalloc.prof_work.0001.stats heapalloc.prof_work.log "
eq "status 0: files named" "$(files "$tmp/r0.err")" \
	"./heapalloc.prof_work.0001.heap ./heapalloc.prof_work.0001.stats ./heapalloc.prof_work.log "
grep -qx 'heapalloc: 3 files written:' "$tmp/r0.err" || fail "status 0: no count line: $(cat "$tmp/r0.err")"

# exit status 3, -o; another process's file of an earlier run is not named
mkdir "$tmp/r3"
echo stale >"$tmp/r3/p_1.0001.heap"
"$H" run -o "$tmp/r3/p" -- "$W" status 3 2>"$tmp/r3.err"
eq "status 3" $? 3
eq "status 3: files named" "$(files "$tmp/r3.err")" "$tmp/r3/p.0001.heap $tmp/r3/p.0001.stats $tmp/r3/p.log "
eq "status 3: files" "$(ls "$tmp/r3" | tr '\n' ' ')" "p.0001.heap p.0001.stats p.log p_1.0001.heap "

# death by SIGTERM: 128 + 15; no exit dump, the log is there
mkdir "$tmp/rs"
"$H" run -o "$tmp/rs/p" -- "$W" raise 15 2>"$tmp/rs.err"
eq "SIGTERM" $? 143
eq "SIGTERM: files named" "$(files "$tmp/rs.err")" "$tmp/rs/p.log "
eq "SIGTERM: files" "$(ls "$tmp/rs")" "p.log"
"$H" run -o "$tmp/rs/q" -- "$W" raise 6 2>/dev/null
eq "SIGABRT" $? 134

# ---- run: every option's variable, LD_PRELOAD prepended, a program not
# linked with heapalloc (env, which leaves by exit()) profiled ----
# (HEAPPROFILE_USE_PID=1 is the library's own, for descendants: docs/heap-profile-spec.md §6)
mkdir "$tmp/e"
. "$top_srcdir/tests/lib/emu.sh"
envp=$(emu_prog env "$tmp") || { echo "HARD ERROR: no env stand-in"; exit 99; }
mod="$top_builddir/tests/integration/.libs/prof_dlmod.so"
[ -f "$mod" ] || { echo "missing $mod"; exit 99; }
LD_PRELOAD="$mod" "$H" run -o "$tmp/e/p" --sample 1 --every-alloc 64M --inuse=1G --time 5 \
	--signal USR2 --format both -- "$envp" >"$tmp/e.out" 2>"$tmp/e.err"
eq "env: status" $? 0
# (not run's: the harness sets HEAP_PROFILE_TIMELINE_MS=0 for every test,
# and the profiled program marks its descendants with HEAPALLOC_PROFILE_ROOT)
eq "env: variables" "$(grep -E '^HEAP' "$tmp/e.out" | grep -v '^HEAP_PROFILE_TIMELINE_MS=0$' | grep -v '^HEAPALLOC_PROFILE_ROOT=[0-9]*$' | sort | tr '\n' ' ')" \
	"HEAPPROFILE=$tmp/e/p HEAPPROFILESIGNAL=USR2 HEAPPROFILE_USE_PID=1 HEAP_PROFILE_ALLOCATION_INTERVAL=64M HEAP_PROFILE_FORMAT=both HEAP_PROFILE_INUSE_INTERVAL=1G HEAP_PROFILE_SAMPLE_INTERVAL=1 HEAP_PROFILE_TIME_INTERVAL=5 "
eq "env: LD_PRELOAD" "$(grep '^LD_PRELOAD=' "$tmp/e.out")" "LD_PRELOAD=$HA_LIB $mod"
eq "env: files" "$(ls "$tmp/e" | tr '\n' ' ')" "p.0001.heap p.0001.pb.gz p.0001.stats p.log "
shape "$tmp/e/p.0001.heap"
grep -q "^heapalloc: pid [0-9]*: kill -$(kill -l USR2 2>/dev/null || echo 12) [0-9]* dumps a profile$" "$tmp/e.err" ||
	fail "env: no pid line: $(cat "$tmp/e.err")"
# a shell's status passes through untouched, and so do its file descriptors
"$H" run -o "$tmp/e/sh" -- sh -c 'echo fd3 >&3; exit 5' 2>/dev/null 3>"$tmp/fd3"
eq "sh: status" $? 5
eq "sh: fd 3" "$(cat "$tmp/fd3")" fd3

# bad values: one line, exit 2, nothing run
"$H" run --sample 12x -- "$W" status 0 >"$tmp/b.out" 2>&1
eq "bad size: status" $? 2
eq "bad size: message" "$(cat "$tmp/b.out")" \
	"heapalloc: run: --sample '12x' is not a size in bytes (such as 524288, 512k, 64M) (see heapalloc run --help)"
"$H" run --signal KILL -- "$W" status 0 >"$tmp/b.out" 2>&1
eq "bad signal: status" $? 2
"$H" run --format xml -- "$W" status 0 >"$tmp/b.out" 2>&1
eq "bad format: status" $? 2

# a program that cannot be executed: one line, 127
"$H" run -o "$tmp/x" -- "$tmp/no such program" arg >"$tmp/n.out" 2>&1
eq "missing program: status" $? 127
eq "missing program: message" "$(cat "$tmp/n.out")" "heapalloc: cannot execute $tmp/no such program: not found"
printf 'not a program\n' >"$tmp/plain"
"$H" run -- "$tmp/plain" >"$tmp/n.out" 2>&1
eq "plain file: status" $? 127
eq "plain file: lines" "$(wc -l <"$tmp/n.out")" 1

# ---- check: every file of a real run, text and pprof, peak included ----
mkdir "$tmp/c"
HEAP_PROFILE_PEAK_INTERVAL=1 "$H" run -o "$tmp/c/p" --sample 1 --format both -- "$W" truth 2>"$tmp/c.err" ||
	fail "truth exited $?"
eq "check: files" "$(ls "$tmp/c" | tr '\n' ' ')" \
	"p.0001.heap p.0001.pb.gz p.0001.stats p.log p.peak.heap p.peak.pb.gz "
"$H" check "$tmp/c"/* >"$tmp/c.out" 2>&1
eq "check: status" $? 0
eq "check: ok lines" "$(grep -c ': ok (' "$tmp/c.out")" 6
n=$(wc -l <"$tmp/c/p.0001.heap")
m=$(sed '1,/^MAPPED_LIBRARIES:$/d' "$tmp/c/p.0001.heap" | wc -l)
grep -qx "$tmp/c/p.0001.heap: ok ($n lines, $m mappings)" "$tmp/c.out" || fail "check: ok line: $(cat "$tmp/c.out")"
# heapalloc-symbolize's output, through `heapalloc symbolize`
"$H" symbolize "$tmp/c/p.0001.heap" >/dev/null 2>"$tmp/s.err" || fail "symbolize exited $?: $(cat "$tmp/s.err")"
"$H" check "$tmp/c/p.0001.sym.pb.gz" >"$tmp/s.out" 2>&1 || fail "check symbolised: $(cat "$tmp/s.out")"

# corrupted copies: the exact line of the problem, exit 1
f="$tmp/c/p.0001.heap"
# badcopy NAME SED-SCRIPT WANT — WANT is the whole output for the copy
badcopy() {
	sed "$2" "$f" >"$tmp/bad.heap"
	"$H" check "$tmp/bad.heap" >"$tmp/bad.out" 2>&1
	eq "$1: status" $? 1
	eq "$1" "$(cat "$tmp/bad.out")" "$3"
}
badcopy "space before ]" '3s/\]/ ]/' \
	"$tmp/bad.heap:3: bad bucket line: space before \"]\" (perl pprof drops the line): $(sed -n '3s/\]/ ]/p' "$f" | cut -c1-60 | sed "s/.*/'&...'/")"
badcopy "header" '1s/heap_v2\/1/heap_v2\/x/;1s/heapprofile/heapprof/' \
	"$tmp/bad.heap:1: bad header '$(head -1 "$f" | sed 's/heapprofile/heapprof/')': want \"heap profile: N: N [N: N] @ heap_v2/R\" or \"@ heapprofile\""
x=$(grep -n ' r-xp ' "$f" | head -1 | cut -d: -f1)
badcopy "r-xs" "${x}s/ r-xp / r-xs /" \
	"$tmp/bad.heap:$x: shared mapping \"r-xs\" not normalised to \"r-xp\" (Go pprof mis-parses it)"
badcopy "uppercase" '2s/0x\([0-9a-f]*\)/0x\U\1/;2s/0X/0x/' \
	"$tmp/bad.heap:2: bad bucket line: address not lowercase hex with 0x: $(sed -n '2s/0x\([0-9a-f]*\)/0x\U\1/p' "$f" | cut -c1-60 | sed "s/.*/'&...'/")"
b=$(grep -n '^MAPPED_LIBRARIES:$' "$f" | cut -d: -f1)
badcopy "no blank line" "$((b - 1))d" \
	"$tmp/bad.heap:$((b - 1)): no blank line before MAPPED_LIBRARIES:"
# a count of 0 with bytes: Go rejects the file (the header sums stay right
# because the line's bytes move to another line's count)
l=$(awk 'NR > 1 && $1 + 0 > 1 { print NR; exit }' "$f")
sed "${l}s/^ *[0-9]*:/     0:/" "$f" >"$tmp/bad.heap"
"$H" check "$tmp/bad.heap" >"$tmp/bad.out" 2>&1
eq "count 0: status" $? 1
grep -q "^$tmp/bad.heap:$l: in-use count 0 with [0-9]* bytes (Go pprof rejects the file)$" "$tmp/bad.out" ||
	fail "count 0: $(cat "$tmp/bad.out")"
# pprof files: a cut stream, a location id no sample can reach
head -c 100 "$tmp/c/p.0001.pb.gz" >"$tmp/cut.pb.gz"
"$H" check "$tmp/cut.pb.gz" >"$tmp/bad.out" 2>&1
eq "cut gzip: status" $? 1
grep -q "^$tmp/cut.pb.gz: not a valid gzip stream" "$tmp/bad.out" || fail "cut gzip: $(cat "$tmp/bad.out")"
gzip -dc "$tmp/c/p.0001.pb.gz" | head -c -3 | gzip >"$tmp/short.pb.gz"
"$H" check "$tmp/short.pb.gz" >"$tmp/bad.out" 2>&1
eq "cut message: status" $? 1

# ---- growth: leak_site first, its exact bytes (every allocation recorded) ----
mkdir "$tmp/g"
"$H" run -o "$tmp/g/l" --sample 1 -- "$W" leak 3 50 4096 2>"$tmp/g.err" || fail "leak exited $?"
"$H" growth "$tmp/g/l.0002.heap" "$tmp/g/l.0003.heap" >"$tmp/g.out" 2>&1 || fail "growth exited $?"
eq "growth: header" "$(sed -n 2p "$tmp/g.out" | tr -s ' ')" \
	" grew old new objects site: first frame of the program, then its callers"
# at FUNCTION TEXT — the first line of tests/integration/prof_work.c holding TEXT after
# FUNCTION's definition
src=$top_srcdir/tests/integration/prof_work.c
at() { awk -v f="$1(" -v t="$2" 'index($0, f) && /^(__attribute__|static)/ { on = 1 }
	on && index($0, t) { print NR; exit }' "$src"; }
up="mode_leak prof_work.c:$(at mode_leak 'handle_request(n, size);') <- main prof_work.c:$(at mode_leak 'mode_leak(atoi')"
eq "growth: first" "$(sed -n 3p "$tmp/g.out" | tr -s ' ')" \
	" 204800 204800 409600 +50 leak_site prof_work.c:$(at leak_site 'malloc(size)') <- handle_request prof_work.c:$(at handle_request 'leak_site(n, size);') <- $up"
eq "growth: second" "$(sed -n 4p "$tmp/g.out" | tr -s ' ')" \
	" 5000 5000 10000 +50 small_leak prof_work.c:$(at small_leak 'malloc(100)') <- handle_request prof_work.c:$(at handle_request 'small_leak(n);') <- $up"
"$H" growth --top 1 "$tmp/g/l.0001.heap" "$tmp/g/l.0004.heap" >"$tmp/g.out" 2>&1 || fail "growth --top exited $?"
eq "growth --top 1" "$(tail -n +3 "$tmp/g.out" | awk '{ print $1, $2, $3, $4, $5 }')" "614400 0 614400 +150 leak_site"

# unsampling as pprof does: heap_v2/1000, 1000-byte objects: x 1/(1 - e^-1),
# truncated as Go's scaleHeapSample does (1000 -> 1581 bytes, 1 object;
# 2000 -> 3163, 3 objects)
printf 'heap profile:      %s: %s [%s: %s] @ heap_v2/1000\n%6d: %8d [%6d: %8d] @ 0x1234 0x5678\n\nMAPPED_LIBRARIES:\n' \
	1 1000 1 1000 1 1000 1 1000 >"$tmp/old.heap"
printf 'heap profile:      %s: %s [%s: %s] @ heap_v2/1000\n%6d: %8d [%6d: %8d] @ 0x1234 0x5678\n\nMAPPED_LIBRARIES:\n' \
	2 2000 2 2000 2 2000 2 2000 >"$tmp/new.heap"
"$H" check "$tmp/old.heap" "$tmp/new.heap" >/dev/null || fail "hand-made dumps fail check"
"$H" growth "$tmp/old.heap" "$tmp/new.heap" >"$tmp/g.out" 2>&1 || fail "growth sampled exited $?"
eq "growth sampled" "$(tail -n +3 "$tmp/g.out" | tr -s ' ')" " 1582 1581 3163 +2 0x1234 <- 0x5678"
"$H" growth "$tmp/old.heap" >"$tmp/g.out" 2>&1
eq "growth one file: status" $? 2

# timeline: the slot is there; without its module one clear line
if [ ! -f "$top_srcdir/tools/ha_timeline.py" ]; then
	"$H" timeline "$tmp/g/l" >"$tmp/t.out" 2>&1
	eq "timeline missing: status" $? 127
	eq "timeline missing: lines" "$(grep -c 'timeline: the module ha_timeline.py is not installed' "$tmp/t.out")" 1
fi
finish
