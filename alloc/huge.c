/* alloc/huge.c — blocks of 1 MiB and more: carved from reserved regions,
 * freed pages kept resident up to a budget, mremap for realloc.
 *
 * Why not mimalloc: it unmaps a freed multi-MiB block's segment, and the
 * next allocation faults every page back in; a committed arena keeps every
 * page resident for good instead.  Why not one mapping per block: freed
 * mappings cannot merge, so a cached one is rarely the right size, and
 * resizing it with mremap drops pages that the next block faults back in.
 *
 * So huge blocks come from regions, like a page heap:
 *   - a region is one anonymous MAP_NORESERVE mapping of 64 MiB .. 1 GiB
 *     (each new one as big as all the others together, at least 4x the
 *     request that needed it).  Two bitmaps per region, one bit per 4 KiB
 *     page: busy (in a block, or being released) and dirty (may be
 *     resident: the page was in a block since it was last released).
 *     Free space merges by itself: it is just the clear busy bits.
 *   - a block is a run of pages with a 16-byte header before the user's
 *     pointer (the same layout as arena.c's; magic HUGE_MAGIC_R), which
 *     holds the requested size and the block's length in pages.
 *   - allocation picks, over every free run that fits, the window (at the
 *     run's start or end) with the fewest clean pages — the pages that
 *     would fault — and among equals the tightest run.  calloc zeroes only
 *     the window's dirty pages: clean ones come zeroed from the kernel.
 *   - freed pages stay resident (dirty) for reuse, within a budget
 *     (cache_budget: the rule and its reasons are alloc/retain.h's, from
 *     the recent peak of huge bytes in use, which decays by 1/128 at every
 *     huge free, so a program that shrinks sees its budget follow it down).  Past the
 *     budget the highest-addressed free dirty pages go back with
 *     MADV_DONTNEED, down to 7/8 of it (the address space stays, clean); a
 *     region with no block left is unmapped whole.  Once no huge block has
 *     been allocated or freed for HA_DECAY_MS, free dirty pages past
 *     the idle floor (ha_idle_floor) go back too (the decay step), so a
 *     program that is done with its big blocks does not keep up to 256 MiB
 *     of them for good.  malloc_trim() releases
 *     every free dirty page and unmaps every empty region; so does the
 *     out-of-memory retry (ha_release_cached).
 *     The budget's shape trades faults against RSS: about as many faults
 *     as a cache that never gives pages back, at a peak RSS near glibc's
 *     (bench/ malloc-large, 20 live blocks of 5-25 MiB).
 *   - blocks bigger than 256 MiB, or when no region can be reserved (an
 *     address-space limit), are their own mapping (magic HUGE_MAGIC),
 *     unmapped when freed.
 *   - realloc: a region block shrinks in place (the tail becomes free
 *     dirty pages) and grows in place when the pages after it are free;
 *     otherwise its pages move by mremap(MREMAP_DONTUNMAP) to a mapping of
 *     their own, which then grows by mremap — never a copy.  An own
 *     mapping is resized with mremap.
 * Never calls malloc.  One lock for the regions and no syscall under it:
 * regions are mapped (and their slot's bitmaps taken from meta memory)
 * before it; pages to release are marked busy under it, released outside,
 * then marked free and clean; an empty region leaves the table under it
 * and is unmapped after.
 */
#define _GNU_SOURCE 1   /* mremap */
#include "alloc/internal.h"
#include "alloc/bitmap.h"
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

#define HUGE_MAGIC 0x48416867u     /* "HAhg": a mapping of its own */
#define HUGE_MAGIC_R 0x48416872u   /* "HAhr": pages of a region */
#define PG HA_PAGE_SIZE
#define REGION_MIN ((size_t)64 << 20)
#define REGION_MAX ((size_t)1 << 30)
#define REGION_ROUND ((size_t)2 << 20)
#define REGION_WORDS (REGION_MAX / PG / 64)
#define SUM_WORDS (REGION_WORDS / 64)     /* a summary bit per bitmap word */
#define REGION_BLOCK_MAX (REGION_MAX / 4)   /* bigger blocks: own mapping */
#define NREGIONS 64

