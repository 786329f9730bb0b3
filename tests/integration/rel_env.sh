#!/bin/sh
# tests/integration/rel_env.sh — every profiler variable with junk values: the program
# runs normally (exit 0, its usual output) and stderr holds exactly one line
# naming the variable, the bad value and the value used instead.  Accepted
# forms (docs/heap-profile-spec.md §5: booleans t T y Y 1 and empty; decimal numbers; size
# suffixes and signal names heapalloc accepts) print nothing at all.
# Runs without HEAPPROFILE (options are parsed at every start), then once
# with it to check the warning is printed once, not once per parse.
. "${top_srcdir:-.}/tests/lib/rel_lib.sh"
rel_setup relenv
huge9=$(head -c 5000 /dev/zero | tr '\0' 9)
hugex=$(head -c 20000 /dev/zero | tr '\0' x)

# run VAR VALUE warn|quiet DEFAULT
run() {
	var=$1 val=$2 want=$3 def=$4
	env -u HEAPPROFILE "$var=$val" timeout $hang_s "$prog" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	hung $rc
	short=$(printf '%s' "$val" | head -c 40)
	what="$var='$short'$( [ ${#val} -gt 40 ] && echo "...(${#val} chars)")"
	if [ $rc -ne 0 ] || [ "$(cat "$tmp/out")" != "rel_prog ok" ]; then
		echo "FAIL $what: exit $rc, stdout '$(head -c 200 "$tmp/out")'"
		sed 's/^/  stderr: /' "$tmp/err" | head -c 600; echo
		fails=$((fails + 1)); return
	fi
	lines=$(wc -l <"$tmp/err")
	bytes=$(wc -c <"$tmp/err")
	if [ "$want" = quiet ]; then
		if [ "$bytes" -ne 0 ]; then
			echo "FAIL $what: accepted form, want no message, got:"
			head -c 400 "$tmp/err"; echo
			fails=$((fails + 1))
		fi
		return
	fi
	if [ "$lines" -ne 1 ] || [ "$(tail -c 1 "$tmp/err" | od -An -c | tr -d ' ')" != '\n' ]; then
		echo "FAIL $what: want exactly one stderr line, got $lines newline(s) in $bytes bytes:"
		head -c 400 "$tmp/err"; echo
		fails=$((fails + 1)); return
	fi
	line=$(cat "$tmp/err")
	case "$line" in *"$var"*) ;; *)
		echo "FAIL $what: message does not name the variable: $(echo "$line" | head -c 300)"
		fails=$((fails + 1)); return;; esac
	case "$line" in *"$short"*) ;; *)
		echo "FAIL $what: message does not show the bad value: $(echo "$line" | head -c 300)"
		fails=$((fails + 1)); return;; esac
	# the value used instead: the default, as a number (or a boolean word)
	pat="(^|[^0-9])$def([^0-9]|\$)"
	[ -n "$5" ] && pat="$pat|$5"
	rest=${line#*"$short"}   # what follows the bad value
	if ! printf '%s\n' "$rest" | grep -Eq "$pat"; then
		echo "FAIL $what: message does not give the value used ($def): $(echo "$line" | tail -c 200)"
		fails=$((fails + 1)); return
	fi
}

numjunk() {  # VAR DEFAULT: the junk every numeric variable must refuse
	for v in abc -1 -4096 99999999999999999999999 18446744073709551616 18446744073709551617 "" 12abc "0x10" " 12" "1.5" "$huge9" "$hugex"; do
		run "$1" "$v" warn "$2"
	done
}
numjunk HEAP_PROFILE_SAMPLE_INTERVAL 2097152
numjunk HEAP_PROFILE_ALLOCATION_INTERVAL 1073741824
numjunk HEAP_PROFILE_DEALLOCATION_INTERVAL 0
numjunk HEAP_PROFILE_INUSE_INTERVAL 104857600
numjunk HEAP_PROFILE_TIME_INTERVAL 0
numjunk HEAP_PROFILE_KEEP 0
numjunk HEAP_PROFILE_MIN_SECONDS 0
run HEAP_PROFILE_KEEP 3k warn 0          # a count, not a size
run HEAP_PROFILE_MIN_SECONDS 1m warn 0   # seconds take no suffix
for v in abc -1 99999999999999999999999 "" 12abc 0 99 NOSUCHSIG SIGKILL 9 "$huge9" "$hugex"; do
	run HEAPPROFILESIGNAL "$v" warn 0
done
for var in HEAPPROFILE_USE_PID HEAP_PROFILE_CLEANUP; do
	def=0; words='false'
	[ $var = HEAP_PROFILE_CLEANUP ] && { def=1; words='true'; }
	for v in maybe -1 99999999999999999999999 12abc 2 "$hugex"; do
		run $var "$v" warn $def "$words"
	done
done

# accepted forms: no message
for v in 1 4096 524288 64M 1g 0; do
	run HEAP_PROFILE_SAMPLE_INTERVAL "$v" quiet 0
	run HEAP_PROFILE_ALLOCATION_INTERVAL "$v" quiet 0
	run HEAP_PROFILE_DEALLOCATION_INTERVAL "$v" quiet 0
	run HEAP_PROFILE_INUSE_INTERVAL "$v" quiet 0
done
for v in 0 1 3600; do
	run HEAP_PROFILE_TIME_INTERVAL "$v" quiet 0
	run HEAP_PROFILE_KEEP "$v" quiet 0
	run HEAP_PROFILE_MIN_SECONDS "$v" quiet 0
done
for v in 12 SIGUSR2 USR1 10; do run HEAPPROFILESIGNAL "$v" quiet 0; done
for var in HEAPPROFILE_USE_PID HEAP_PROFILE_CLEANUP; do
	for v in t T y Y 1 ""; do run $var "$v" quiet 0; done
done
run HEAPPROFILE "" quiet 0      # empty: profiling off, nothing printed

# with profiling on: the warning comes once (and the program still runs)
HEAPPROFILE="$tmp/p" HEAP_PROFILE_SAMPLE_INTERVAL=abc timeout $hang_s "$prog" >"$tmp/out" 2>"$tmp/err"
rc=$?
hung $rc
n=$(grep -c 'HEAP_PROFILE_SAMPLE_INTERVAL.*abc' "$tmp/err")
if [ $rc -ne 0 ] || [ "$(cat "$tmp/out")" != "rel_prog ok" ] || [ "$n" -ne 1 ]; then
	echo "FAIL HEAPPROFILE set + HEAP_PROFILE_SAMPLE_INTERVAL=abc: exit $rc, $n warning line(s), want 1:"
	head -c 600 "$tmp/err"; echo
	fails=$((fails + 1))
fi
[ $fails -eq 0 ] && { echo "rel_env: all cases passed"; exit 0; }
echo "rel_env: $fails case(s) failed"
exit 1
