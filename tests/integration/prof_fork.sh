#!/bin/sh
# fork and exec children under HEAPPROFILE write their own files
# (PREFIX_PID.NNNN.heap) and clobber none of the root's (PREFIX.NNNN.heap);
# the exec'd child sees HEAPPROFILE byte for byte and HEAPPROFILE_USE_PID=1,
# and nothing non-ASCII is added; a prefix with UTF-8 and spaces works.
# Each process keeps its own dump log next to its files (PREFIX[_PID].log).
. "$top_srcdir/tests/lib/emu.sh"
emu_skip "qemu-user 7.2 aborts in a fork of a threaded process (cpu_exec: assertion cpu == current_cpu)"
. "$top_srcdir/tests/lib/prof_lib.sh"
d="$tmp/dir ü"
mkdir "$d"
pfx="$d/prøfil é"
HEAPPROFILE="$pfx" HEAP_PROFILE_SAMPLE_INTERVAL=1 "$W" fork >"$tmp/out" 2>"$tmp/err" || fail "prof_work fork exited $?: $(cat "$tmp/err")"
fpid=$(sed -n 's/^fork //p' "$tmp/out")
epid=$(sed -n 's/^exec //p' "$tmp/out")
[ -n "$fpid" ] && [ -n "$epid" ] || fail "no child pids: $(cat "$tmp/out")"
want=$(printf '%s\n' "prøfil é.0001.heap" "prøfil é_$fpid.0001.heap" "prøfil é_$epid.0001.heap" \
	"prøfil é.log" "prøfil é_$fpid.log" "prøfil é_$epid.log" | sort | tr '\n' '|')
eq "files" "$(lsd "$d" | sort | tr '\n' '|')" "$want"
grep -q "^Dumping heap profile to $pfx\.0001\.heap (Exiting" "$tmp/err" || fail "root exit dump line"
grep -q "^Dumping heap profile to ${pfx}_$fpid\.0001\.heap (Exiting" "$tmp/err" || fail "fork child exit dump line"
grep -q "^Dumping heap profile to ${pfx}_$epid\.0001\.heap (Exiting" "$tmp/err" || fail "exec child exit dump line"
for p in "" "_$fpid" "_$epid"; do
	eq "log$p" "$(grep -v '^#' "$pfx$p.log" | cut -f1,7 | tr '\t' ' ')" "1 prøfil é$p.0001.heap"
done
# one start line for the whole tree, gperftools' wording; the exec'd child
# names its command at the top of its log instead (the fork child shares
# the root's start)
eq "start lines" "$(grep -c '^Starting tracking the heap$' "$tmp/err")" 1
eq "exec child's command" "$(grep '^# command:' "${pfx}_$epid.log")" "# command: $W execchild $pfx"
eq "root log names no command" "$(grep -c '^# command:' "$pfx.log")" 0
# the root's last file holds the root's 100 kept blocks, not a child's
if [ -n "$GO" ] && [ -x "$GO" ]; then
	eq "root site_keep objects" "$(flat inuse_objects "$pfx.0001.heap" site_keep)" 100
	[ "$(flat inuse_objects "${pfx}_$epid.0001.heap" site_keep)" -gt 0 ] 2>/dev/null ||
		fail "exec child profile has no site_keep"
fi
# in pprof form each profile's comments name its command; the exec'd
# child's also say whose descendant it is
if [ -n "$GO" ] && [ -x "$GO" ]; then
	mkdir "$tmp/b"
	HEAPPROFILE="$tmp/b/p" HEAP_PROFILE_FORMAT=pprof "$W" fork >"$tmp/bout" 2>"$tmp/berr" ||
		fail "pprof fork exited $?: $(cat "$tmp/berr")"
	bepid=$(sed -n 's/^exec //p' "$tmp/bout")
	eq "root profile's command" "$("$GO" tool pprof -comments "$tmp/b/p.0001.pb.gz" 2>/dev/null |
		grep '^command:')" "command: $W fork"
	"$GO" tool pprof -comments "$tmp/b/p_$bepid.0001.pb.gz" 2>/dev/null | grep '^command:' |
		grep -qx "command: $W execchild $tmp/b/p (pid $bepid, descendant of pid [0-9]*)" ||
		fail "exec child's profile comments: $("$GO" tool pprof -comments "$tmp/b/p_$bepid.0001.pb.gz" 2>&1)"
fi
# a fork child that samples starts no thread: the parent runs its helper
# (time dumps), the child none; its crossing writes its own dump
mkdir "$tmp/t"
HEAPPROFILE="$tmp/t/p" HEAP_PROFILE_SAMPLE_INTERVAL=1 HEAP_PROFILE_TIME_INTERVAL=3600 \
	HEAP_PROFILE_ALLOCATION_INTERVAL=1048576 "$W" forkthreads >"$tmp/tout" 2>"$tmp/terr" ||
	fail "forkthreads exited $?: $(cat "$tmp/terr")"
eq "parent's threads" "$(sed -n 's/^parent //p' "$tmp/tout")" 2
eq "fork child's threads" "$(sed -n 's/^child //p' "$tmp/tout")" 1
tpid=$(sed -n 's/^pid //p' "$tmp/tout")
grep -q "^Dumping heap profile to $tmp/t/p_$tpid\.0001\.heap ([0-9]* MB allocated" "$tmp/terr" ||
	fail "fork child's threshold dump: $(cat "$tmp/terr")"
# HEAPPROFILE_USE_PID=t: the root uses the pid form too
mkdir "$tmp/u"
HEAPPROFILE="$tmp/u/p" HEAPPROFILE_USE_PID=t "$W" exit >/dev/null 2>&1
upid=$(lsd "$tmp/u" | sed -n 's/^p_\([0-9]*\)\.0001\.heap$/\1/p')
eq "HEAPPROFILE_USE_PID=t files" "$(lsd "$tmp/u" | tr '\n' ' ')" "p_$upid.0001.heap p_$upid.log "
finish