typedef struct hhdr {
	uint64_t req;         /* requested size | flags (profiling) */
	uint32_t pages;       /* block (or mapping) length / 4 KiB */
	uint32_t magic;
} hhdr;

typedef struct hregion {
	uintptr_t base;
	size_t pages;         /* 0: slot unused */
	size_t used;          /* busy pages */
	size_t fdirty;        /* free and dirty pages */
	size_t top;           /* pages from here on were never busy: free, clean */
	uint64_t *busy, *dirty;   /* meta memory, REGION_WORDS each, kept */
	uint64_t *full, *empty;   /* after busy: which busy words are all 1 / all 0 */
} hregion;

static pthread_mutex_t huge_lock = PTHREAD_MUTEX_INITIALIZER;
static hregion regions[NREGIONS];
static size_t region_bytes;                /* reserved, all regions */
static size_t free_dirty;                  /* pages, all regions (atomic reads) */
static size_t recent_peak;                 /* bytes; see header */
static uint64_t huge_blocks, huge_bytes;   /* live; atomics */
static uint32_t huge_used_ms;              /* ms clock of the last alloc or free */
static size_t last_freed;                  /* bytes of the region block freed last */

/* ---- regions (all under huge_lock) -------------------------------------- */

static inline hhdr *hhdr_of(const void *p)
{
	return (hhdr *)((uintptr_t)p - HA_LARGE_HDR);
}

/* Whole kernel pages (a multiple of PG).  On a kernel whose page is
 * larger than PG (arm64's 16 or 64 KiB) every block has its own mapping:
 * the regions hand out and madvise PG-sized pages. */
static size_t map_len(size_t n)
{
	size_t pg = ha_sys_page() > PG ? ha_sys_page() : PG;
	return (n + HA_LARGE_HDR + pg - 1) & ~(pg - 1);
}

static hregion *region_of(uintptr_t a)
{
	for (unsigned r = 0; r < NREGIONS; r++)
		if (regions[r].pages && a - regions[r].base < regions[r].pages * PG)
			return &regions[r];
	return NULL;
}

/* Busy bits [i, i + n) set to v, the summaries kept exact for the words
 * touched: the run search skips 64 whole busy or free words a step. */
static void busy_mark(hregion *R, size_t i, size_t n, int v)
{
	if (!n)
		return;
	if (v)
		ha_bits_set(R->busy, i, n);
	else
		ha_bits_clear(R->busy, i, n);
	for (size_t w = i >> 6, last = (i + n - 1) >> 6; w <= last; w++) {
		uint64_t x = R->busy[w], bit = (uint64_t)1 << (w & 63);
		R->full[w >> 6] = x == ~(uint64_t)0 ? R->full[w >> 6] | bit : R->full[w >> 6] & ~bit;
		R->empty[w >> 6] = !x ? R->empty[w >> 6] | bit : R->empty[w >> 6] & ~bit;
	}
}

/* First page in [i, end) whose busy bit is `want`, else end. */
static size_t busy_next(const hregion *R, size_t i, size_t end, int want)
{
	if (i >= end)
		return end;
	uint64_t w = (want ? R->busy[i >> 6] : ~R->busy[i >> 6]) & (~(uint64_t)0 << (i & 63));
	size_t j = i >> 6;
	if (!w) {
		/* the next word that is not all of the other value */
		j = ha_bits_next(want ? R->empty : R->full, j + 1, (end + 63) >> 6, 0);
		if (j >= (end + 63) >> 6)
			return end;
		w = want ? R->busy[j] : ~R->busy[j];
	}
	size_t r = j * 64 + (size_t)__builtin_ctzll(w);
	return r < end ? r : end;
}

