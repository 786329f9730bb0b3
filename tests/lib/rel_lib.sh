# tests/lib/rel_lib.sh — sourced by the rel_*.sh drivers: the program under
# test, a temporary directory removed at exit, and the failure/hang
# counters.  Usage: . "$top_srcdir/tests/lib/rel_lib.sh"; rel_setup NAME
prog="${top_builddir:-.}/tests/integration/rel_prog"
[ -x "$prog" ] || { echo "HARD ERROR: $prog missing"; exit 99; }
fails=0
hangs=0
# a run that takes longer has hung: 10 s, under qemu-user 60 (on a loaded
# machine an emulated run has taken 10 s to end normally)
hang_s=10
[ -n "${HA_EMULATED:-}" ] && hang_s=60

# rel_setup NAME [EXTRA]: $tmp (and with EXTRA, $io too), removed at exit
rel_setup() {
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/ha_$1_XXXXXX") || exit 99
	io=
	[ -n "${2:-}" ] && { io=$(mktemp -d "${TMPDIR:-/tmp}/ha_$1_io_XXXXXX") || exit 99; }
	trap 'rm -rf "$tmp" ${io:+"$io"}' EXIT
}

hung() {  # after a run: stop the whole driver once runs start hanging
	[ "$1" -eq 124 ] || return 0
	hangs=$((hangs + 1))
	if [ $hangs -ge 2 ]; then
		echo "FAIL: $hangs runs hung (killed after $hang_s s each); giving up on the rest"
		exit 1
	fi
}

fail() { echo "FAIL $*"; fails=$((fails + 1)); }
