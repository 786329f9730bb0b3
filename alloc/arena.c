/* alloc/arena.c — the back-end: everything heapalloc gets from mimalloc.
 *
 * The only includer of <mimalloc.h>.  It hands out
 *   - spans for size classes (page-aligned, returned whole);
 *   - large blocks (> 32 KiB, or over-aligned), each preceded by a 16-byte
 *     header {requested size | flags, offset back to the mimalloc block,
 *     magic} so free() can check the pointer and the profiler can count the
 *     requested size exactly;
 *   - raw memory for internals (the profiler's tables).
 *
 * Blocks of 1 MiB and more without alignment are not mimalloc's: see huge.c.
 *
 * The large cache: a freed large block is not handed back to mimalloc at
 * once but kept, resident (hot), for the next large request of about its
 * size; one idle for HA_DECAY_MS has its pages given back (MADV_DONTNEED)
 * and is kept cold, address space only.  mimalloc 2.0.9 keeps freed large
 * blocks committed: it decommits a segment's free pages only when the
 * thread that owns the segment calls into it again, so a program that
 * went quiet, or kept allocating only from thread caches, kept every byte
 * of a spike (300 MB of 100 KB blocks: all of it, seconds later).  Its
 * options do not help: a decommit delay of 0 decommits at every free
 * (a program that cycles its blocks would fault every page back in) and
 * still leaves the pages of blocks freed by another thread to the owner.
 * Blocks kept here are ours, so they age out whichever thread freed them.
 * Bounds: ha_keep_cap's resident (purge.c; HA_LARGE_HOT_MAX with the opt-in
 * purge thread), the oldest going cold past it at the free that passed
 * it; the idle floor (ha_idle_floor) always stays; HA_LARGE_COLD_MAX of address space (past
 * it blocks go back to mimalloc).
 * A cold block serves a request as a fresh one would: its pages fault in.
 * Records live in meta memory, not in the blocks, so a cold block has no
 * resident page at all.  malloc_trim and the out-of-memory retry give
 * every kept block back to mimalloc.
 *
 * mimalloc maps through the libc symbol mmap, which is heapalloc's
 * (alloc/mmap.c): every call into it runs inside own()/unown() so that its
 * mappings are never counted as the program's.
 */
#include "alloc/internal.h"
#include <mimalloc.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#define LARGE_MAGIC 0x48416c67u      /* "HAlg" */
#define HA_ARENA_RESERVE ((size_t)8 << 30)

typedef struct lhdr {
	uint64_t req;        /* requested size | HA_LARGE_SAMPLED | tracked bit */
	uint32_t offset;     /* header address - mimalloc block address */
	uint32_t magic;
} lhdr;

static ha_counter large_blocks_c, large_bytes_c; /* atomics, own lines */
#define large_blocks (large_blocks_c.v)
#define large_bytes (large_bytes_c.v)

static inline void own(void)
{
	ha_mmap_own++;
}

static inline void unown(void)
{
	ha_mmap_own--;
}

static inline lhdr *hdr_of(const void *p)
{
	return (lhdr *)((uintptr_t)p - HA_LARGE_HDR);
}

/* ---- the large cache ------------------------------------------------------ *
 * Bins of 8 sizes per power of two from 32 KiB: bin i holds blocks whose
 * mimalloc usable size is in [(8 + i % 8) << (12 + i / 8), the next bin's).  Each bin has a
 * hot list (newest at the head, oldest at the tail, linked both ways) and a
 * cold list.  All under large_lock; the madvise of a block going cold is
 * made outside it, with the block on no list. */
#define LBINS 48
#define LBIN_MIN_SHIFT 15
typedef struct lrec {
	uintptr_t base;          /* the mimalloc block (its header at base) */
	size_t bytes;            /* mi_usable_size(base) */
	union {
		struct lrec *next;   /* a cold list, or the free records */
		ha_hot_entry hot;    /* a hot list (lhot) */
	};
} lrec;

