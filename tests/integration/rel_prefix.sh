#!/bin/sh
# tests/integration/rel_prefix.sh — HEAPPROFILE prefixes that cannot be written or that
# are unusual: a missing directory, a "directory" that is a regular file
# (unwritable even for root), a prefix longer than PATH_MAX → a clear
# message naming the problem, the program runs on and exits 0.  Spaces, a
# newline and UTF-8 multibyte characters → files named byte for byte, no
# temporary file left, and HEAPPROFILE unchanged in the live environment.
. "${top_srcdir:-.}/tests/lib/rel_lib.sh"
rel_setup relprefix io

# run PREFIX: the program must run normally whatever the prefix
run() {
	HEAPPROFILE=$1 timeout $hang_s "$prog" expect-env "$1" >"$io/out" 2>"$io/err"
	rc=$?
	hung $rc
	if [ $rc -ne 0 ] || [ "$(cat "$io/out")" != "rel_prog ok" ]; then
		fail "$2: exit $rc (124 = hung), stdout '$(head -c 200 "$io/out")'"
		head -c 600 "$io/err"; echo
		return 1
	fi
	return 0
}

# --- cannot be written: a clear message, once per dump, naming the file
: >"$tmp/file.txt"
for case in "missing:$tmp/no/such/dir/p:No such file" \
	    "not-a-dir:$tmp/file.txt/p:Not a directory"; do
	name=${case%%:*}; rest=${case#*:}; prefix=${rest%:*}; why=${rest##*:}
	run "$prefix" "$name" || continue
	if ! grep -F "Failed dumping heap profile to $prefix." "$io/err" | grep -Fq "$why"; then
		fail "$name ($prefix): want 'Failed dumping heap profile to $prefix.0001.heap: $why...', got:"
		head -c 600 "$io/err"; echo
	fi
done

# --- longer than PATH_MAX (4096): refused with a message naming the problem
long="$tmp/$(head -c 5000 /dev/zero | tr '\0' a)"
if run "$long" "prefix of 5000+ bytes"; then
	if ! grep -Eiq 'HEAPPROFILE|too long' "$io/err"; then
		fail "prefix of ${#long} bytes: want a message (HEAPPROFILE ... too long), stderr was: '$(head -c 300 "$io/err")'"
	fi
	if [ -n "$(ls "$tmp" | grep -v file.txt)" ]; then
		fail "prefix of ${#long} bytes: files appeared: $(ls "$tmp" | head -c 200)"
	fi
fi
# 4000 bytes made of existing short directories: fits PATH_MAX → written
d="$tmp/deep"; mkdir -p "$d"; deep="$d"
while [ ${#deep} -lt 3900 ]; do deep="$deep/dddddddddddddddddddddddddddddddddddddddddddddddd"; done
mkdir -p "$deep"
run "$deep/p" "prefix of ${#deep} bytes in deep directories" &&
	{ [ -f "$deep/p.0001.heap" ] || fail "deep prefix (${#deep} bytes): $deep/p.0001.heap not written: $(head -c 300 "$io/err")"; }

# --- byte-exact names
nl='
'
for case in "spaces:$tmp/dir with spaces/my prof" \
	    "newline:$tmp/nl${nl}dir/p${nl}q" \
	    "utf8:$tmp/prøfïl€/データ 🙂"; do
	name=${case%%:*}; prefix=${case#*:}; dir=${prefix%/*}
	mkdir -p "$dir"
	run "$prefix" "$name" || continue
	if [ ! -f "$prefix.0001.heap" ]; then
		fail "$name: '$prefix.0001.heap' not written; directory has: $(ls -b "$dir" | tr '\n' ' ')"
		head -c 400 "$io/err"; echo
		continue
	fi
	if [ "$(ls -Ab "$dir" | grep -c '\.tmp')" -ne 0 ] || [ "$(ls -Ab "$dir" | grep -c 'heap$')" -ne 1 ]; then
		fail "$name: want exactly one .heap file and no temporary, got: $(ls -Ab "$dir" | tr '\n' ' ')"
	fi
	grep -Fq "Dumping heap profile to $prefix.0001.heap" "$io/err" ||
		fail "$name: no 'Dumping heap profile to $prefix.0001.heap' line: $(head -c 300 "$io/err")"
	head -n 1 "$prefix.0001.heap" | grep -q '^heap profile: ' ||
		fail "$name: file does not start with a profile header"
	grep -q '^MAPPED_LIBRARIES:$' "$prefix.0001.heap" ||
		fail "$name: file has no MAPPED_LIBRARIES: section"
done

[ $fails -eq 0 ] && { echo "rel_prefix: all cases passed"; exit 0; }
echo "rel_prefix: $fails case(s) failed"
exit 1
