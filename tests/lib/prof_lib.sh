# tests/lib/prof_lib.sh — shared helpers of the prof_*.sh drivers (sourced).
# Environment from the harness: top_builddir top_srcdir GO GOOGLE_PPROF
# CARGO HA_LIB.  Exit codes: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
W="${PROF_WORK:-$top_builddir/tests/integration/prof_work}"
[ -x "$W" ] || { echo "missing $W"; exit 99; }
GO=${GO:-$(command -v go || true)}
GOOGLE_PPROF=${GOOGLE_PPROF:-$(command -v google-pprof || true)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/prof_test.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
unset HEAPPROFILE HEAP_PROFILE_SAMPLE_INTERVAL HEAP_PROFILE_ALLOCATION_INTERVAL \
	HEAP_PROFILE_DEALLOCATION_INTERVAL HEAP_PROFILE_INUSE_INTERVAL \
	HEAP_PROFILE_TIME_INTERVAL HEAPPROFILESIGNAL HEAPPROFILE_USE_PID \
	HEAP_PROFILE_CLEANUP HEAP_PROFILE_EXACT_TOTALS HEAP_PROFILE_FORMAT HEAP_PROFILE_KEEP \
	HEAP_PROFILE_MIN_SECONDS HEAP_PROFILE_RSS_INTERVAL HEAP_PROFILE_OOM_FRACTION \
	HEAP_PROFILE_PEAK_INTERVAL HEAP_PROFILE_STATS \
	HEAP_PROFILE_MMAP HEAP_PROFILE_SYMBOLIZE HEAP_PROFILE_CALIBRATE HEAP_PROFILE_SEED \
	HEAP_PROFILE_LEAKS HEAP_PROFILE_LEAKS_STATUS \
	HEAP_PROFILE_HTTP HEAP_PROFILE_HTTP_ADDR_FILE HEAPALLOC_HTTP_ROOT
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# lsd DIR — the directory's files but the sidecars of dumps (PREFIX.NNNN.stats,
# PREFIX.peak.*), which prof_stats.sh and prof_peak.sh check
lsd() { ls "$1" | grep -Ev '\.stats$|\.peak\.(heap|pb\.gz)$'; }
need_go() { [ -n "$GO" ] && [ -x "$GO" ] || { echo "SKIP: go not found"; exit 77; }; }

# eq WHAT GOT WANT
eq() { [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"; }

# near WHAT GOT WANT PERCENT — |got - want| <= want * percent / 100
near() {
	awk -v g="$2" -v w="$3" -v p="$4" 'BEGIN { d = g - w; if (d < 0) d = -d;
		exit !(g != "" && d <= w * p / 100) }' ||
		fail "$1: got '$2', want $3 +-$4%"
}

# flat INDEX FILE NAME — go pprof's flat value of function NAME (bytes or
# objects, units stripped), 0 when NAME is not listed.  When nothing was
# freed Go offers only objects/space (docs/heap-profile-spec.md §1): inuse_* falls back to those.
flat() {
	idx=$1
	if ! "$GO" tool pprof -raw -sample_index="$idx" "$W" "$2" >/dev/null 2>&1; then
		case $idx in inuse_objects) idx=objects ;; inuse_space) idx=space ;; esac
	fi
	"$GO" tool pprof -top -unit=B -nodefraction=0 -edgefraction=0 \
		-nodecount=100000 -sample_index="$idx" "$W" "$2" 2>"$tmp/pprof.err" |
		awk -v n="$3" '$NF == n { v = $1; sub(/B$/, "", v); print v; found = 1; exit }
			END { if (!found) print 0 }'
}

# sites FILE — each stdin row "site inuse_objects inuse_space alloc_objects
# alloc_space" equals go pprof's flat values of that function in FILE
sites() {
	while read -r site io ib ao ab; do
		eq "$site inuse_objects" "$(flat inuse_objects "$1" "$site")" "$io"
		eq "$site inuse_space" "$(flat inuse_space "$1" "$site")" "$ib"
		eq "$site alloc_objects" "$(flat alloc_objects "$1" "$site")" "$ao"
		eq "$site alloc_space" "$(flat alloc_space "$1" "$site")" "$ab"
	done
}

# shape FILE — heapalloc check: the header, every bucket line, the
# MAPPED_LIBRARIES section in the shapes both parsers accept (docs/heap-profile-spec.md §1-§3).
HEAPALLOC_CMD="$top_builddir/tools/heapalloc"
shape() {
	[ -x "$HEAPALLOC_CMD" ] || { echo "missing $HEAPALLOC_CMD"; exit 99; }
	"$HEAPALLOC_CMD" check "$1" >"$tmp/check.out" 2>&1 ||
		fail "heapalloc check: $(head -5 "$tmp/check.out")"
	return 0
}

# wait_ready FILE PID — wait up to 10 s for a program started in the
# background to write FILE (it is ready), while it runs
wait_ready() {
	_i=0
	while [ ! -s "$1" ] && [ $_i -lt 100 ] && kill -0 "$2" 2>/dev/null; do
		sleep 0.1
		_i=$((_i + 1))
	done
}

finish() {
	[ "$fails" -eq 0 ] && { echo "PASS"; exit 0; }
	echo "$fails failure(s)"
	exit 1
}
