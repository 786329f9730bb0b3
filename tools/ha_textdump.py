# ha_textdump.py — the gperftools heap-profile text format
# (PREFIX.NNNN.heap): one parser that reads a dump and notes every departure
# from the shapes Go pprof and perl pprof accept (header, bucket lines,
# MAPPED_LIBRARIES in /proc/maps form), and pprof's unsampling of
# heap_v2/R lines (heapalloc-profile's).  ha_check reports the problems; ha_dump reads the stacks.
import re
import subprocess

HEADER_RE = re.compile(r'^heap profile: +([0-9]+): +([0-9]+) \[ *([0-9]+): +([0-9]+)\] @ '
                       r'(heapprofile|heap_v2/([0-9]+))$')
BUCKET_RE = re.compile(r'^ *([0-9]+): +([0-9]+) \[ *([0-9]+): +([0-9]+)\] @((?: 0x[0-9a-f]+)+)$')
MAP_RE = re.compile(r'^([0-9a-f]+)-([0-9a-f]+) ([r-][w-][x-][ps]) ([0-9a-f]+) '
                    r'([0-9a-f]+:[0-9a-f]+) ([0-9]+)(?: +(.*))?$')


def bucket_problem(line):
    """Why a bucket line does not have the shape both pprofs accept."""
    if ' ]' in line:
        return 'space before "]" (perl pprof drops the line)'
    if ']@' in line or '@0x' in line:
        return 'no space around "@" (Go pprof rejects the file)'
    if re.search(r'0X|0x[0-9a-fA-F]*[A-F]', line):
        return 'address not lowercase hex with 0x'
    if re.match(r'^ *[0-9]+: +[0-9]+ \[ *[0-9]+: +[0-9]+\] @ *$', line):
        return 'no addresses'
    if re.match(r'^ *[0-9]+:[0-9]', line) or re.search(r'\[ *[0-9]+:[0-9]', line):
        return 'no space after ":" (perl pprof needs one)'
    if line != line.rstrip():
        return 'trailing white space'
    return 'not "N: N [N: N] @ 0x... 0x..."'


def show(s, n=60):
    s = s.rstrip('\n')
    return repr(s[:n] + ('...' if len(s) > n else ''))


class TextProfile:
    def __init__(self):
        self.lines = 0
        self.header = None      # (io, ib, ao, ab, rate); rate 1 = exact
        self.buckets = []       # (io, ib, ao, ab, (addr, ...), lineno)
        self.maps = []          # (start, end, perms, offset, path)


