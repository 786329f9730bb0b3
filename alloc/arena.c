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
 * mimalloc maps through the libc symbol mmap, which is heapalloc's
 * (alloc/mmap.c): every call into it runs inside own()/unown() so that its
 * mappings are never counted as the program's.
 */
#include "alloc/internal.h"
#include <mimalloc.h>
#include <errno.h>
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

void ha_arena_init(void)
{
	/* mimalloc must never print into the profiled program's stderr. */
	mi_option_disable(mi_option_show_errors);
	mi_option_disable(mi_option_verbose);
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
	own();
	mi_free(base);
	unown();
}

void ha_arena_trim(void)
{
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
