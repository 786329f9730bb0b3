# tests/emu.sh — sourced by a test driver that cannot run where its
# programs are emulated (a cross build's tests, run by qemu-user through
# binfmt_misc; HA_EMULATED names it, Makefile.am).
# emu_skip WHY — skip (exit 77) under emulation, saying why; tools/check
# --arch arm64 lets such skips pass on CI by that prefix.
emu_skip() {
	[ -n "${HA_EMULATED:-}" ] || return 0
	echo "SKIP: $HA_EMULATED: $*"
	exit 77
}

# emu_prog NAME DIR — this machine's NAME (env or true), or under emulation
# a stand-in of the library's architecture built into DIR (the library
# preloads only into a program of its own architecture): its path
emu_prog() {
	if [ -z "${HA_EMULATED:-}" ]; then
		echo "$1"
		return 0
	fi
	case $1 in
	env) src='#include <stdio.h>
extern char **environ;
int main(void) { for (char **e = environ; *e; e++) puts(*e); return 0; }' ;;
	*) src='int main(void) { return 0; }' ;;
	esac
	printf '%s\n' "$src" | ${CC:-cc} -x c -o "$2/$1" - && chmod 755 "$2/$1" && echo "$2/$1"
}
