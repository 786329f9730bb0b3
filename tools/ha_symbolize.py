# ha_symbolize.py — the one way this command names frames: heapalloc-symbolize
# (tools/symbolize.c: libdw, build IDs, inlined frames, demangled names).
# Finds it beside the heapalloc script, else on PATH; runs it for
# `heapalloc symbolize` and for the commands that show frames.
import os
import shutil
import subprocess
import tempfile

TOOL = 'heapalloc-symbolize'
# its warnings that leave frames as addresses; "no debug info" (names but no
# file:line, as for libc) is left out of what a command passes on
KEEP_WARNING = ('cannot read', 'build ID', 'no loadable segment', 'not used')


def find(tool_dir):
    """The heapalloc-symbolize to run, or None."""
    p = os.path.join(tool_dir, TOOL)
    if os.path.isfile(p) and os.access(p, os.X_OK):
        return p
    return shutil.which(TOOL)


def run_passthrough(tool_dir, args, err):
    """`heapalloc symbolize ARGS`: exec heapalloc-symbolize ARGS."""
    tool = find(tool_dir)
    if not tool:
        err('symbolize: %s not found in %s nor on PATH' % (TOOL, tool_dir))
        return 127
    try:
        os.execv(tool, [tool] + args)
    except OSError as e:
        err('symbolize: cannot execute %s: %s' % (tool, e.strerror))
        return 127


def symbolized(tool_dir, path, binaries):
    """Run heapalloc-symbolize on the dump at path into a temporary file.
    Returns (bytes of the named .pb.gz or None, [warning lines to show])."""
    tool = find(tool_dir)
    if not tool:
        return None, ['%s not found in %s nor on PATH; frames stay addresses' % (TOOL, tool_dir)]
    d = tempfile.mkdtemp(prefix='heapalloc.')
    out = os.path.join(d, 'sym.pb.gz')
    try:
        r = subprocess.run([tool, '-o', out, path] + list(binaries), stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, universal_newlines=True, errors='replace')
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        if r.returncode != 0:
            why = lines[-1] if lines else 'exit status %d' % r.returncode
            return None, ['%s failed (%s); frames stay addresses' % (TOOL, why)]
        with open(out, 'rb') as f:
            data = f.read()
        return data, [l for l in lines if any(k in l for k in KEEP_WARNING)]
    except OSError as e:
        return None, ['cannot run %s: %s; frames stay addresses' % (tool, e.strerror)]
    finally:
        shutil.rmtree(d, ignore_errors=True)
