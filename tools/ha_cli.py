# ha_cli.py — the heapalloc command line: one argparse parser per subcommand
# (run, check, growth, symbolize, timeline), bad usage as one stderr line and
# exit 2, and the dispatch to the module that owns each command.  Where the
# library and heapalloc-symbolize are comes from the entry script (main's
# `where`).
import argparse
import os
import sys

import ha_proc
import ha_remote
import ha_run
import ha_symbolize
import ha_textdump

PROG = 'heapalloc'


def err(msg, bare=False):
    sys.stderr.write(('' if bare else PROG + ': ') + msg + '\n')


class Usage(Exception):
    """Bad usage of a command: one line, exit 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise Usage(message)


COMMANDS = """Commands:
  run [OPTIONS] -- PROG ARGS...   run PROG with libheapalloc preloaded and profiling on
  check FILE...                   validate heap profiles (text dumps or .pb.gz)
  growth OLD NEW [--top N] [--binary PROG] [--full-names]
                                  the call sites whose in-use bytes grew most between two dumps
  symbolize ARGS...               heapalloc-symbolize: names, file:line into a .sym.pb.gz
  timeline ARGS...                in-use bytes over a run's dumps
  dump PID [-o FILE] [--format pprof|text]
                                  the heap profile of a running process, read from outside
  top PID [--once | -n N] [--interval SEC] [--rows N] [--older AGE]
                                  a live view of a running process's heap, with ages
  leaks PID [-o FILE] [--stop] [--fail]
                                  sampled live blocks nothing points to, per site
  serve PID ADDR                  /debug/pprof/heap and /allocs of a running process

'heapalloc COMMAND --help' describes each command; man heapalloc has more.
heapalloc --version prints the version.
"""


class TopParser(Parser):
    """The command list as help: argparse's own would list COMMAND twice."""

    def format_help(self):
        return 'usage: %s COMMAND [ARGS...]\n\n%s' % (PROG, COMMANDS)


RUN_EPILOG = """The exit status is PROG's (128+N when signal N killed it; 127 when PROG
cannot be executed).  Sizes take k, M, G, T suffixes (powers of 1024): 512k,
64M, 1G.  A static binary, a setuid program run by another user or an output
directory that is missing or not writable is named before PROG starts."""

CHECK_DESC = """Validate heap profiles against the rules Go pprof and perl pprof enforce:
text dumps (header, bucket lines, MAPPED_LIBRARIES section in /proc/maps
form) and gzipped profile.proto files (.pb.gz: wire format, sample types,
every sample's locations defined).  PREFIX.log and .stats files are checked
for their line shapes.  Prints 'FILE:LINE: what is wrong' for each problem
and exits 1, or 'FILE: ok (...)' for each good file and exits 0."""

GROWTH_DESC = """The call sites whose in-use bytes grew most from dump OLD to dump NEW (two
dumps of one process, text .heap or .pb.gz, raw or symbolised: stacks are
matched by their addresses).  Sampled dumps (heap_v2/R) are unsampled as
pprof does.  Columns: grew, old and new in-use bytes, and the change in
in-use objects; then the site: its first frame outside the standard
libraries (libc, libstdc++, libgcc, heapalloc, Rust's std/alloc/core) with
file:line, its callers, and in brackets the library frames below it, leaf
first.  Frames are named by heapalloc-symbolize unless NEW already is."""


DUMP_DESC = """The heap profile of the running process PID, read from outside: heapalloc
samples every process it runs in (nothing to set; HEAP_PROFILE_SAMPLE_INTERVAL=0
turns it off), and this reads its stack table and books out of the process's
memory (/proc/PID/mem: the same user and ptrace access as a debugger), without
running code in it or stopping it, so a stopped or deadlocked process is read
too.  The profile is the one an in-process dump writes: both sample types,
calibrated to the allocator's exact totals, names and file:line from the
process's own files."""