static pthread_mutex_t large_lock = PTHREAD_MUTEX_INITIALIZER;
static ha_hot_list lhot_lists[LBINS];
static struct { lrec *cold; } lbin[LBINS];
static size_t lcold_bytes;               /* under large_lock; racy reads */
static lrec *lrec_free;
static size_t lhot_size(const ha_hot_cache *c, unsigned i, const ha_hot_entry *e);
static void lhot_cool(ha_hot_cache *c, unsigned i, ha_hot_entry *e);
/* the hot lists: the decaying cache of alloc/retain.h */
static ha_hot_cache lhot = {
	.lock = &large_lock, .lists = lhot_lists, .nlists = LBINS, .size = lhot_size, .cool = lhot_cool,
};
#define lhot_bytes (lhot.hot)

/* The bin holding blocks of usable size b (>= 32 KiB); LBINS if too big. */
static unsigned bin_of(size_t b)
{
	if (b < ((size_t)1 << LBIN_MIN_SHIFT))
		return LBINS;
	unsigned e = 63u - (unsigned)__builtin_clzll(b);
	unsigned i = (e - LBIN_MIN_SHIFT) * 8 + (unsigned)((b >> (e - 3)) & 7);
	return i < LBINS ? i : LBINS;
}

static lrec *rec_of(ha_hot_entry *e)
{
	return (lrec *)((char *)e - offsetof(lrec, hot));
}

static void hot_unlink(unsigned i, lrec *r)
{
	ha_hot_unlink(&lhot, i, &r->hot, r->bytes);
}

/* The whole pages inside a block: what going cold gives back. */
static void block_pages(const lrec *r, uintptr_t *lo, uintptr_t *hi)
{
	uintptr_t pg = ha_sys_page();     /* the kernel's: what madvise zeroes */
	*lo = (r->base + pg - 1) & ~(pg - 1);
	*hi = (r->base + r->bytes) & ~(pg - 1);
	if (*hi < *lo)
		*hi = *lo;
}