def parse_text(path, data, problems):
    """Parse and validate a text dump; append (line, message) to problems."""
    P = TextProfile()
    if data.startswith(b'\xef\xbb\xbf'):
        problems.append((1, 'byte order mark before the header (Go pprof rejects the file)'))
        data = data[3:]
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError as e:
        ln = data[:e.start].count(b'\n') + 1
        problems.append((ln, 'not UTF-8 text'))
        text = data.decode('utf-8', 'replace')
    lines = text.split('\n')
    if lines and lines[-1] == '':
        lines.pop()
    elif lines:
        problems.append((len(lines), 'no newline at the end of the file'))
    P.lines = len(lines)
    if not lines:
        problems.append((1, 'empty file: no "heap profile:" header'))
        return P
    m = HEADER_RE.match(lines[0])
    if not m:
        why = 'bad header %s: want "heap profile: N: N [N: N] @ heap_v2/R" or "@ heapprofile"' % show(lines[0])
        if lines[0].startswith('%'):
            why = 'a %s line before the header (Go pprof rejects the file)' % show(lines[0], 20)
        problems.append((1, why))
    else:
        rate = int(m.group(6)) if m.group(6) is not None else 1
        if m.group(6) is not None and rate == 0:
            problems.append((1, 'heap_v2/0: the sampling interval must be at least 1'))
            rate = 1
        P.header = tuple(int(m.group(k)) for k in range(1, 5)) + (rate,)
    n = 1
    while n < len(lines) and lines[n] != '':
        l = lines[n]
        b = BUCKET_RE.match(l)
        if not b:
            if l.startswith('MAPPED_LIBRARIES:'):
                problems.append((n + 1, 'no blank line before MAPPED_LIBRARIES:'))
                break
            problems.append((n + 1, 'bad bucket line: %s: %s' % (bucket_problem(l), show(l))))
        else:
            io, ib, ao, ab = (int(b.group(k)) for k in range(1, 5))
            if io == 0 and ib != 0:
                problems.append((n + 1, 'in-use count 0 with %d bytes (Go pprof rejects the file)' % ib))
            if ao == 0 and ab != 0:
                problems.append((n + 1, 'allocated count 0 with %d bytes (Go pprof rejects the file)' % ab))
            addrs = tuple(int(a, 16) for a in b.group(5).split())
            P.buckets.append((io, ib, ao, ab, addrs, n + 1))
        n += 1
    if P.header and not any(ln > 1 for ln, _ in problems):
        sums = tuple(sum(b[k] for b in P.buckets) for k in range(4))
        if sums != P.header[:4]:
            problems.append((1, 'header totals %d: %d [%d: %d] are not the sums of the lines %d: %d [%d: %d]'
                             % (P.header[:4] + sums)))
    # the blank line, then MAPPED_LIBRARIES:
    if n >= len(lines) or lines[n] == '' and n + 1 >= len(lines):
        problems.append((min(n + 1, len(lines)), 'no MAPPED_LIBRARIES: section'))
        return P
    if lines[n] == '':
        n += 1
    if lines[n] != 'MAPPED_LIBRARIES:':
        problems.append((n + 1, 'want "MAPPED_LIBRARIES:", got %s' % show(lines[n])))
    n += 1
    for k in range(n, len(lines)):
        l = lines[k].rstrip(' ')
        m = MAP_RE.match(l)
        if not m:
            problems.append((k + 1, 'bad mapping line %s: want "start-end perms offset dev inode path"'
                             % show(lines[k])))
            continue
        start, end, off = int(m.group(1), 16), int(m.group(2), 16), int(m.group(4), 16)
        perms = m.group(3)
        if perms[3] == 's':
            problems.append((k + 1, 'shared mapping "%s" not normalised to "%sp" (Go pprof mis-parses it)'
                             % (perms, perms[:3])))
        if start >= end:
            problems.append((k + 1, 'mapping start 0x%x not below its end 0x%x' % (start, end)))
        P.maps.append((start, end, perms, off, m.group(7) or ''))
    return P


# heapalloc-profile, whose `unsample` is pprof's scaling of heap_v2/R lines
# (prof/capture/sampler.c, the one implementation, with the small-x series the naive
# 1 - e^(-x) lacks): set from the command's libexec directory (ha_cli.py).
HELPER = None


class UnsampleError(Exception):
    pass


def unsample_pairs(pairs, rate):
    """pprof's scaling of sampled (count, bytes) pairs at rate R (spec
    section 4), as integers, computed by heapalloc-profile; UnsampleError
    with a one-line reason when it cannot run."""
    pairs = list(pairs)
    if not pairs:
        return []
    if not HELPER:
        raise UnsampleError('unsampling heap_v2/%d lines needs heapalloc-profile (run as heapalloc)'
                            % rate)
    text = ''.join('%d %d\n' % (c, b) for c, b in pairs).encode()
    try:
        p = subprocess.run([HELPER, 'unsample', str(rate)], input=text, capture_output=True,
                           timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UnsampleError('cannot run %s: %s' % (HELPER, getattr(e, 'strerror', None) or e))
    out = p.stdout.split()
    if p.returncode != 0 or len(out) != 2 * len(pairs):
        msg = p.stderr.decode('utf-8', 'replace').strip().splitlines()
        raise UnsampleError(msg[-1] if msg else '%s exited %d' % (HELPER, p.returncode))
    return [(int(out[2 * i]), int(out[2 * i + 1])) for i in range(len(pairs))]