TOP_DESC = """A live view of the heap of the running process PID, read from outside as
'heapalloc dump' reads it, refreshed every second: in use and allocated
(exact: the allocator's books), RSS, the peak RSS and the highest in use seen,
and the sites with the most bytes in use, with their change since the last
view, the median age of their live bytes and how many of them are older than
--older AGE (default 1h); from the second view on, a last line names the
sites whose old bytes grew since the view before ("growing").  A site is its
first frame of the program's own code with file:line, then its callers.
--once or -n N print plain text for a pipe or a script."""


LEAKS_DESC = """The sampled live blocks of the running process PID that nothing points to,
per site, weighted into estimated bytes with each site's standard error: its
memory is read from outside as a debugger reads it (data and bss of every
mapped object, heaps, thread stacks; interior and unaligned pointers count).
--stop holds every thread for the scan (its registers then count too) and
lets it go; without it the process runs on.  -o FILE writes the same as a
pprof profile (go tool pprof -top FILE).  --fail: exit status 3 when a leak
is found (for a test suite)."""


SERVE_DESC = """Serve the heap of the running process PID as Go's net/http/pprof serves a Go
program's: /debug/pprof/heap (default sample type inuse_space) and
/debug/pprof/allocs (alloc_space), gzipped profile.proto with names, each read
from outside when asked, as 'heapalloc dump' reads it; ?debug=1 the text form.
For a scraper (Parca, Alloy) or 'go tool pprof URL' beside a process that set
nothing: a sidecar in the same PID namespace.  No authentication: bind
127.0.0.1 unless the network is trusted.  Exits when the process does."""