static void block_cool(const lrec *r)
{
	uintptr_t lo, hi;
	block_pages(r, &lo, &hi);
	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static void block_release(lrec *r)
{
	own();
	mi_free((void *)r->base);
	unown();
	ha_lock(&large_lock);
	r->next = lrec_free;
	lrec_free = r;
	ha_unlock(&large_lock);
}

static void cache_decay(uint32_t now, size_t cap);

/* Keep a freed block; 0 when it is not for the cache (the caller gives
 * it to mimalloc). */
static int cache_put(uintptr_t base, size_t bytes)
{
	unsigned i = bin_of(bytes);
	if (i >= LBINS)
		return 0;
	uint32_t now = ha_now_ms();
	size_t cap = ha_keep_cap(__atomic_load_n(&lhot_bytes, __ATOMIC_RELAXED), HA_LARGE_HOT_MAX);
	lrec *r = NULL;
	int hot = 0, cold = 0;
	ha_lock(&large_lock);
	if (!lrec_free) {
		/* a record from meta memory, outside the lock (its own lock
		 * comes after ours, but nothing is gained by holding both) */
		ha_unlock(&large_lock);
		r = ha_meta_alloc(sizeof *r);
		if (!r)
			return 0;
		ha_lock(&large_lock);
	} else {
		r = lrec_free;
		lrec_free = r->next;
	}
	r->base = base;
	r->bytes = bytes;
	if (bytes <= cap) {
		ha_hot_push(&lhot, i, &r->hot, bytes, now);
		hot = 1;
	} else if (lcold_bytes + bytes <= HA_LARGE_COLD_MAX) {
		lcold_bytes += bytes;     /* counted now: the room is ours */
		cold = 1;
	}
	ha_unlock(&large_lock);
	if (hot) {
		cache_decay(now, cap);
		if (__atomic_load_n(&lhot_bytes, __ATOMIC_RELAXED) > HA_IDLE_KEEP)
			ha_purge_kick();
		ha_purge_tick(now);
		return 1;
	}
	block_cool(r);
	ha_keep_forced(now);
	ha_lock(&large_lock);
	if (cold) {
		r->next = lbin[i].cold;
		lbin[i].cold = r;
	}
	ha_unlock(&large_lock);
	if (!cold)
		block_release(r);   /* its pages are gone already */
	return 1;
}

/* A kept block for a request of need bytes (header included), copied to
 * *out (its record goes back to the free records): the newest
 * hot one of the smallest bin that surely fits, else a cold one; bins up to
 * 8 above the request's (2x at most): mimalloc rounds its own sizes up
 * (4 a power of two, and from 512 KiB to whole MiB: 640 KiB becomes 1 MiB,
 * so a block freed by a loop that asks 640 KiB is 3 bins too big for it).
 * The request's own bin may hold smaller blocks: only its head is looked
 * at. */
static int cache_take(size_t need, lrec *out, int *cold)
{
	unsigned lo = bin_of(need);
	if (lo >= LBINS)
		return 0;
	unsigned hi = lo + 8 < LBINS ? lo + 8 : LBINS - 1;
	lrec *r = NULL;
	ha_lock(&large_lock);
	for (unsigned i = lo; i <= hi && !r; i++)
		if (lhot_lists[i].head && rec_of(lhot_lists[i].head)->bytes >= need) {
			r = rec_of(lhot_lists[i].head);
			hot_unlink(i, r);
			*cold = 0;
		}
	for (unsigned i = lo; i <= hi && !r; i++)
		if (lbin[i].cold && lbin[i].cold->bytes >= need) {
			r = lbin[i].cold;
			lbin[i].cold = r->next;
			lcold_bytes -= r->bytes;
			*cold = 1;
		}
	if (r) {
		*out = *r;
		r->next = lrec_free;
		lrec_free = r;
	}
	ha_unlock(&large_lock);
	return r != NULL;
}

static size_t lhot_size(const ha_hot_cache *c, unsigned i, const ha_hot_entry *e)
{
	(void)c;
	(void)i;
	return rec_of((ha_hot_entry *)e)->bytes;
}

/* A block the decay made cold: its pages go, it joins its bin's cold list. */
static void lhot_cool(ha_hot_cache *c, unsigned i, ha_hot_entry *e)
{
	(void)c;
	lrec *r = rec_of(e);
	block_cool(r);
	ha_lock(&large_lock);
	lcold_bytes += r->bytes;
	r->next = lbin[i].cold;
	lbin[i].cold = r;
	ha_unlock(&large_lock);
}

static void cache_decay(uint32_t now, size_t cap)
{
	ha_hot_decay(&lhot, now, cap);
}

int ha_arena_decay(uint32_t now)
{
	if (!__atomic_load_n(&lhot_bytes, __ATOMIC_RELAXED))
		return 0;
	cache_decay(now, ha_keep_cap(__atomic_load_n(&lhot_bytes, __ATOMIC_RELAXED), HA_LARGE_HOT_MAX));
	uint64_t h = __atomic_load_n(&lhot_bytes, __ATOMIC_RELAXED);
	return h > ha_idle_floor(h);
}

uint64_t ha_arena_held_bytes(void)
{
	return __atomic_load_n(&lhot_bytes, __ATOMIC_RELAXED);
}

uint64_t ha_arena_live_bytes(void)
{
	return __atomic_load_n(&large_bytes, __ATOMIC_RELAXED);
}

/* Every cold block back to mimalloc, one at a time outside the lock. */
static void cold_release_all(void)
{
	for (;;) {
		lrec *r = NULL;
		ha_lock(&large_lock);
		for (unsigned i = 0; i < LBINS && !r; i++)
			if ((r = lbin[i].cold) != NULL) {
				lbin[i].cold = r->next;
				lcold_bytes -= r->bytes;
			}
		ha_unlock(&large_lock);
		if (!r)
			return;
		block_release(r);
	}
}

/* Every kept block back to mimalloc, its pages to the kernel first. */
static void cache_drain(void)
{
	cache_decay(ha_now_ms(), 0);
	cold_release_all();
}

void ha_arena_prefork(void)
{
	ha_lock(&large_lock);
}

void ha_arena_postfork(int child)
{
	if (child)
		pthread_mutex_init(&large_lock, NULL);
	else
		ha_unlock(&large_lock);
}

void ha_arena_init(void)
{
	/* mimalloc must never print into the profiled program's stderr. */
	mi_option_disable(mi_option_show_errors);
	mi_option_disable(mi_option_verbose);
}

/* While on, a page mimalloc frees goes back to the kernel at once, not
 * 25 ms later at the owning thread's next call (which an exited thread
 * never makes).  Not always: aligned large blocks go to mimalloc at every
 * free.  The decay steps turn it on and off, nested (a program's tick and
 * the purge thread may overlap). */
void ha_arena_decommit_now(int on)
{
	static int users;
	static long delay = -1;
	if (on) {
		if (__atomic_fetch_add(&users, 1, __ATOMIC_ACQ_REL) == 0) {
			if (__atomic_load_n(&delay, __ATOMIC_RELAXED) < 0)
				__atomic_store_n(&delay, mi_option_get(mi_option_decommit_delay), __ATOMIC_RELAXED);
			mi_option_set(mi_option_decommit_delay, 0);
		}
	} else if (__atomic_sub_fetch(&users, 1, __ATOMIC_ACQ_REL) == 0) {
		mi_option_set(mi_option_decommit_delay, __atomic_load_n(&delay, __ATOMIC_RELAXED));
	}
}

/* A decay step found the caches idle and gave memory back to mimalloc:
 * the cold large blocks go too, and mimalloc frees the segments left empty
 * (abandoned ones of exited threads included) and decommits their pages. */
void ha_arena_collect(void)
{
	cold_release_all();
	own();
	mi_collect(true);
	unown();
}

/* Reserve (not commit) address space as a mimalloc arena, so spans and
 * large blocks keep coming from one stable range: mimalloc's own OS
 * allocations move to fresh addresses each time (an aligned hint that only
 * grows), and every new 64 MiB region costs the page map a leaf that is
 * never freed.  Done at the first span, after a first mi_malloc: our init
 * can run inside another library's constructor before mimalloc's, when its
 * arena code is not ready (mi_malloc is, and initialises mimalloc). */
static void reserve_arena(void)
{
	own();
	mi_free(mi_malloc(1));
	mi_reserve_os_memory(HA_ARENA_RESERVE, false, false);
	unown();
}

void *ha_arena_span_alloc(size_t bytes)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, reserve_arena);
	own();
	void *p = mi_malloc_aligned(bytes, HA_PAGE_SIZE);
	unown();
	return p;
}

