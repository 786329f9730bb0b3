# ha_run.py — `heapalloc run`: PROG with libheapalloc.so preloaded and the
# profiler's variables set from the options; PROG's output, file descriptors
# and exit status pass through untouched.  Before the run it says in one
# line why no profile can come (a static binary, a setuid program run by
# another user, an output directory that is missing or not writable);
# after it, it lists the files this run wrote.
import os
import pwd
import re
import shutil
import signal
import stat
import struct
import subprocess

import ha_options

# heapalloc-options (tools/options.c): the library's own grammar of the
# variables (alloc/env.c), asked how it reads each value, so that run
# refuses exactly what the library would; set by the command (where.libexec)
HELPER = None


def library_reads(kind, values):
    """How the library reads each of values as a KIND (tools/gen-options'
    names): [the number, or None for junk]."""
    if not HELPER:
        raise RuntimeError('ha_run.HELPER is not set (the path of heapalloc-options)')
    try:
        out = subprocess.run([HELPER, kind] + list(values), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, check=True).stdout.decode().split('\n')
    except (OSError, subprocess.CalledProcessError) as e:
        raise RuntimeError('cannot run %s: %s' % (HELPER, e))
    return [None if v == '-' else int(v) for v in out[:len(values)]]


def parse_signal(s):
    """The library's signal syntax: a number, a name with or without SIG,
    RTMIN+n or RTMAX-n.  Returns the number or None."""
    return library_reads('signal', [s])[0]


# flag -> (variable, metavar): the options run takes.  What each one is and
# its help come from the library's own table (tools/ha_options.py, written
# from prof/session/options.c by tools/gen-options), N there read as the metavar.
FLAGS = (
    ('--sample', 'HEAP_PROFILE_SAMPLE_INTERVAL', 'BYTES'),
    ('--every-alloc', 'HEAP_PROFILE_ALLOCATION_INTERVAL', 'SIZE'),
    ('--inuse', 'HEAP_PROFILE_INUSE_INTERVAL', 'SIZE'),
    ('--time', 'HEAP_PROFILE_TIME_INTERVAL', 'SEC'),
    ('--signal', 'HEAPPROFILESIGNAL', 'SIG'),
    ('--format', 'HEAP_PROFILE_FORMAT', 'FMT'),
)
# flag -> (variable, kind, metavar, help)
OPTIONS = {flag: (var, ha_options.OPTIONS[var][0], metavar,
                  re.sub(r'\bN\b', metavar, ha_options.OPTIONS[var][2]))
           for flag, var, metavar in FLAGS}


WHY = {'size': 'is not a size in bytes (such as 524288, 512k, 64M)',
       'seconds': 'is not a whole number of seconds',
       'signal': 'is not a signal that can be caught (a number or a name such as USR2)',
       'format': 'is not text, pprof or both'}


def value_problem(flag, val):
    """Why val is no good for flag, or None."""
    kind = OPTIONS[flag][1]
    if library_reads(kind, [val])[0] is None:
        return '%s %r %s' % (flag, val, WHY.get(kind, 'is not a %s' % kind))
    return None


def profile_files(prefix):
    """PREFIX.* and PREFIX_PID.* files the library writes: {path: identity}.
    Dumps are written to a .tmp name and renamed, so a rewritten file has a
    new inode as well as a new mtime."""
    d = os.path.dirname(prefix) or '.'
    base = os.path.basename(prefix)
    pat = re.compile(re.escape(base) + r'(?:_[0-9]+)?\.(?:[0-9]{4,}\.(?:heap|pb\.gz|stats)|'
                     r'peak\.(?:heap|pb\.gz)|log)$')
    out = {}
    try:
        names = os.listdir(d)
    except OSError:
        return out
    for n in names:
        if not pat.match(n):
            continue
        p = os.path.join(d, n) if os.path.dirname(prefix) else n
        try:
            st = os.stat(p)
            out[p] = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            pass
    return out


def written_files(prefix, before):
    """Files of this run: those new or changed since the snapshot `before`."""
    base = os.path.basename(prefix)
    out = [p for p, ident in profile_files(prefix).items() if before.get(p) != ident]

    def key(p):
        n = os.path.basename(p)[len(base):]
        m = re.match(r'^(_[0-9]+)?\.(?:([0-9]+)|(peak)|(log))', n)
        pid = int(m.group(1)[1:]) if m and m.group(1) else -1
        if m and m.group(2):
            rank = (0, int(m.group(2)))
        elif m and m.group(3):
            rank = (1, 0)
        else:
            rank = (2, 0)
        return (pid, rank, n)
    return sorted(out, key=key)



# ---- why no profile can come: checked before PROG starts ------------------
def elf_interp(path):
    """True when path is an ELF file with a PT_INTERP (the dynamic loader
    runs, so LD_PRELOAD works), False for one without, None if not ELF."""
    try:
        with open(path, 'rb') as f:
            h = f.read(64)
            if len(h) < 52 or h[:4] != b'\x7fELF' or h[4] not in (1, 2) or h[5] not in (1, 2):
                return None
            end = '<' if h[5] == 1 else '>'
            if h[4] == 2:
                phoff, = struct.unpack_from(end + 'Q', h, 32)
                phentsize, phnum = struct.unpack_from(end + 'HH', h, 54)
            else:
                phoff, = struct.unpack_from(end + 'I', h, 28)
                phentsize, phnum = struct.unpack_from(end + 'HH', h, 42)
            f.seek(phoff)
            ph = f.read(phentsize * phnum)
            return any(struct.unpack_from(end + 'I', ph, k * phentsize)[0] == 3   # PT_INTERP
                       for k in range(phnum) if (k + 1) * phentsize <= len(ph))
    except (OSError, struct.error):
        return None


