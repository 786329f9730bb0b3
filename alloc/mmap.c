/* alloc/mmap.c — the mmap family's entry points: mmap, mmap64, munmap and
 * mremap, defined here so that the program's own mappings can be profiled
 * (HEAP_PROFILE_MMAP, as gperftools' heap profiler did before 2.17).
 *
 * Off (the default, and whenever profiling is off) each is the bare system
 * call behind a load and branch of ha_mmap_own (mmap, munmap) and of
 * ha_hot.mmap_prof, with glibc 2.36's
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
 * profiler remembers every counted mapping by its start (prof/capture/mmap_hook.c).
 * munmap forgets the records whose start lies in the range and counts them
 * freed, whole; mremap is a free of the old range and an allocation of the
 * new one.  Never takes an allocator lock; never allocates itself.
 *
 * mimalloc's own mappings (made inside it: ha_mmap_own) are kept as a list
 * of ranges, so that the statistics can count their resident pages
 * (ha_alloc_arena_ranges: mimalloc commits more than it touches, and keeps
 * a reserve).  Their lock (own_lock) is a leaf, taken only around the list.
 */
#define _GNU_SOURCE 1
#include "alloc/internal.h"
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

HA_TLS int ha_mmap_own;

/* ---- mimalloc's mappings ------------------------------------------------ */
/* Ranges mimalloc has mapped and not unmapped, merged where they touch
 * (an 8 GiB reserve and a few segments: far fewer than OWN_MAX); one that
 * does not fit is not kept, and its pages count as "other" in the stats. */
#define OWN_MAX 256
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { uintptr_t lo, hi; } own_tab[OWN_MAX];
static unsigned own_n;

/* Take [lo, hi) out of the list.  own_lock held. */
static void own_cut(uintptr_t lo, uintptr_t hi)
{
	for (unsigned i = 0; i < own_n;) {
		uintptr_t a = own_tab[i].lo, b = own_tab[i].hi;
		if (b <= lo || a >= hi) {
			i++;
			continue;
		}
		if (a < lo && b > hi) {            /* a hole in the middle */
			own_tab[i].hi = lo;
			if (own_n < OWN_MAX) {
				own_tab[own_n].lo = hi;
				own_tab[own_n++].hi = b;
			}
			return;
		}
		if (a < lo) {
			own_tab[i++].hi = lo;
		} else if (b > hi) {
			own_tab[i++].lo = hi;
		} else {
			own_tab[i] = own_tab[--own_n];   /* covered: gone */
		}
	}
}

static HA_COLD void own_mapped(void *p, size_t len, int add)
{
	uintptr_t pg = ha_sys_page(), lo = (uintptr_t)p, hi = lo + ((len + pg - 1) & ~(pg - 1));
	ha_lock(&own_lock);
	own_cut(lo, hi);
	if (add) {
		unsigned i = 0;
		while (i < own_n && own_tab[i].hi != lo && own_tab[i].lo != hi)
			i++;
		if (i < own_n) {
			if (own_tab[i].hi == lo)
				own_tab[i].hi = hi;
			else
				own_tab[i].lo = lo;
		} else if (own_n < OWN_MAX) {
			own_tab[own_n].lo = lo;
			own_tab[own_n++].hi = hi;
		}
	}
	ha_unlock(&own_lock);
}

uint64_t ha_resident(uintptr_t lo, uintptr_t hi)
{
	static long pg;
	if (!pg)
		pg = sysconf(_SC_PAGESIZE);
	uint64_t v[512];          /* mincore's bytes, bit 0 each: 8 pages a word */
	uint64_t n = 0;
	lo &= ~(uintptr_t)(pg - 1);
	while (lo < hi) {
		size_t len = hi - lo < sizeof v * (size_t)pg ? hi - lo : sizeof v * (size_t)pg;
		size_t np = (len + (size_t)pg - 1) / (size_t)pg;
		memset((char *)v + np, 0, (8 - np % 8) % 8);
		if (mincore((void *)lo, len, (unsigned char *)v) == 0)
			for (size_t i = 0; i < (np + 7) / 8; i++)
				/* the 8 bits summed into the top byte */
				n += ((v[i] & 0x0101010101010101ull) * 0x0101010101010101ull) >> 56;
		lo += len;
	}
	return n * (uint64_t)pg;
}

unsigned ha_alloc_arena_ranges(uintptr_t (*out)[2], unsigned cap)
{
	ha_lock(&own_lock);
	unsigned n = own_n;
	for (unsigned i = 0; i < n && i < cap; i++) {
		out[i][0] = own_tab[i].lo;
		out[i][1] = own_tab[i].hi;
	}
	ha_unlock(&own_lock);
	return n;
}

void ha_mmap_prefork(void)
{
	ha_lock(&own_lock);
}

void ha_mmap_postfork(int child)
{
	if (child)
		pthread_mutex_init(&own_lock, NULL);
	else
		ha_unlock(&own_lock);
}

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
	if (HA_UNLIKELY(ha_mmap_own) && p != MAP_FAILED)
		own_mapped(p, len, 1);
	else if (HA_UNLIKELY(__atomic_load_n(&ha_hot.mmap_prof, __ATOMIC_RELAXED)) && p != MAP_FAILED)
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
	if (HA_UNLIKELY(ha_mmap_own)) {
		int r = ha_sys_munmap(addr, len);
		if (r == 0)
			own_mapped(addr, len, 0);
		return r;
	}
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