void ha_arena_span_free(void *p)
{
	own();
	mi_free(p);
	unown();
}

void *ha_arena_large_alloc(size_t n, size_t align, int zero)
{
	if (n > ((size_t)1 << 47)) {
		errno = ENOMEM;
		return NULL;
	}
	size_t need = n + HA_LARGE_HDR;
	void *base = NULL;
	uintptr_t user;
	if (align <= HA_MIN_ALIGN &&
	    (__atomic_load_n(&lhot_bytes, __ATOMIC_RELAXED) | __atomic_load_n(&lcold_bytes, __ATOMIC_RELAXED))) {
		int cold = 0;
		lrec r;
		if (cache_take(need, &r, &cold)) {
			base = (void *)r.base;
			if (cold)
				ha_keep_refault(r.bytes);
			if (zero) {
				/* a cold block's whole pages read zero already */
				uintptr_t lo = 0, hi = 0, u = r.base + HA_LARGE_HDR, e = u + n;
				if (cold)
					block_pages(&r, &lo, &hi);
				lo = lo > u ? lo : u;
				hi = hi < e ? hi : e;
				if (lo >= hi)
					lo = hi = u;   /* zero it all */
				memset((void *)u, 0, lo - u);
				memset((void *)hi, 0, e - hi);
			}
			user = (uintptr_t)base + HA_LARGE_HDR;
			goto made;
		}
	}
	ha_keep_refault(need);
	own();
	if (align <= HA_MIN_ALIGN) {
		base = zero ? mi_zalloc(need) : mi_malloc(need);
		user = base ? (uintptr_t)base + HA_LARGE_HDR : 0;
	} else {
		base = zero ? mi_zalloc_aligned_at(need, align, HA_LARGE_HDR)
			    : mi_malloc_aligned_at(need, align, HA_LARGE_HDR);
		if (!base && align <= ((size_t)1 << 31)) {
			/* mimalloc 2.0.9 refuses the largest alignments: over-allocate.
			 * Only while the offset to the aligned block surely fits the
			 * header's 32 bits: beyond that (an alignment of 1 TiB, say)
			 * success depended on where the mapping happened to land,
			 * about one call in 256, so such requests now always fail. */
			base = zero ? mi_zalloc(need + align) : mi_malloc(need + align);
		}
		user = base ? (((uintptr_t)base + HA_LARGE_HDR + align - 1) & ~(uintptr_t)(align - 1)) : 0;
		if (base && user - HA_LARGE_HDR - (uintptr_t)base > UINT32_MAX) {
			mi_free(base);   /* offset would not fit the header */
			base = NULL;
		}
	}
	unown();
	if (!base) {
		errno = ENOMEM;
		return NULL;
	}
made:;
	lhdr *h = hdr_of((void *)user);
	h->req = 0;
	h->offset = (uint32_t)(user - HA_LARGE_HDR - (uintptr_t)base);
	h->magic = LARGE_MAGIC;
	__atomic_fetch_add(&large_blocks, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&large_bytes, mi_usable_size(base), __ATOMIC_RELAXED);
	return (void *)user;
}