static void take_pages(hregion *R, size_t i, size_t n)
{
	size_t d = ha_bits_count(R->dirty, i, n);
	busy_mark(R, i, n, 1);
	R->used += n;
	if (i + n > R->top)
		R->top = i + n;
	R->fdirty -= d;
	free_dirty -= d;
}

/* Pages [i, i+n) become free; dirty: they may be resident. */
static void give_pages(hregion *R, size_t i, size_t n, int dirty)
{
	busy_mark(R, i, n, 0);
	R->used -= n;
	if (dirty) {
		/* busy until now, so none of them was counted in fdirty */
		ha_bits_set(R->dirty, i, n);
		R->fdirty += n;
		free_dirty += n;
	} else {
		ha_bits_clear(R->dirty, i, n);
	}
}

/* Clean pages in [i, i + n), exact when <= limit: the bitmap up to top,
 * all of them past it. */
static size_t clean_in(const hregion *R, size_t i, size_t n, size_t limit)
{
	size_t past = i + n > R->top ? i + n - (i > R->top ? i : R->top) : 0;
	if (past > limit)
		return past;
	return past + ha_bits_count_clear_upto(R->dirty, i, n - past, limit - past);
}

/* The window of n pages that faults least (see header); NULL if none.
 * The scan stops at a region's top: what lies past it is one free run. */
static hregion *region_pick(size_t n, size_t *at)
{
	hregion *best = NULL;
	size_t best_clean = (size_t)-1, best_run = (size_t)-1;
	for (unsigned r = 0; r < NREGIONS; r++) {
		hregion *R = &regions[r];
		if (!R->pages || R->pages - R->used < n)
			continue;
		size_t top = R->top;
		for (size_t i = 0; i < R->pages;) {
			size_t a = busy_next(R, i, top, 0);
			if (a == R->pages)
				break;
			size_t b = busy_next(R, a, top, 1);
			if (b == top)
				b = R->pages;
			i = b;
			if (b - a < n)
				continue;
			/* counted only while they could still win */
			size_t cf = clean_in(R, a, n, best_clean);
			size_t cb = b - a == n ? cf
				: clean_in(R, b - n, n, cf < best_clean ? cf : best_clean);
			size_t c = cf <= cb ? cf : cb;
			if (c < best_clean || (c == best_clean && b - a < best_run)) {
				best = R;
				best_clean = c;
				best_run = b - a;
				*at = cf <= cb ? a : b - n;
				if (!c && b - a == n)
					return best;
			}
		}
	}
	return best;
}

/* Reserve a new region able to hold n pages; 0 if the kernel refuses. */
static int region_add(size_t n)
{
	size_t need = n * PG, len = __atomic_load_n(&region_bytes, __ATOMIC_RELAXED);
	if (len < REGION_MIN)
		len = REGION_MIN;
	if (len < 4 * need)
		len = 4 * need;
	len = (len + REGION_ROUND - 1) & ~(REGION_ROUND - 1);
	if (len > REGION_MAX)
		len = REGION_MAX;
	void *m = ha_sys_mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return 0;
	/* bitmaps for a slot that has none yet come from meta memory, taken
	 * before the lock (a racy look: at worst 64 KiB of meta go unused) */
	uint64_t *nb = NULL, *nd = NULL;
	int have = 0;
	for (unsigned r = 0; r < NREGIONS && !have; r++)
		have = !__atomic_load_n(&regions[r].pages, __ATOMIC_RELAXED) && regions[r].busy;
	if (!have) {
		nb = ha_meta_alloc((REGION_WORDS + 2 * SUM_WORDS) * sizeof(uint64_t));
		nd = ha_meta_alloc(REGION_WORDS * sizeof(uint64_t));
	}
	ha_lock(&huge_lock);
	hregion *R = NULL;
	for (unsigned r = 0; r < NREGIONS; r++)
		if (!regions[r].pages && (!R || (!R->busy && regions[r].busy)))
			R = &regions[r];
	if (R && !R->busy && nb && nd) {
		R->busy = nb;
		R->dirty = nd;
		R->full = nb + REGION_WORDS;
		R->empty = R->full + SUM_WORDS;
	} else if (R && R->busy) {
		memset(R->busy, 0, len / PG / 8);
		memset(R->dirty, 0, len / PG / 8);
	}
	if (R && R->busy) {
		memset(R->full, 0, SUM_WORDS * sizeof(uint64_t));
		memset(R->empty, 0xff, SUM_WORDS * sizeof(uint64_t));
	}
	if (!R || !R->busy) {
		ha_unlock(&huge_lock);
		ha_sys_munmap(m, len);
		return 0;
	}
	R->base = (uintptr_t)m;
	R->pages = len / PG;
	R->used = 0;
	R->fdirty = 0;
	R->top = 0;
	region_bytes += len;
	ha_unlock(&huge_lock);
	return 1;
}