def has_profiler_inside(path):
    """Whether a static binary carries a heap profiler of its own (libheapalloc.a
    or gperftools read HEAPPROFILE)."""
    try:
        with open(path, 'rb') as f:
            tail = b''
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    return False
                if b'HEAPPROFILE' in tail + chunk:
                    return True
                tail = chunk[-16:]
    except OSError:
        return False


def user_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return 'uid %d' % uid


def secure_exec(path):
    """The reason the loader runs path in secure mode for this user (setuid,
    setgid, file capabilities), or None."""
    try:
        st = os.stat(path)
        if os.statvfs(path).f_flag & os.ST_NOSUID:
            return None
    except OSError:
        return None
    uid, gid = os.getuid(), os.getgid()
    if st.st_mode & stat.S_ISUID and st.st_uid != uid:
        return 'setuid %s' % user_name(st.st_uid)
    if st.st_mode & stat.S_ISGID and st.st_gid != gid:
        return 'setgid (group %d)' % st.st_gid
    if uid != 0:
        try:
            os.getxattr(path, 'security.capability')
            return 'given file capabilities'
        except OSError:
            pass
    return None


def no_profile_reason(path, name, prefix, lib):
    """One line on why PROG will write no profile, or None when it can."""
    interp = elf_interp(path)
    if interp is False and not has_profiler_inside(path):
        return ('%s is statically linked: LD_PRELOAD cannot load %s into it (link it with '
                '-lheapalloc, or libheapalloc.a through heapalloc-static.pc)'
                % (name, os.path.basename(lib)))
    why = secure_exec(path) if interp is not None else None    # the kernel ignores a script's bits
    if why:
        return ('%s is %s and runs as %s: the loader ignores LD_PRELOAD and heapalloc ignores '
                'HEAPPROFILE in such a program (run it as its owner, or a copy without the bit)'
                % (name, why, user_name(os.getuid())))
    d = os.path.dirname(prefix) or '.'
    try:
        gone = os.stat(d).st_nlink == 0         # a working directory since removed
    except OSError:
        gone = True
    if gone or not os.path.isdir(d):
        return 'the output directory %s does not exist (-o %s)' % (d, prefix)
    if not os.access(d, os.W_OK | os.X_OK):
        return 'the output directory %s is not writable by %s (-o %s)' % (d, user_name(os.getuid()), prefix)
    return None


# ---- the run ---------------------------------------------------------------
def run(argv, prefix, variables, sig, lib, err):
    """Run argv under the profiler; PROG's exit status (128+N for signal N,
    127 when it cannot be executed)."""
    if prefix is None:
        prefix = './heapalloc.' + (os.path.basename(argv[0]) or 'prog')
    if not os.path.exists(lib):
        err('run: %s not found (is heapalloc installed?)' % lib)
        return 127
    env = dict(os.environ)
    env.update(variables)
    env['HEAPPROFILE'] = prefix
    old = env.get('LD_PRELOAD', '')
    env['LD_PRELOAD'] = lib + (' ' + old if old.strip() else '')

    path = argv[0] if '/' in argv[0] else shutil.which(argv[0], path=env.get('PATH', os.defpath))
    if not path or os.path.isdir(path) or not os.access(path, os.X_OK):
        why = 'not found' if not path or not os.path.exists(path) else 'not an executable file'
        err('cannot execute %s: %s' % (argv[0], why))
        return 127
    reason = no_profile_reason(path, argv[0], prefix, lib)
    if reason:
        err('no profile will be written: %s' % reason)
    else:
        err('profiling %s: profiles go to %s.* (%s)' % (argv[0], prefix, lib))
    before = profile_files(prefix)
    try:
        child = subprocess.Popen(argv, env=env, close_fds=False)   # PROG gets every fd we got
    except OSError as e:
        err('cannot execute %s: %s' % (argv[0], e.strerror or e))
        return 127
    # The terminal's ^C and ^\ reach PROG directly; a TERM or HUP sent to
    # this wrapper, and the dump signal, are passed on to PROG.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)

    def forward(signo, frame):
        try:
            child.send_signal(signo)
        except OSError:
            pass
    for s in {signal.SIGTERM, signal.SIGHUP} | ({sig} if sig else set()):
        signal.signal(s, forward)
    if sig and not reason:
        err('pid %d: kill -%d %d dumps a profile' % (child.pid, sig, child.pid))
    while True:
        try:
            rc = child.wait()
            break
        except InterruptedError:
            continue
    files = written_files(prefix, before)
    if files:
        err('%d file%s written:' % (len(files), '' if len(files) == 1 else 's'))
        for f in files:
            err('  %s' % f, bare=True)
    elif not reason:
        err('no profile written (dumps happen at exit(), at the thresholds and on the signal)')
    return 128 - rc if rc < 0 else rc
