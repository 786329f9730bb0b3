#!/bin/sh
# alloc_symbols.sh — libheapalloc.so exports the malloc API, the C++
# operators, the mmap family, pipe2, glibc's __libc_* aliases, heapalloc_* (the
# root a reader outside finds, heapalloc_root, among them) and the gperftools
# heap-profiler API, and nothing else (everything internal is hidden, and no
# mimalloc/xxhash/libunwind symbol leaks out).  Every required name must be
# there too.  Env: HA_LIB (from Makefile.am's AM_TESTS_ENVIRONMENT).
lib=${HA_LIB:-}
[ -n "$lib" ] && [ -f "$lib" ] || { echo "HARD ERROR: HA_LIB='$lib' is not a file"; exit 99; }
command -v nm >/dev/null 2>&1 || { echo "SKIP: nm not installed"; exit 77; }

syms=$(nm -D --defined-only "$lib" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' | sort -u)
[ -n "$syms" ] || { echo "HARD ERROR: nm listed no symbols in $lib"; exit 99; }

api='malloc free free_sized free_aligned_sized calloc realloc reallocarray memalign posix_memalign aligned_alloc
valloc pvalloc malloc_usable_size malloc_trim mallopt mallinfo mallinfo2 malloc_stats'
ops='_Znwm _Znam _ZnwmRKSt9nothrow_t _ZnamRKSt9nothrow_t _ZnwmSt11align_val_t
_ZnamSt11align_val_t _ZnwmSt11align_val_tRKSt9nothrow_t _ZnamSt11align_val_tRKSt9nothrow_t
_ZdlPv _ZdaPv _ZdlPvm _ZdaPvm _ZdlPvRKSt9nothrow_t _ZdaPvRKSt9nothrow_t
_ZdlPvSt11align_val_t _ZdaPvSt11align_val_t _ZdlPvmSt11align_val_t _ZdaPvmSt11align_val_t
_ZdlPvSt11align_val_tRKSt9nothrow_t _ZdaPvSt11align_val_tRKSt9nothrow_t'
# the mmap family (alloc/mmap.c): HEAP_PROFILE_MMAP profiles the program's mappings
maps='mmap mmap64 munmap mremap'
# pipe2: refuses libunwind's validation pipe at its set-up (prof/capture/unw_pipe.c)
pipes='pipe2'
aliases='__libc_malloc __libc_free __libc_calloc __libc_realloc __libc_memalign'
prof='HeapProfilerStart HeapProfilerStop HeapProfilerDump IsHeapProfilerRunning GetHeapProfile
heapalloc_root'
# every function the public header declares HEAPALLOC_API is required too
hdr=${top_srcdir:-.}/include/heapalloc.h
[ -f "$hdr" ] || { echo "HARD ERROR: $hdr not found"; exit 99; }
public=$(sed -n 's/^HEAPALLOC_API[^(]*[ *]\([A-Za-z_][A-Za-z0-9_]*\)(.*/\1/p' "$hdr")
[ -n "$public" ] || { echo "HARD ERROR: no HEAPALLOC_API functions found in $hdr"; exit 99; }

status=0
# 1. nothing unexpected
for s in $syms; do
	case " $(echo $api $ops $maps $pipes $prof $public) " in *" $s "*) continue ;; esac
	case $s in
	__libc_malloc|__libc_free|__libc_calloc|__libc_realloc|__libc_memalign) continue ;;
	__libc_valloc|__libc_pvalloc|__libc_mallinfo|__libc_mallinfo2|__libc_mallopt) continue ;;
	__libc_malloc_trim|__libc_malloc_usable_size|__libc_malloc_stats) continue ;;
	cfree|malloc_info) continue ;; # other glibc malloc-API names
	heapalloc_*) continue ;;
	esac
	echo "FAIL: unexpected exported symbol: $s"
	status=1
done
# 2. everything required
for s in $(echo $api $ops $maps $pipes $aliases $prof $public | tr " " "\n" | sort -u); do
	echo "$syms" | grep -qx -- "$s" || { echo "FAIL: required symbol not exported: $s"; status=1; }
done
[ $status = 0 ] && echo "ok: $(echo "$syms" | wc -l) exported symbols, all expected"
exit $status
