# ha_names.py — how a frame is shown: demangled C++ and Rust names
# shortened as pprof shows them (template arguments, parameter lists,
# return types and cv-qualifiers elided: std::vector<int>::push_back(int
# const&) is std::vector::push_back), and which frames belong to the
# standard libraries (libc, libstdc++, libgcc, heapalloc itself, Rust's
# std/alloc/core), so a site can be led by the first frame of the program's
# own code.
import os
import re

# operator tokens, longest first, so operator<<= is not read as operator<
OPERATORS = sorted(('new[]', 'delete[]', 'new', 'delete', 'co_await', '()', '[]', '->*', '->',
                    '<=>', '<<=', '>>=', '<<', '>>', '<=', '>=', '==', '!=', '&&', '||', '++',
                    '--', '+=', '-=', '*=', '/=', '%=', '&=', '|=', '^=', '<', '>', '+', '-',
                    '*', '/', '%', '^', '&', '|', '~', '!', '=', ','), key=len, reverse=True)
TAIL_RE = re.compile(r'^(?:\s*(?:const|volatile|&&|&|noexcept|\[clone [^\]]*\]))*\s*$')


def _skip(name, i, open_, close):
    """Index past the group opened at name[i], nesting counted."""
    depth = 0
    while i < len(name):
        c = name[i]
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def short_name(name):
    """pprof's short form of a demangled name; other names come back as they are."""
    if not name or name.startswith('0x'):
        return name
    if name.startswith('<'):
        # Rust's <Type as Trait>::method: shorten inside the brackets too
        end = _skip(name, 0, '<', '>')
        inner = name[1:end - 1]
        a, sep, b = inner.partition(' as ')
        head = short_name(a) + (sep + short_name(b) if sep else '')
        return '<' + head + '>' + short_name(name[end:]) if end < len(name) else '<' + head + '>'
    out = []
    i, n = 0, len(name)
    while i < n:
        c = name[i]
        if name.startswith('operator', i) and (i == 0 or not (name[i - 1].isalnum() or name[i - 1] == '_')):
            j = i + 8
            k = j + (1 if j < n and name[j] == ' ' else 0)
            op = next((o for o in OPERATORS if name.startswith(o, k)), None)
            if op is not None:
                out.append(name[i:k] + op)
                i = k + len(op)
            else:
                # a conversion operator: operator bool, operator std::string
                j = k
                while j < n and name[j] not in '(<':
                    j += 1
                out.append('operator ' + short_name(name[k:j]))
                i = j
            continue
        if c == '<':
            i = _skip(name, i, '<', '>')
        elif c == '(':
            if name.startswith('(anonymous namespace)', i):
                out.append('(anonymous namespace)')
                i += len('(anonymous namespace)')
            else:
                i = _skip(name, i, '(', ')')
                if TAIL_RE.match(name[i:]):
                    break
        elif c == '{':
            j = _skip(name, i, '{', '}')     # {lambda(int)#1}: kept whole
            out.append(name[i:j])
            i = j
        elif c == '[' and name.startswith('[clone', i):
            break
        elif c == ' ':
            if TAIL_RE.match(name[i:]):
                break
            if name[i + 1:i + 2] not in ('<', '('):
                out = []                      # what came before was a return type
            i += 1
        else:
            out.append(c)
            i += 1
    return ''.join(out).strip() or name


# The standard libraries, by the file a frame's code was loaded from ...
STD_FILE_RE = re.compile(r'^(?:libc|libm|libdl|libpthread|librt|ld-linux[-.\w]*|ld|libstdc\+\+|'
                         r'libgcc_s|libheapalloc|libunwind(?:-[\w]+)?)(?:[-.][\w.]*)?\.so(?:\.[\w.]*)?$')
# ... by the source file it came from (templates and generics inlined into
# the program: libstdc++'s headers, Rust's library/ sources) ...
STD_SRC_RE = re.compile(r'(?:^|/)(?:include/c\+\+/|bits/stl_|library/(?:std|alloc|core)/src/|'
                        r'rustc/[0-9a-f]+/library/)')
# ... and by name, for binaries without debug info and static links.
STD_NAME_RE = re.compile(r'^(?:<?(?:std|alloc|core|__gnu_cxx|__cxxabiv1)::|operator new|operator delete|'
                         r'__rust_|__rg_|__rdl_|__libc_|_dl_|_IO_|_start$|__cxa_|heapalloc_|ha_|'
                         r'(?:malloc|calloc|realloc|reallocarray|free|cfree|memalign|valloc|pvalloc|'
                         r'aligned_alloc|posix_memalign|strdup|strndup|mmap|mmap64|mremap|'
                         r'HeapProfilerDump)$)')


def is_standard(name, source, module):
    """Whether a frame is the standard libraries' own (not the program's)."""
    if module and STD_FILE_RE.match(os.path.basename(module)):
        return True
    if source and STD_SRC_RE.search(source):
        return True
    return bool(name) and not name.startswith('0x') and bool(STD_NAME_RE.match(name))