/* The free dirty bytes the regions may keep now (alloc/retain.h). */
static size_t cache_budget(void)
{
	size_t pk = __atomic_load_n(&recent_peak, __ATOMIC_RELAXED);
	size_t use = __atomic_load_n(&huge_bytes, __ATOMIC_RELAXED);
	size_t keep = ha_keep_cap(free_dirty * PG, ha_huge_dirty_max(pk, use));
	return ha_huge_budget(pk, use, __atomic_load_n(&last_freed, __ATOMIC_RELAXED), keep);
}

uint64_t ha_huge_held_bytes(void)
{
	return (uint64_t)__atomic_load_n(&free_dirty, __ATOMIC_RELAXED) * PG;
}

uint64_t ha_huge_live_bytes(void)
{
	return __atomic_load_n(&huge_bytes, __ATOMIC_RELAXED);
}

/* Give free dirty pages back to the kernel: all of them (all != 0: also
 * unmaps empty regions); else, idle, down to its idle floor; else down to
 * 7/8 of the budget.  Returns bytes released. */
static size_t release(int all, int idle)
{
	size_t done = 0;
	for (;;) {
		ha_lock(&huge_lock);
		size_t budget = idle ? ha_idle_floor(__atomic_load_n(&free_dirty, __ATOMIC_RELAXED) * PG) : cache_budget();
		if (!all && free_dirty * PG <= budget) {
			ha_unlock(&huge_lock);
			return done;
		}
		size_t want = all ? (size_t)-1 : free_dirty - (idle ? budget : budget / 8 * 7) / PG;
		/* the highest-addressed region with free dirty pages, or (all)
		 * any empty one */
		hregion *R = NULL;
		for (unsigned r = 0; r < NREGIONS; r++) {
			hregion *Q = &regions[r];
			if (!Q->pages)
				continue;
			if (all && !Q->used) {
				R = Q;
				break;
			}
			if (Q->fdirty && (!R || Q->base > R->base))
				R = Q;
		}
		if (!R) {
			ha_unlock(&huge_lock);
			return done;
		}
		if (!R->used) {
			/* nothing lives here: unmap it whole */
			void *base = (void *)R->base;
			size_t len = R->pages * PG;
			done += R->fdirty * PG;
			free_dirty -= R->fdirty;
			region_bytes -= len;
			R->pages = 0;
			ha_unlock(&huge_lock);
			ha_sys_munmap(base, len);
			continue;
		}
		/* the last free dirty page, and free pages before it */
		size_t d = R->top;   /* nothing past it is dirty */
		int found = 0;
		while (d && !found) {
			size_t w = (d - 1) >> 6;
			uint64_t x = R->dirty[w] & ~R->busy[w];
			if (d & 63)
				x &= ((uint64_t)1 << (d & 63)) - 1;
			if (x) {
				d = w * 64 + 63 - (size_t)__builtin_clzll(x);
				found = 1;
			} else {
				d = w * 64;
			}
		}
		if (!found) {   /* fdirty says otherwise: never seen */
			ha_unlock(&huge_lock);
			return done;
		}
		size_t a = d, lo = want > d ? 0 : d + 1 - want;
		while (a > lo && !(R->busy[(a - 1) >> 6] & ((uint64_t)1 << ((a - 1) & 63))))
			a--;
		size_t n = d + 1 - a;
		size_t dn = ha_bits_count(R->dirty, a, n);
		take_pages(R, a, n);
		ha_unlock(&huge_lock);
		madvise((void *)(R->base + a * PG), n * PG, MADV_DONTNEED);
		done += dn * PG;
		ha_lock(&huge_lock);
		give_pages(R, a, n, 0);
		ha_unlock(&huge_lock);
	}
}