def build_parser():
    top = TopParser(prog=PROG, allow_abbrev=False)
    top.add_argument('--version', action='store_true', help='print the version and exit')
    sub = top.add_subparsers(dest='command', metavar='COMMAND', parser_class=Parser)

    run = sub.add_parser('run', prog=PROG + ' run',
                         usage='%(prog)s [-o PREFIX] [--sample BYTES] [--every-alloc SIZE]\n'
                               '                     [--inuse SIZE] [--time SEC] [--signal SIG]\n'
                               '                     [--format text|pprof|both] -- PROG ARGS...',
                         description='Run PROG with libheapalloc.so preloaded (prepended to\n'
                                     'LD_PRELOAD) and heap profiling on.  PROG need not be\n'
                                     'linked with heapalloc.',
                         epilog=RUN_EPILOG, allow_abbrev=False,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument('-o', '--output', metavar='PREFIX',
                     help='profile file prefix (HEAPPROFILE); default ./heapalloc.PROGNAME')
    for flag, (var, kind, metavar, text) in ha_run.OPTIONS.items():
        run.add_argument(flag, metavar=metavar, dest=var, help='%s (%s)' % (text, var))
    run.add_argument('argv', nargs=argparse.REMAINDER, metavar='PROG ARGS...')

    check = sub.add_parser('check', prog=PROG + ' check', usage='%(prog)s FILE...', description=CHECK_DESC,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    check.add_argument('files', nargs='+', metavar='FILE')

    growth = sub.add_parser('growth', prog=PROG + ' growth', description=GROWTH_DESC,
                            usage='%(prog)s OLD NEW [--top N] [--binary PROG] [--full-names]',
                            formatter_class=argparse.RawDescriptionHelpFormatter,
                            allow_abbrev=False)
    growth.add_argument('old', metavar='OLD')
    growth.add_argument('new', metavar='NEW')
    growth.add_argument('--top', default='10', metavar='N', help='show N sites (default 10)')
    growth.add_argument('--binary', action='append', default=[], metavar='PROG',
                        help='a binary or library to read symbols from instead of the path in '
                             'the dump (matched by file name or build ID); may be repeated')
    growth.add_argument('--full-names', action='store_true',
                        help='C++ and Rust names with their template arguments and parameters')
    dump = sub.add_parser('dump', prog=PROG + ' dump', description=DUMP_DESC,
                          usage='%(prog)s PID [-o FILE] [--format pprof|text]',
                          formatter_class=argparse.RawDescriptionHelpFormatter,
                          allow_abbrev=False)
    dump.add_argument('pid', metavar='PID')
    dump.add_argument('-o', '--output', metavar='FILE',
                      help='where to write it (default heapalloc.PID.pb.gz or .heap; - for stdout)')
    dump.add_argument('--format', default='pprof', metavar='pprof|text',
                      help='pprof (gzipped profile.proto with names, the default) or text '
                           '(the gperftools format of HEAPPROFILE dumps)')
    tp = sub.add_parser('top', prog=PROG + ' top', description=TOP_DESC,
                         usage='%(prog)s PID [--once | -n N] [--interval SEC] [--rows N]\n'
                               '                     [--older AGE]',
                         formatter_class=argparse.RawDescriptionHelpFormatter,
                         allow_abbrev=False)
    tp.add_argument('pid', metavar='PID')
    tp.add_argument('--once', action='store_true', help='print one view as plain text and exit')
    tp.add_argument('-n', dest='count', metavar='N',
                     help='print N views as plain text, one per interval, and exit')
    tp.add_argument('--interval', default='1', metavar='SEC', help='seconds between views (default 1)')
    tp.add_argument('--rows', default='15', metavar='N', help='sites shown (default 15)')
    tp.add_argument('--older', default='1h', metavar='AGE',
                    help='the age past which live bytes count as old: seconds, or a number '
                         'with s, m, h or d (default 1h)')
    lk = sub.add_parser('leaks', prog=PROG + ' leaks', description=LEAKS_DESC,
                        usage='%(prog)s PID [-o FILE] [--stop] [--fail]',
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        allow_abbrev=False)
    lk.add_argument('pid', metavar='PID')
    lk.add_argument('-o', '--output', metavar='FILE', help='also write the leaks as a pprof profile')
    lk.add_argument('--stop', action='store_true',
                    help='stop the process for the scan (consistent; registers count)')
    lk.add_argument('--fail', action='store_true', help='exit status 3 when a leak is found')
    sv = sub.add_parser('serve', prog=PROG + ' serve', description=SERVE_DESC,
                        usage='%(prog)s PID ADDR', allow_abbrev=False,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sv.add_argument('pid', metavar='PID')
    sv.add_argument('addr', metavar='ADDR', help='HOST:PORT to listen on (port 0: any free port)')
    # symbolize and timeline pass every argument on (see main)
    sub.add_parser('symbolize', add_help=False)
    sub.add_parser('timeline', add_help=False)
    return top


def main(argv, where):
    """where: .lib (libheapalloc.so to preload), .tools (heapalloc-symbolize's
    directory), .modules (this file's), .libexec (the private helpers'),
    .version."""
    ha_textdump.HELPER = os.path.join(where.libexec, 'heapalloc-profile')
    if argv and argv[0] == 'symbolize':
        return ha_symbolize.run_passthrough(where.tools, argv[1:], err)
    if argv and argv[0] == 'timeline':
        try:
            import ha_timeline
        except ImportError as e:
            if getattr(e, 'name', None) != 'ha_timeline':
                raise
            err('timeline: the module ha_timeline.py is not installed (looked in %s)' % where.modules)
            return 127
        return ha_timeline.main(argv[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except Usage as e:
        if argv and argv[0] in COMMAND_FUNCS:
            return usage_error(argv[0], str(e))
        err('%s (see heapalloc --help)' % e)
        return 2
    if args.version:
        sys.stdout.write('heapalloc %s\n' % where.version)
        return 0
    if args.command is None:
        sys.stderr.write(parser.format_help())
        return 2
    return COMMAND_FUNCS[args.command](args, where)


def usage_error(cmd, msg):
    err('%s: %s (see heapalloc %s --help)' % (cmd, msg, cmd))
    return 2


def cmd_run(args, where):
    variables, sig = {}, None
    ha_run.HELPER = os.path.join(where.libexec, 'heapalloc-options')
    for flag, (var, kind, metavar, text) in ha_run.OPTIONS.items():
        val = getattr(args, var)
        if val is None:
            continue
        why = ha_run.value_problem(flag, val)
        if why:
            return usage_error('run', why)
        if kind == 'signal':
            sig = ha_run.parse_signal(val)
        variables[var] = val
    if args.argv[:1] == ['--']:
        del args.argv[0]                # PROG ARGS... after '--' (kept by REMAINDER)
    if args.output == '':
        return usage_error('run', 'the prefix is empty')
    if not args.argv:
        return usage_error('run', 'no program to run (heapalloc run [OPTIONS] -- PROG ARGS...)')
    return ha_run.run(args.argv, args.output, variables, sig, where.lib, err)


def pid_of(cmd, s):
    if not s.isdigit() or int(s) <= 0:
        return None
    return int(s)


def cmd_dump(args, where):
    pid = pid_of('dump', args.pid)
    if pid is None:
        return usage_error('dump', 'PID %r is not a process id' % args.pid)
    if args.format not in ('pprof', 'text'):
        return usage_error('dump', '--format %r is not pprof or text' % args.format)
    ha_proc.READER_VERSION = where.version
    return ha_remote.dump(where, pid, args.output, args.format, err)


def cmd_top(args, where):
    pid = pid_of('top', args.pid)
    if pid is None:
        return usage_error('top', 'PID %r is not a process id' % args.pid)
    count = 1 if args.once else 0
    if args.count is not None:
        if not args.count.isdigit() or int(args.count) == 0:
            return usage_error('top', '-n %r is not a positive whole number' % args.count)
        count = int(args.count)
    try:
        interval = float(args.interval)
    except ValueError:
        interval = -1
    if not 0.05 <= interval <= 3600:
        return usage_error('top', '--interval %r is not a number of seconds from 0.05 to 3600'
                           % args.interval)
    if not args.rows.isdigit() or int(args.rows) == 0:
        return usage_error('top', '--rows %r is not a positive whole number' % args.rows)
    older = seconds_of(args.older)
    if older is None:
        return usage_error('top', '--older %r is not an age (seconds, or a number with s, m, '
                           'h or d)' % args.older)
    ha_proc.READER_VERSION = where.version
    return ha_remote.top(where, pid, count, interval, int(args.rows), err, older)


def seconds_of(s):
    """'90', '90s', '15m', '2h', '1.5d' -> whole seconds (>= 0), or None."""
    mult = {'s': 1, 'm': 60, 'h': 3600, 'd': 86400}.get(s[-1:], 1)
    num = s[:-1] if s[-1:] in 'smhd' and s[-1:] else s
    try:
        v = float(num) * mult
    except ValueError:
        return None
    return int(v) if 0 <= v < 1e12 and num.strip() == num else None


def cmd_serve(args, where):
    pid = pid_of('serve', args.pid)
    if pid is None:
        return usage_error('serve', 'PID %r is not a process id' % args.pid)
    ha_proc.READER_VERSION = where.version
    return ha_remote.serve(where, pid, args.addr, err)


def cmd_leaks(args, where):
    pid = pid_of('leaks', args.pid)
    if pid is None:
        return usage_error('leaks', 'PID %r is not a process id' % args.pid)
    ha_proc.READER_VERSION = where.version
    import ha_leaks
    return ha_leaks.leaks(where, pid, args.output, args.stop, args.fail, err)


def cmd_check(args, where):
    import ha_check       # here: a dump or top compiles only what it runs
    return ha_check.check(args.files)


def cmd_growth(args, where):
    if not args.top.isdigit() or int(args.top) == 0:
        return usage_error('growth', '--top %r is not a positive whole number' % args.top)
    import ha_growth
    return ha_growth.growth(where.tools, args.old, args.new, int(args.top), args.binary,
                            args.full_names, err)


COMMAND_FUNCS = {'run': cmd_run, 'check': cmd_check, 'growth': cmd_growth, 'dump': cmd_dump,
                 'top': cmd_top, 'serve': cmd_serve, 'leaks': cmd_leaks}
