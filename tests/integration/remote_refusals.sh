#!/bin/sh
# `heapalloc dump PID` refused by the kernel names the rule that refused
# (tools/ha_proc.py permission_error), one line: another user; Yama's
# ptrace_scope 1, 2 and 3 (3 refuses CAP_SYS_PTRACE too); another PID
# namespace; else a security module or a process that is not dumpable.
# The readings (the target's Uid, our CAP_SYS_PTRACE, the Yama sysctl, the
# PID namespaces) are replaced, as this kernel has no Yama and a root test
# cannot be refused; tests/integration/remote_dump.sh refuses a real other-user reader.
. "$top_srcdir/tests/lib/prof_lib.sh"
PY=${PYTHON3:-$(command -v python3 || true)}
[ -n "$PY" ] || { echo "SKIP: python3 not found"; exit 77; }
out=$("$PY" - "$top_srcdir/tools" "$top_builddir/tools" <<'PYEOF' 2>&1
import errno, os, sys
sys.dont_write_bytecode = True
sys.path[:0] = sys.argv[1:3]    # the modules, and ha_layout.py generated in the build
import ha_proc

me = os.geteuid()
other = me + 1000
E = OSError(errno.EPERM, 'x')
cases = [  # target uid, cap, yama, same ns -> what the line must say
    (other, False, 0, True, 'it runs as uid %d, you are uid %d (reading needs the same user, or CAP_SYS_PTRACE)' % (other, me)),
    (other, False, 1, True, 'it runs as uid %d' % other),
    (me, False, 1, True, 'Yama ptrace_scope is 1, which allows only a parent to read its descendants (sysctl kernel.yama.ptrace_scope=0, or CAP_SYS_PTRACE)'),
    (me, False, 2, True, 'Yama ptrace_scope is 2, which allows only CAP_SYS_PTRACE'),
    (me, True, 3, True, 'Yama ptrace_scope is 3, which allows no reader until reboot'),
    (other, True, 3, True, 'Yama ptrace_scope is 3'),
    (me, True, 1, False, 'refused by a container (another PID namespace) (Operation not permitted)'),
    (me, False, 0, False, 'refused by a container (another PID namespace)'),
    (me, False, 0, True, 'refused by the container or security module (seccomp, AppArmor, SELinux), or the process is not dumpable (setuid) (Operation not permitted)'),
]
bad = 0
for uid, cap, yama, same, want in cases:
    ha_proc._status_field = lambda pid, name, u=uid: [str(u)] * 4 if name == 'Uid' else None
    ha_proc._has_cap_ptrace = lambda c=cap: c
    ha_proc._yama_scope = lambda y=yama: y
    ha_proc._same_pid_ns = lambda pid, s=same: s
    msg = str(ha_proc.permission_error(4242, E))
    if not msg.startswith('permission denied reading process 4242: ') or want not in msg or '\n' in msg:
        print('uid %d cap %s yama %d same ns %s: %r, want %r' % (uid, cap, yama, same, msg, want))
        bad += 1
sys.exit(1 if bad else 0)
PYEOF
) || fail "$out"
finish