/* ---- blocks --------------------------------------------------------------- */

static void *finish(void *base, size_t len, uint32_t magic)
{
	void *user = (char *)base + HA_LARGE_HDR;
	hhdr *h = hhdr_of(user);
	h->req = 0;
	h->pages = (uint32_t)(len / PG);
	h->magic = magic;
	__atomic_fetch_add(&huge_blocks, 1, __ATOMIC_RELAXED);
	size_t now = __atomic_add_fetch(&huge_bytes, len, __ATOMIC_RELAXED);
	if (now > __atomic_load_n(&recent_peak, __ATOMIC_RELAXED))
		__atomic_store_n(&recent_peak, now, __ATOMIC_RELAXED);  /* racy max: a hint */
	return user;
}

static void *region_alloc(size_t len, int zero)
{
	size_t n = len / PG, at = 0;
	hregion *R;
	for (int tries = 0;; tries++) {
		ha_lock(&huge_lock);
		R = region_pick(n, &at);
		if (R)
			break;
		ha_unlock(&huge_lock);
		if (tries || !region_add(n))
			return NULL;
	}
	size_t clean = n - ha_bits_count(R->dirty, at, n);
	take_pages(R, at, n);
	huge_used_ms = ha_now_ms();
	ha_unlock(&huge_lock);
	if (clean)
		ha_keep_refault(clean * PG);
	char *base = (char *)(R->base + at * PG);
	if (zero) {
		/* the window's bits are ours while the block lives */
		for (size_t i = at, end = at + n; i < end;) {
			size_t a = ha_bits_next(R->dirty, i, end, 1);
			if (a == end)
				break;
			size_t b = ha_bits_next(R->dirty, a, end, 0);
			memset((char *)(R->base + a * PG), 0, (b - a) * PG);
			i = b;
		}
	}
	return base;
}

void *ha_huge_alloc(size_t n, int zero)
{
	if (n > ((size_t)1 << 46)) {
		errno = ENOMEM;
		return NULL;
	}
	size_t len = map_len(n);
	void *base = len <= REGION_BLOCK_MAX && ha_sys_page() <= PG ? region_alloc(len, zero) : NULL;
	if (base)
		return finish(base, len, HUGE_MAGIC_R);
	base = ha_sys_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED) {
		errno = ENOMEM;
		return NULL;
	}
	return finish(base, len, HUGE_MAGIC);
}

int ha_huge_is(const void *p)
{
	if (((uintptr_t)p & (PG - 1)) != HA_LARGE_HDR)
		return 0;
	uint32_t m = hhdr_of(p)->magic;
	return m == HUGE_MAGIC || m == HUGE_MAGIC_R;
}

size_t ha_huge_usable(const void *p)
{
	return (size_t)hhdr_of(p)->pages * PG - HA_LARGE_HDR;
}

uint64_t *ha_huge_req(void *p)
{
	return &hhdr_of(p)->req;
}

