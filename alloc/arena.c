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
 * Big-block cache.  Debian's mimalloc 2.0.9 decommits the pages of a freed
 * multi-MiB block and the next allocation faults them back in (~3 us per
 * 4 KiB page here), which makes free+malloc of big blocks ~5x slower than
 * glibc.  Freed blocks of >= 256 KiB are therefore kept (up to 64 MiB in
 * all, at most 64 blocks) and reused for a request they fit within 2x.
 * malloc_trim() empties the cache.
 */
#include "alloc/internal.h"
#include <mimalloc.h>
#include <errno.h>
#include <string.h>

#define LARGE_MAGIC 0x48416c67u      /* "HAlg" */
#define CACHE_MIN ((size_t)256 << 10)
#define CACHE_MAX_BYTES ((size_t)64 << 20)
#define CACHE_SLOTS 64

typedef struct lhdr {
	uint64_t req;        /* requested size | HA_LARGE_SAMPLED | tracked bit */
	uint32_t offset;     /* header address - mimalloc block address */
	uint32_t magic;
} lhdr;

typedef struct cached { void *base; size_t size; } cached;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cached cache[CACHE_SLOTS];
static unsigned cache_n;
static size_t cache_bytes;
static uint64_t large_blocks, large_bytes; /* atomics */

static inline lhdr *hdr_of(const void *p)
{
	return (lhdr *)((uintptr_t)p - HA_LARGE_HDR);
}

void ha_arena_init(void)
{
	/* mimalloc must never print into the profiled program's stderr. */
	mi_option_disable(mi_option_show_errors);
	mi_option_disable(mi_option_verbose);
}

void *ha_arena_span_alloc(size_t bytes)
{
	return mi_malloc_aligned(bytes, HA_PAGE_SIZE);
}

void ha_arena_span_free(void *p)
{
	mi_free(p);
}

static void *cache_take(size_t need)
{
	void *best = NULL;
	if (need < CACHE_MIN || !__atomic_load_n(&cache_n, __ATOMIC_RELAXED))
		return NULL;
	pthread_mutex_lock(&cache_lock);
	unsigned bi = CACHE_SLOTS;
	for (unsigned i = 0; i < cache_n; i++) {
		size_t s = cache[i].size;
		if (s >= need && s / 2 <= need && (bi == CACHE_SLOTS || s < cache[bi].size))
			bi = i;
	}
	if (bi != CACHE_SLOTS) {
		best = cache[bi].base;
		cache_bytes -= cache[bi].size;
		cache[bi] = cache[--cache_n];
	}
	pthread_mutex_unlock(&cache_lock);
	return best;
}

static int cache_put(void *base, size_t size)
{
	if (size < CACHE_MIN || size > CACHE_MAX_BYTES)
		return 0;
	int ok = 0;
	pthread_mutex_lock(&cache_lock);
	if (cache_n < CACHE_SLOTS && cache_bytes + size <= CACHE_MAX_BYTES) {
		cache[cache_n].base = base;
		cache[cache_n].size = size;
		cache_n++;
		cache_bytes += size;
		ok = 1;
	}
	pthread_mutex_unlock(&cache_lock);
	return ok;
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
	if (align <= HA_MIN_ALIGN) {
		base = cache_take(need);
		if (base) {
			if (zero)
				memset((char *)base + HA_LARGE_HDR, 0, n);
		} else {
			base = zero ? mi_zalloc(need) : mi_malloc(need);
		}
		user = base ? (uintptr_t)base + HA_LARGE_HDR : 0;
	} else {
		base = zero ? mi_zalloc_aligned_at(need, align, HA_LARGE_HDR)
			    : mi_malloc_aligned_at(need, align, HA_LARGE_HDR);
		if (!base && align <= ((size_t)1 << 40)) {
			/* mimalloc 2.0.9 refuses the largest alignments: over-allocate. */
			base = zero ? mi_zalloc(need + align) : mi_malloc(need + align);
		}
		user = base ? (((uintptr_t)base + HA_LARGE_HDR + align - 1) & ~(uintptr_t)(align - 1)) : 0;
		if (base && user - HA_LARGE_HDR - (uintptr_t)base > UINT32_MAX) {
			mi_free(base);   /* offset would not fit the header */
			base = NULL;
		}
	}
	if (!base) {
		errno = ENOMEM;
		return NULL;
	}
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
	/* mimalloc knows its own address ranges: check before reading p-16 */
	return ((uintptr_t)p & (HA_MIN_ALIGN - 1)) == 0 && mi_is_in_heap_region(p) &&
	       hdr_of(p)->magic == LARGE_MAGIC;
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
	int aligned = h->offset != 0;
	h->magic = 0;   /* a second free of p now fails the magic check */
	__atomic_fetch_sub(&large_blocks, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&large_bytes, sz, __ATOMIC_RELAXED);
	if (aligned || !cache_put(base, sz))
		mi_free(base);
}

size_t ha_arena_trim(void)
{
	cached out[CACHE_SLOTS];
	unsigned n;
	size_t bytes;
	pthread_mutex_lock(&cache_lock);
	n = cache_n;
	bytes = cache_bytes;
	memcpy(out, cache, n * sizeof *out);
	cache_n = 0;
	cache_bytes = 0;
	pthread_mutex_unlock(&cache_lock);
	for (unsigned i = 0; i < n; i++)
		mi_free(out[i].base);
	mi_collect(true);
	return bytes;
}

void ha_arena_stats(uint64_t *blocks, uint64_t *bytes, uint64_t *cachedb)
{
	*blocks = __atomic_load_n(&large_blocks, __ATOMIC_RELAXED);
	*bytes = __atomic_load_n(&large_bytes, __ATOMIC_RELAXED);
	*cachedb = __atomic_load_n(&cache_bytes, __ATOMIC_RELAXED);
}

void ha_arena_prefork(void)
{
	pthread_mutex_lock(&cache_lock);
}

void ha_arena_postfork(int child)
{
	if (child)
		pthread_mutex_init(&cache_lock, NULL);
	else
		pthread_mutex_unlock(&cache_lock);
}

void *ha_raw_malloc(size_t n)
{
	return mi_malloc(n);
}

void *ha_raw_calloc(size_t n, size_t m)
{
	return mi_calloc(n, m);
}

void ha_raw_free(void *p)
{
	mi_free(p);
}
