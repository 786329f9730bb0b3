# tests/lib/names_lib.sh — shared helpers of the names_*.sh drivers (sourced):
# ground-truth programs built as a user builds them, run under heapalloc
# recording every allocation, read back by go tool pprof and google-pprof.
# Environment from the harness: top_builddir top_srcdir GO GOOGLE_PPROF CC
# CXX CARGO HA_LIB.  Exit codes: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
GO=${GO:-$(command -v go || true)}
GOOGLE_PPROF=${GOOGLE_PPROF:-$(command -v google-pprof || true)}
SYM="$top_builddir/tools/heapalloc-symbolize"
[ -x "$SYM" ] || { echo "missing $SYM"; exit 99; }
[ -f "$HA_LIB" ] || { echo "missing $HA_LIB"; exit 99; }
[ -n "$GO" ] && [ -x "$GO" ] || { echo "SKIP: go not found"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/names_test.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
unset HEAPPROFILE HEAP_PROFILE_ALLOCATION_INTERVAL HEAP_PROFILE_DEALLOCATION_INTERVAL \
	HEAP_PROFILE_INUSE_INTERVAL HEAP_PROFILE_TIME_INTERVAL HEAPPROFILESIGNAL \
	HEAPPROFILE_USE_PID HEAP_PROFILE_CLEANUP HEAP_PROFILE_EXACT_TOTALS
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
eq() { [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"; }
finish() {
	[ "$fails" -eq 0 ] && { echo "PASS"; exit 0; }
	echo "$fails failure(s)"
	exit 1
}

# record PROG [ARGS] — every allocation, both formats: $tmp/p.0001.{heap,pb.gz}
record() {
	LD_PRELOAD="$HA_LIB" HEAPPROFILE="$tmp/p" HEAP_PROFILE_SAMPLE_INTERVAL=1 \
		HEAP_PROFILE_FORMAT=both "$@" 2>"$tmp/run.err" || fail "$1 exited $?: $(cat "$tmp/run.err")"
	[ -f "$tmp/p.0001.heap" ] && [ -f "$tmp/p.0001.pb.gz" ] ||
		{ fail "no dumps: $(ls "$tmp"; cat "$tmp/run.err")"; finish; }
}

# symbolize IN OUT [BINARY...] — heapalloc-symbolize must succeed
symbolize() {
	in=$1 out=$2
	shift 2
	"$SYM" -o "$out" "$in" "$@" 2>"$tmp/sym.err" || fail "heapalloc-symbolize $in: $(cat "$tmp/sym.err")"
	[ -f "$out" ] || { fail "no $out"; finish; }
}

# gtop FILE INDEX NAME COLUMN [BINARY] — go pprof's flat (COLUMN 1) or cum
# (COLUMN 4) value of function NAME in bytes or objects, 0 if not listed.
gtop() {
	c="$tmp/top.$(basename "$1").$2${5:+.bin}"     # one pprof run per file and index
	[ -f "$c" ] || "$GO" tool pprof -top -unit=B -nodefraction=0 -edgefraction=0 \
		-nodecount=100000 -sample_index="$2" ${5:+"$5"} "$1" >"$c" 2>/dev/null
	awk -v n="$3" -v c="$4" '$NF == n || ($NF == "(inline)" && $(NF - 1) == n) {
			v = $c; sub(/B$/, "", v); print v; found = 1; exit }
		END { if (!found) print 0 }' "$c"
}

# sites FILE — check each "name index column value" line of $tmp/sites
# against FILE (a symbolised profile: no binary needed)
sites() {
	while read -r name idx col want; do
		eq "$(basename "$1"): $name $idx" "$(gtop "$1" "$idx" "$name" "$col")" "$want"
	done <"$tmp/sites"
}

# no_wrong FILE PATTERN — no frame of go pprof -traces matches PATTERN
# (egrep), and none is an unnamed address of the program's own files.
no_wrong() {
	"$GO" tool pprof -traces "$1" >"$tmp/traces" 2>&1 || fail "pprof -traces $1: $(head -3 "$tmp/traces")"
	bad=$(grep -E "$2" "$tmp/traces" | head -3)
	[ -z "$bad" ] || fail "$(basename "$1"): wrong names in -traces: $bad"
	grep -q "bytes:" "$tmp/traces" || fail "$(basename "$1"): no bytes labels in -traces"
}

# total FILE INDEX [BINARY] — go pprof's total of one sample type
total() {
	"$GO" tool pprof -top -unit=B -sample_index="$2" ${3:+"$3"} "$1" 2>/dev/null |
		sed -n 's/^Showing nodes accounting for \([0-9]*\)B*, .* of \([0-9]*\)B* total$/\2/p'
}

# same_numbers TEXT PB — the unsymbolised .pb.gz holds the text file's
# numbers (Go pprof offers objects/space for a text file when nothing was
# freed, all four types otherwise)
same_numbers() {
	for idx in inuse_space inuse_objects alloc_space alloc_objects; do
		t=$(total "$1" "$idx")
		[ -z "$t" ] && case $idx in inuse_space) t=$(total "$1" space) ;; inuse_objects) t=$(total "$1" objects) ;; *) continue ;; esac
		eq "text vs pb $idx" "$(total "$2" "$idx")" "$t"
	done
}

# perl_count TEXT BINARY NAME [TYPE [COLUMN]] — google-pprof's count of
# objects (TYPE inuse_objects by default; COLUMN 1 flat, 4 cum) at NAME
perl_count() {
	c="$tmp/perl.$(basename "$1").${4:-inuse_objects}"   # one (slow) perl run each
	[ -f "$c" ] || "$GOOGLE_PPROF" --text --"${4:-inuse_objects}" "$2" "$1" >"$c" 2>/dev/null
	awk -v n="$3" -v c="${5:-1}" '$NF == n || ($NF == "(inline)" && $(NF - 1) == n) {
			print $c; found = 1; exit }
		END { if (!found) print 0 }' "$c"
}
have_perl() {
	[ -n "$GOOGLE_PPROF" ] && [ -x "$GOOGLE_PPROF" ] && return 0
	echo "google-pprof not found: perl check skipped"
	return 1
}