void ha_huge_free(void *p)
{
	hhdr *h = hhdr_of(p);
	size_t len = (size_t)h->pages * PG;
	uintptr_t base = (uintptr_t)p - HA_LARGE_HDR;
	uint32_t magic = h->magic;
	h->magic = 0;     /* a second free of p fails the magic check */
	__atomic_fetch_sub(&huge_blocks, 1, __ATOMIC_RELAXED);
	size_t now = __atomic_sub_fetch(&huge_bytes, len, __ATOMIC_RELAXED);
	if (magic != HUGE_MAGIC_R) {
		ha_sys_munmap((void *)base, len);
		return;
	}
	ha_lock(&huge_lock);
	hregion *R = region_of(base);
	give_pages(R, (base - R->base) / PG, len / PG, 1);
	__atomic_store_n(&last_freed, len, __ATOMIC_RELAXED);
	size_t pk = __atomic_load_n(&recent_peak, __ATOMIC_RELAXED);
	pk -= pk / 128;
	__atomic_store_n(&recent_peak, pk > now ? pk : now, __ATOMIC_RELAXED);
	int over = free_dirty * PG > cache_budget();
	uint32_t ms = ha_now_ms();
	huge_used_ms = ms;
	ha_unlock(&huge_lock);
	if (over) {
		ha_keep_forced(ms);
		release(0, 0);
	}
	if (__atomic_load_n(&free_dirty, __ATOMIC_RELAXED) * PG > HA_IDLE_KEEP)
		ha_purge_kick();
	ha_purge_tick(ms);
}

int ha_huge_decay(uint32_t now)
{
	uint64_t d = __atomic_load_n(&free_dirty, __ATOMIC_RELAXED) * PG;
	if (!d || d <= ha_idle_floor(d))
		return 0;
	if ((uint32_t)(now - __atomic_load_n(&huge_used_ms, __ATOMIC_RELAXED)) >= HA_DECAY_MS)
		release(0, 1);
	d = __atomic_load_n(&free_dirty, __ATOMIC_RELAXED) * PG;
	return d > ha_idle_floor(d);
}

/* A region block's pages move to a mapping of their own of len bytes;
 * the region keeps its range, now free and clean.  NULL if the kernel
 * refuses (p untouched). */
