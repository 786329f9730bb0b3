# tests/lib/emu.sh — sourced by a test driver that cannot run where its
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

# emu_rust — under emulation, the Rust toolchain that builds for the
# library's architecture: a rustc whose sysroot holds that target's
# standard library (Debian's rustc with libstd-rust-dev:arm64,
# tools/install-deps --arch arm64; rustup's would need `rustup target add`,
# a download), the cargo beside it, linking with $CC.  Sets CARGO,
# emu_rustc (that rustc) and rustc_target ("--target T -C linker=CC", for
# rustc itself), exports CARGO_BUILD_TARGET and its linker, and sets
# rust_triple to "T/", the directory cargo puts a target's build under.
# None found: skip, saying why.  Not emulated: sets rust_triple,
# emu_rustc and rustc_target empty and nothing else.
emu_rust() {
	rust_triple= emu_rustc= rustc_target=
	[ -n "${HA_EMULATED:-}" ] || return 0
	emu_t=${HA_EMULATED%% *}-unknown-linux-gnu
	for emu_r in "$(command -v rustc)" ${CARGO:+"$(dirname "$CARGO")/rustc"} /usr/bin/rustc; do
		[ -x "$emu_r" ] && [ -x "$(dirname "$emu_r")/cargo" ] || continue
		emu_d=$("$emu_r" --print target-libdir --target "$emu_t" 2>/dev/null) || continue
		ls "$emu_d"/libstd-*.rlib >/dev/null 2>&1 || continue
		emu_rustc=$emu_r
		break
	done
	[ -n "$emu_rustc" ] || emu_skip "no rustc here has the $emu_t standard library (Debian's: apt-get install rustc cargo libstd-rust-dev:${HA_EMULATED%% *}, as tools/install-deps --arch arm64 does)"
	CARGO=$(dirname "$emu_rustc")/cargo
	emu_ld=${CC%% *}
	rust_triple=$emu_t/
	rustc_target="--target $emu_t -C linker=$emu_ld"
	CARGO_BUILD_TARGET=$emu_t
	RUSTC=$emu_rustc
	eval "CARGO_TARGET_$(echo "$emu_t" | tr a-z- A-Z_)_LINKER=\$emu_ld"
	export CARGO_BUILD_TARGET RUSTC "CARGO_TARGET_$(echo "$emu_t" | tr a-z- A-Z_)_LINKER"
	echo "$HA_EMULATED: Rust for $emu_t: $("$emu_rustc" --version), $("$CARGO" --version), linking with $emu_ld"
}

# emu_root WHAT — under emulation, the directory holding Debian's programs
# of the library's architecture, unpacked by tools/check --arch arm64
# (usr/bin: sort, head, gawk, sqlite3, python3; bin: sh, dash; its
# python3 needs PYTHONHOME=$emu_dir/usr), put first on PATH
# so that a program a test starts, and those it starts, are of that
# architecture; when it is missing skip, saying WHAT needed them.
# Not emulated: nothing.
emu_root() {
	[ -n "${HA_EMULATED:-}" ] || return 0
	emu_dir=$top_builddir/emu-root
	[ -x "$emu_dir/usr/bin/sqlite3" ] && [ -x "$emu_dir/usr/bin/python3" ] ||
		emu_skip "$1: no Debian programs for ${HA_EMULATED%% *} in $emu_dir (tools/check --arch arm64 unpacks them)"
	PATH=$emu_dir/usr/bin:$emu_dir/bin:$PATH
	export PATH
}
