#!/bin/sh
# tools/ha_names.py, the names growth shows: pprof's short form of demangled
# C++ and Rust names (templates, parameters, return types, qualifiers and
# clone suffixes out; operators, lambdas and anonymous namespaces kept), and
# which frames count as the standard libraries' (by name, by source file, by
# the file the code was loaded from).  Each row: input, then exact output.
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || { echo "SKIP: no python3"; exit 77; }
exec "$py" - "$top_srcdir/tools" <<'PY'
import sys
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
import ha_names

SHORT = [
    ('void std::vector<std::pair<long, std::__cxx11::basic_string<char, std::char_traits<char>, '
     'std::allocator<char> > >, std::allocator<std::pair<long, std::__cxx11::basic_string<char, '
     'std::char_traits<char>, std::allocator<char> > > > >::_M_realloc_insert<std::pair<long, '
     'std::string> const&>(__gnu_cxx::__normal_iterator<std::pair<long, std::string>*, '
     'std::vector<std::pair<long, std::string> > >, std::pair<long, std::string> const&)',
     'std::vector::_M_realloc_insert'),
    ('std::vector<int, std::allocator<int> >::push_back(int const&)', 'std::vector::push_back'),
    ('operator new(unsigned long)', 'operator new'),
    ('operator delete[](void*, unsigned long)', 'operator delete[]'),
    ('std::ostream& operator<< <char>(std::ostream&, Foo const&)', 'operator<<'),
    ('std::function<void ()>::operator()() const', 'std::function::operator()'),
    ('std::map<int, int>::operator[](int&&)', 'std::map::operator[]'),
    ('Foo::operator bool() const', 'Foo::operator bool'),
    ('(anonymous namespace)::worker(int)', '(anonymous namespace)::worker'),
    ('run(int)::{lambda(int)#1}::operator()(int) const', 'run::{lambda(int)#1}::operator()'),
    ('bar(int) [clone .cold]', 'bar'),
    ('shop::Ledger<shop::Order>::add', 'shop::Ledger::add'),
    ('std::unique_ptr<Foo, std::default_delete<Foo> > std::make_unique<Foo>()', 'std::make_unique'),
    ('alloc::raw_vec::RawVec<T,A>::grow_one', 'alloc::raw_vec::RawVec::grow_one'),
    ('<alloc::vec::Vec<u8> as core::ops::drop::Drop>::drop', '<alloc::vec::Vec as core::ops::drop::Drop>::drop'),
    ('<T as alloc::slice::hack::ConvertVec>::to_vec', '<T as alloc::slice::hack::ConvertVec>::to_vec'),
    ('leak_site', 'leak_site'),
    ('0x55d0c0de', '0x55d0c0de'),
]
STANDARD = [  # (name, source, module) -> standard?
    ('std::vector::push_back', '/usr/include/c++/12/bits/stl_vector.h', '/tmp/shop', True),
    ('shop::Ledger::add', '/src/shop.cc', '/tmp/shop', False),
    ('', '', '/lib/x86_64-linux-gnu/libc.so.6', True),
    ('', '', '/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30', True),
    ('', '', '/lib/x86_64-linux-gnu/libgcc_s.so.1', True),
    ('', '', '/work/build/.libs/libheapalloc.so.0.0.0', True),
    ('', '', '/lib64/ld-linux-x86-64.so.2', True),
    ('', '', '/usr/lib/x86_64-linux-gnu/libcrypto.so.3', False),
    ('', '', '/tmp/shop', False),
    ('alloc::raw_vec::RawVec::grow_one', '', '/tmp/rs', True),
    ('<alloc::vec::Vec as core::ops::drop::Drop>::drop', '', '/tmp/rs', True),
    ('core::ptr::drop_in_place', '', '/tmp/rs', True),
    ('std::rt::lang_start', '', '/tmp/rs', True),
    ('__rust_alloc', '', '/tmp/rs', True),
    ('myapp::read_file', '/rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/alloc/src/vec/mod.rs',
     '/tmp/rs', True),
    ('myapp::read_file', '/src/main.rs', '/tmp/rs', False),
    ('malloc', '', '', True),
    ('mallocator', '', '', False),
    ('__libc_start_call_main', '', '', True),
    ('main', '', '', False),
]
bad = 0
for name, want in SHORT:
    got = ha_names.short_name(name)
    if got != want:
        print('FAIL: short_name(%r): got %r, want %r' % (name, got, want))
        bad += 1
for name, source, module, want in STANDARD:
    got = ha_names.is_standard(name, source, module)
    if got != want:
        print('FAIL: is_standard(%r, %r, %r): got %r, want %r' % (name, source, module, got, want))
        bad += 1
print('PASS' if not bad else '%d failure(s)' % bad)
sys.exit(1 if bad else 0)
PY
