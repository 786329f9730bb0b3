/* alloc/mmap.c — the mmap family's entry points: mmap, mmap64, munmap and
 * mremap, defined here so that the program's own mappings can be profiled
 * (HEAP_PROFILE_MMAP, as gperftools' heap profiler did before 2.17).
 *
 * Off (the default, and whenever profiling is off) each is the bare system
 * call behind one load and branch of ha_hot.mmap_prof, with glibc 2.36's
 * behaviour: errno and MAP_FAILED (-1) on failure, an mmap offset that is
 * not a multiple of 4096 fails with EINVAL before the kernel is asked,
 * mmap64 is mmap, and mremap reads its fifth argument (new_address) only
 * with MREMAP_FIXED or MREMAP_DONTUNMAP, passing NULL otherwise.  Nothing
 * here calls dlsym (it may allocate this early) or the libc symbols.
 *
 * Whose mappings count: only calls that reach these symbols, from a thread
 * that is neither inside mimalloc (ha_mmap_own, set by arena.c) nor inside
 * the profiler (ha_prof_mmap_counts).  heapalloc's own mappings (huge.c,
 * meta.c, the profiler's tables) use ha_sys_* and never come here; the
 * dynamic loader and libc itself map through their internal calls, which
 * do not either.
 *
 * On, a successful mapping of n bytes is charged to the thread's countdown
 * as an allocation of n bytes (ha_charge_mapping: same sampling, same
 * books) and, when sampled, recorded with its stack by ha_prof_sampled; the
 * profiler remembers every counted mapping by its start (prof/mmap_hook.c).
 * munmap forgets the records whose start lies in the range and counts them
 * freed, whole; mremap is a free of the old range and an allocation of the
 * new one.  Never takes an allocator lock; never allocates itself.
 */
#define _GNU_SOURCE 1
#include "alloc/internal.h"
#include <errno.h>
#include <stdarg.h>

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

HA_TLS int ha_mmap_own;

void ha_alloc_mmap_profiling(int on)
{
	__atomic_store_n(&ha_hot.mmap_prof, on, __ATOMIC_RELEASE);
}

/* Does this thread's call count? */
static inline int counts(void)
{
	return !ha_mmap_own && ha_prof_mmap_counts();
}

/* [p, p+len) was just mapped (moved, for mremap) by the program: what it
 * covers is gone, then it is a new allocation. */
static void note_mapped(void *p, size_t len, uint64_t gone)
{
	gone += ha_prof_unmapped(p, len);
	if (gone)
		ha_credit_mapping(gone);
	int sample = ha_charge_mapping(len);
	if (sample)
		sample = ha_prof_sampled(p, len, len);
	ha_prof_mapped(p, len, sample);
}

static HA_COLD void mapped_slow(void *p, size_t len)
{
	if (!counts())
		return;
	int e = errno;
	note_mapped(p, len, 0);
	errno = e;
}

HA_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (HA_UNLIKELY(off & 4095)) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	void *p = ha_sys_mmap(addr, len, prot, flags, fd, off);
	if (HA_UNLIKELY(__atomic_load_n(&ha_hot.mmap_prof, __ATOMIC_RELAXED)) && p != MAP_FAILED)
		mapped_slow(p, len);
	return p;
}

/* The records are forgotten before the range goes back to the kernel (no
 * other thread's mapping can take its place yet); a call the kernel will
 * refuse for its arguments forgets nothing. */
static HA_COLD int munmap_slow(void *addr, size_t len)
{
	if (((uintptr_t)addr & (HA_PAGE_SIZE - 1)) == 0 && len && counts()) {
		int e = errno;
		uint64_t gone = ha_prof_unmapped(addr, len);
		if (gone)
			ha_credit_mapping(gone);
		errno = e;
	}
	return ha_sys_munmap(addr, len);
}

HA_EXPORT int munmap(void *addr, size_t len)
{
	if (HA_UNLIKELY(__atomic_load_n(&ha_hot.mmap_prof, __ATOMIC_RELAXED)))
		return munmap_slow(addr, len);
	return ha_sys_munmap(addr, len);
}

/* mremap fails often by design (growing in place without MREMAP_MAYMOVE),
 * so the old range is forgotten only once the kernel has moved it. */
static HA_COLD void *mremap_slow(void *old, size_t old_len, size_t len, int flags, void *to)
{
	if (!counts())
		return ha_sys_mremap(old, old_len, len, flags, to);
	void *q = ha_sys_mremap(old, old_len, len, flags, to);
	if (q == MAP_FAILED)
		return q;
	int e = errno;
	uint64_t gone = 0;
	if (old_len && !(flags & MREMAP_DONTUNMAP))
		gone = ha_prof_unmapped(old, old_len);
	note_mapped(q, len, gone);
	errno = e;
	return q;
}

HA_EXPORT void *mremap(void *old, size_t old_len, size_t len, int flags, ...)
{
	void *to = NULL;
	if (flags & (MREMAP_FIXED | MREMAP_DONTUNMAP)) {
		va_list ap;
		va_start(ap, flags);
		to = va_arg(ap, void *);
		va_end(ap);
	}
	if (HA_UNLIKELY(__atomic_load_n(&ha_hot.mmap_prof, __ATOMIC_RELAXED)))
		return mremap_slow(old, old_len, len, flags, to);
	return ha_sys_mremap(old, old_len, len, flags, to);
}

/* glibc: mmap64 is mmap on 64-bit targets (off_t is 64 bits). */
_Static_assert(sizeof(off_t) == 8, "mmap64 as an alias of mmap needs a 64-bit off_t");
HA_EXPORT __typeof__(mmap) mmap64 __attribute__((alias("mmap")));
