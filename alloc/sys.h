/* alloc/sys.h — heapalloc's own mappings.  They never go through the
 * exported mmap family (alloc/mmap.c), which the profiler would count as
 * the program's: these are the raw system calls, errno set on failure as
 * glibc's wrappers do. */
#ifndef HA_ALLOC_SYS_H
#define HA_ALLOC_SYS_H
#include <stddef.h>
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

#endif
