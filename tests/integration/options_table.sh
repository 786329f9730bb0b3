#!/bin/sh
# One table of the profiler's variables (prof/session/options.c): the README's
# table, heapalloc(3), heapalloc(1)'s run options and tools/ha_options.py
# are what tools/gen-options writes from it (else: stale, run it); and
# `heapalloc run` refuses exactly the values the library refuses (both
# read them with alloc/env.c, the command through heapalloc-options): each
# value below is given to run's flag and to the library (its variable,
# preloaded into true), and one reports it bad exactly when the other does.
. "$top_srcdir/tests/lib/prof_lib.sh"
PY=${PYTHON3:-$(command -v python3 || true)}
[ -n "$PY" ] || { echo "SKIP: python3 not found"; exit 77; }
"$PY" "$top_srcdir/tools/gen-options" --check || fail "tools/gen-options --check"
# the program the library is preloaded into: this machine's true, or under
# emulation one of the library's architecture, built here
TRUE=true
if [ -n "${HA_EMULATED:-}" ]; then
	printf 'int main(void) { return 0; }\n' | ${CC:-cc} -x c -o "$tmp/true" - ||
		{ echo "HARD ERROR: cannot build $tmp/true with ${CC:-cc}"; exit 99; }
	TRUE=$tmp/true
fi

# FLAG VARIABLE VALUES...
agree() {
	flag=$1 var=$2
	shift 2
	# the command's verdicts, one line each (one interpreter for them all)
	"$PY" -c 'import sys; sys.dont_write_bytecode = True; sys.path.insert(0, sys.argv[1]); import ha_run
ha_run.HELPER = sys.argv[2]
for v in sys.argv[4:]: print(1 if ha_run.value_problem(sys.argv[3], v) else 0)' \
		"$top_srcdir/tools" "$top_builddir/tools/heapalloc-options" "$flag" "$@" >"$tmp/verdicts" ||
		{ fail "$flag: ha_run.value_problem failed"; return; }
	i=0
	for v in "$@"; do
		i=$((i + 1))
		cmd=$(sed -n "${i}p" "$tmp/verdicts")
		env "$var=$v" HEAPPROFILE="$tmp/p" LD_PRELOAD="$HA_LIB" "$TRUE" 2>"$tmp/err"
		grep -q "^heapalloc: $var=\"" "$tmp/err" && lib=1 || lib=0
		[ "$cmd" = "$lib" ] ||
			fail "$flag '$v': the command says $([ $cmd = 1 ] && echo bad || echo good), the library $([ $lib = 1 ] && echo bad || echo good)"
	done
}
sizes='0 1 524288 512k 512K 64M 1g 2T 64MiB 64Mi 64MB 64mb 1kB 7B x -1 1.5M 64Q 64 M 99999999999999999999 8191P 8388607T 8388608T ¹'
agree --sample HEAP_PROFILE_SAMPLE_INTERVAL $sizes ""
agree --every-alloc HEAP_PROFILE_ALLOCATION_INTERVAL $sizes
agree --inuse HEAP_PROFILE_INUSE_INTERVAL $sizes
agree --time HEAP_PROFILE_TIME_INTERVAL 0 5 60 5s 1k -3 1.5 x ² 9223372036854775807 \
	9223372036854775808 ""
agree --signal HEAPPROFILESIGNAL 10 12 USR2 usr2 SIGUSR1 sigterm RTMIN RTMIN+3 RTMAX-2 RTMAX+1 \
	RTMIN-1 RTMIN+1k 9 KILL SIGSTOP 0 65 1k ³ HUPX ""
agree --format HEAP_PROFILE_FORMAT text pprof both TEXT Both proto "" x
finish
