/* alloc/sys.h — heapalloc's own mappings.  They never go through the
 * exported mmap family (alloc/mmap.c), which the profiler would count as
 * the program's: these are the raw system calls, errno set on failure as
 * glibc's wrappers do. */
#ifndef HA_ALLOC_SYS_H
#define HA_ALLOC_SYS_H
#include <stddef.h>
#include <stdint.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static inline void *ha_sys_mmap(void *a, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, a, len, prot, flags, fd, off);
}
static inline int ha_sys_munmap(void *a, size_t len)
{
	return (int)syscall(SYS_munmap, a, len);
}
static inline void *ha_sys_mremap(void *a, size_t old, size_t len, int flags, void *to)
{
	return (void *)syscall(SYS_mremap, a, old, len, flags, to);
}

/* The kernel's page size: 4 KiB on x86-64; 4, 16 or 64 KiB on arm64.
 * HA_PAGE_SIZE (4 KiB) is only the allocator's own unit; what is handed
 * back to the kernel goes by this, read once (the auxiliary vector: no
 * allocation, no system call). */
static inline size_t ha_sys_page(void)
{
	static size_t pg;
	size_t v = __atomic_load_n(&pg, __ATOMIC_RELAXED);
	if (__builtin_expect(!v, 0)) {
		v = (size_t)getauxval(AT_PAGESZ);
		v = v ? v : 4096;
		__atomic_store_n(&pg, v, __ATOMIC_RELAXED);
	}
	return v;
}

/* Give [p, p + len)'s whole kernel pages back (MADV_DONTNEED), rounded
 * inward: a neighbour sharing a 16 or 64 KiB page keeps its bytes. */
static inline void ha_sys_discard(void *p, size_t len)
{
	uintptr_t pg = ha_sys_page(), lo = ((uintptr_t)p + pg - 1) & ~(pg - 1);
	uintptr_t hi = ((uintptr_t)p + len) & ~(pg - 1);
	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

#endif