int ha_arena_is_large(const void *p)
{
	return ((uintptr_t)p & (HA_MIN_ALIGN - 1)) == 0 && hdr_of(p)->magic == LARGE_MAGIC;
}

size_t ha_arena_large_usable(const void *p)
{
	const lhdr *h = hdr_of(p);
	void *base = (char *)h - h->offset;
	return mi_usable_size(base) - h->offset - HA_LARGE_HDR;
}

uint64_t *ha_arena_large_req(void *p)
{
	return &hdr_of(p)->req;
}

void ha_arena_large_free(void *p)
{
	lhdr *h = hdr_of(p);
	void *base = (char *)h - h->offset;
	size_t sz = mi_usable_size(base);
	h->magic = 0;   /* a second free of p now fails the magic check */
	__atomic_fetch_sub(&large_blocks, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&large_bytes, sz, __ATOMIC_RELAXED);
	if (h->offset == 0 && cache_put((uintptr_t)base, sz))
		return;
	own();
	mi_free(base);
	unown();
}

void ha_arena_trim(void)
{
	cache_drain();
	own();
	mi_collect(true);
	unown();
}

void ha_arena_stats(uint64_t *blocks, uint64_t *bytes)
{
	*blocks = __atomic_load_n(&large_blocks, __ATOMIC_RELAXED);
	*bytes = __atomic_load_n(&large_bytes, __ATOMIC_RELAXED);
}

void *ha_raw_malloc(size_t n)
{
	own();
	void *p = mi_malloc(n);
	unown();
	return p;
}

void *ha_raw_calloc(size_t n, size_t m)
{
	own();
	void *p = mi_calloc(n, m);
	unown();
	return p;
}

void ha_raw_free(void *p)
{
	own();
	mi_free(p);
	unown();
}

/* Bytes mimalloc has committed from the system, by its own count. */
uint64_t ha_arena_committed(void)
{
	size_t elapsed, user, sys, rss, peak_rss, commit, peak_commit, faults;
	mi_process_info(&elapsed, &user, &sys, &rss, &peak_rss, &commit, &peak_commit, &faults);
	return commit;
}

/* Resident bytes of the hot cached blocks (a block's untouched tail is not:
 * mimalloc's usable size is past the request).  mincore under the lock:
 * for the stats, a few hundred blocks at most (HA_LARGE_HOT_MAX). */
uint64_t ha_arena_cache_resident(void)
{
	uint64_t b = 0;
	ha_lock(&large_lock);
	for (unsigned i = 0; i < LBINS; i++)
		for (ha_hot_entry *e = lhot_lists[i].head; e; e = e->next)
			b += ha_resident(rec_of(e)->base, rec_of(e)->base + rec_of(e)->bytes);
	ha_unlock(&large_lock);
	return b;
}

void ha_arena_free_ranges(ha_free_range_fn *add, void *ctx)
{
	ha_lock(&large_lock);
	for (unsigned i = 0; i < LBINS; i++) {
		for (ha_hot_entry *e = lhot_lists[i].head; e; e = e->next)
			add(ctx, rec_of(e)->base, rec_of(e)->base + rec_of(e)->bytes);
		for (const lrec *r = lbin[i].cold; r; r = r->next)
			add(ctx, r->base, r->base + r->bytes);
	}
	ha_unlock(&large_lock);
}

void ha_arena_cache_bytes(uint64_t *hot, uint64_t *cold)
{
	*hot = __atomic_load_n(&lhot_bytes, __ATOMIC_RELAXED);
	*cold = __atomic_load_n(&lcold_bytes, __ATOMIC_RELAXED);
}