static void *move_out(void *p, size_t old, size_t len)
{
	uintptr_t base = (uintptr_t)p - HA_LARGE_HDR;
	/* new_address NULL: without MREMAP_FIXED the kernel takes it as a hint */
	void *m = ha_sys_mremap((void *)base, old, old, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, NULL);
	if (m == MAP_FAILED && errno == EINVAL) {
		/* a kernel before 5.7: move, then map the hole again unless
		 * someone else's mapping took it (then it stays busy, lost) */
		void *g = ha_sys_mremap((void *)base, old, len, MREMAP_MAYMOVE, NULL);
		if (g == MAP_FAILED)
			return NULL;
		void *back = ha_sys_mmap((void *)base, old, PROT_READ | PROT_WRITE, MAP_PRIVATE |
				  MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
		if (back == (void *)base) {
			ha_lock(&huge_lock);
			hregion *R = region_of(base);
			give_pages(R, (base - R->base) / PG, old / PG, 0);
			ha_unlock(&huge_lock);
		} else if (back != MAP_FAILED) {
			ha_sys_munmap(back, old);
		}
		hhdr_of((char *)g + HA_LARGE_HDR)->magic = HUGE_MAGIC;
		hhdr_of((char *)g + HA_LARGE_HDR)->pages = (uint32_t)(len / PG);
		return (char *)g + HA_LARGE_HDR;
	}
	if (m == MAP_FAILED)
		return NULL;
	/* The range left behind reads zero on Linux, but an emulator may
	 * drop it from its own map: qemu-user 7.2 then ignores MADV_DONTNEED
	 * there, and pages release() marks clean keep their bytes.  Mapping
	 * it afresh (the range is still ours: no race) makes it plain. */
	ha_sys_mmap((void *)base, old, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
	void *g = ha_sys_mremap(m, old, len, MREMAP_MAYMOVE, NULL);
	if (g == MAP_FAILED) {
		/* put the pages back over the (empty) range they left */
		if (ha_sys_mremap(m, old, old, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)base) == MAP_FAILED)
			ha_fatal("huge realloc: cannot move pages back", p);
		return NULL;
	}
	ha_lock(&huge_lock);
	hregion *R = region_of(base);
	give_pages(R, (base - R->base) / PG, old / PG, 0);
	ha_unlock(&huge_lock);
	hhdr *h = hhdr_of((char *)g + HA_LARGE_HDR);
	h->magic = HUGE_MAGIC;
	h->pages = (uint32_t)(len / PG);
	return (char *)g + HA_LARGE_HDR;
}

/* Resize a huge block to n (>= HA_HUGE_MIN) in place or by moving its
 * pages; NULL (p untouched) if the kernel refuses. */
void *ha_huge_realloc(void *p, size_t n)
{
	hhdr *h = hhdr_of(p);
	size_t old = (size_t)h->pages * PG, len = map_len(n);
	if (n > ((size_t)1 << 46))
		return NULL;
	if (len == old)
		return p;
	uintptr_t base = (uintptr_t)p - HA_LARGE_HDR;
	void *q = NULL;
	if (h->magic == HUGE_MAGIC_R) {
		int over = 0;
		ha_lock(&huge_lock);
		hregion *R = region_of(base);
		size_t i = (base - R->base) / PG, o = old / PG, l = len / PG;
		if (l < o) {
			give_pages(R, i + l, o - l, 1);
			over = free_dirty * PG > cache_budget();
			q = p;
		} else if (i + l <= R->pages && busy_next(R, i + o, i + l, 1) == i + l) {
			take_pages(R, i + o, l - o);
			q = p;
		}
		ha_unlock(&huge_lock);
		if (q)
			h->pages = (uint32_t)l;
		else
			q = move_out(p, old, len);
		if (over)
			release(0, 0);
	} else {
		void *m = ha_sys_mremap((void *)base, old, len, MREMAP_MAYMOVE, NULL);
		if (m != MAP_FAILED) {
			q = (char *)m + HA_LARGE_HDR;
			hhdr_of(q)->pages = (uint32_t)(len / PG);
		}
	}
	if (!q)
		return NULL;
	if (len > old)
		__atomic_fetch_add(&huge_bytes, len - old, __ATOMIC_RELAXED);
	else
		__atomic_fetch_sub(&huge_bytes, old - len, __ATOMIC_RELAXED);
	return q;
}

size_t ha_huge_trim(void)
{
	return release(1, 0);
}

void ha_huge_stats(uint64_t *blocks, uint64_t *bytes, uint64_t *cached)
{
	*blocks = __atomic_load_n(&huge_blocks, __ATOMIC_RELAXED);
	*bytes = __atomic_load_n(&huge_bytes, __ATOMIC_RELAXED);
	*cached = __atomic_load_n(&free_dirty, __ATOMIC_RELAXED) * PG;
}

uint64_t ha_huge_resident(void)
{
	uintptr_t r[NREGIONS][2];
	ha_lock(&huge_lock);
	for (int i = 0; i < NREGIONS; i++) {
		r[i][0] = regions[i].base;
		r[i][1] = regions[i].pages ? regions[i].base + regions[i].pages * PG : 0;
	}
	ha_unlock(&huge_lock);
	uint64_t b = 0;
	for (int i = 0; i < NREGIONS; i++)
		if (r[i][1])
			b += ha_resident(r[i][0], r[i][1]);
	return b;
}

/* The large cache's lock comes first (internal.h's order): it is taken
 * here so that fork's handlers in init.c need no line of their own. */
void ha_huge_prefork(void)
{
	ha_arena_prefork();
	ha_lock(&huge_lock);
}

void ha_huge_postfork(int child)
{
	if (child)
		pthread_mutex_init(&huge_lock, NULL);
	else
		ha_unlock(&huge_lock);
	ha_arena_postfork(child);
}
