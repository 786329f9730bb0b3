/* alloc/huge.c — blocks of 1 MiB and more: mmap'd, cached, mremap'd.
 *
 * Why not mimalloc: Debian's mimalloc 2.0.9 unmaps a freed multi-MiB block's
 * segment and the next allocation faults every page back in (~3 us per
 * 4 KiB page here).  On a loop that frees and re-allocates 5-25 MiB blocks
 * that ran 1.2 s against glibc's 0.32 s.  A committed mimalloc arena fixed
 * the speed (0.06 s) but kept every page resident for good: malloc_trim()
 * could return nothing.  So huge blocks are ours:
 *   - each is its own mapping; a 16-byte header before the block (the same
 *     layout as arena.c's, magic HUGE_MAGIC) holds the requested size and
 *     the mapping's length in pages;
 *   - freed mappings are kept in a small cache (at most HUGE_CACHE_BYTES,
 *     oldest evicted first) and reused: the best fit within 2x, else the
 *     largest one resized with mremap(2), which moves page tables and keeps
 *     resident pages resident — only the extra pages fault;
 *   - realloc between huge sizes is an mremap, never a copy;
 *   - malloc_trim() unmaps the whole cache.
 * Never calls malloc.  One lock, for the cache only, and no syscall under
 * it: mappings are taken out of the cache first, then resized or unmapped.
 */
#define _GNU_SOURCE 1   /* mremap */
#include "alloc/internal.h"
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_MAGIC 0x48416867u     /* "HAhg" */
#define HUGE_CACHE_BYTES ((size_t)64 << 20)
#define HUGE_CACHE_SLOTS 32

typedef struct hhdr {
	uint64_t req;         /* requested size | flags (profiling) */
	uint32_t pages;       /* mapping length / 4 KiB */
	uint32_t magic;
} hhdr;

typedef struct hcached {
	void *base;
	size_t len;
	uint64_t age;
} hcached;

static pthread_mutex_t huge_lock = PTHREAD_MUTEX_INITIALIZER;
static hcached hcache[HUGE_CACHE_SLOTS];
static unsigned hcache_n;
static size_t hcache_bytes;
static uint64_t hcache_clock;
static uint64_t huge_blocks, huge_bytes;   /* live; atomics */

static inline hhdr *hhdr_of(const void *p)
{
	return (hhdr *)((uintptr_t)p - HA_LARGE_HDR);
}

static size_t map_len(size_t n)
{
	return (n + HA_LARGE_HDR + HA_PAGE_SIZE - 1) & ~(HA_PAGE_SIZE - 1);
}

/* Take the best cached mapping for len bytes: a fit within 2x, else the
 * largest.  *got_len is its length.  NULL if the cache is empty. */
static void *cache_take(size_t len, size_t *got_len)
{
	if (!__atomic_load_n(&hcache_n, __ATOMIC_RELAXED))
		return NULL;
	pthread_mutex_lock(&huge_lock);
	unsigned best = HUGE_CACHE_SLOTS, largest = HUGE_CACHE_SLOTS;
	for (unsigned i = 0; i < hcache_n; i++) {
		size_t l = hcache[i].len;
		if (l >= len && l / 2 <= len && (best == HUGE_CACHE_SLOTS || l < hcache[best].len))
			best = i;
		if (largest == HUGE_CACHE_SLOTS || l > hcache[largest].len)
			largest = i;
	}
	unsigned pick = best != HUGE_CACHE_SLOTS ? best : largest;
	void *base = NULL;
	if (pick != HUGE_CACHE_SLOTS) {
		base = hcache[pick].base;
		*got_len = hcache[pick].len;
		hcache_bytes -= hcache[pick].len;
		hcache[pick] = hcache[--hcache_n];
	}
	pthread_mutex_unlock(&huge_lock);
	return base;
}

/* Keep a freed mapping; returns mappings evicted to make room (to unmap
 * outside the lock) in out[], their count as the result. */
static unsigned cache_put(void *base, size_t len, hcached *out)
{
	unsigned nout = 0;
	pthread_mutex_lock(&huge_lock);
	while (hcache_n && (hcache_n == HUGE_CACHE_SLOTS || hcache_bytes + len > HUGE_CACHE_BYTES)) {
		unsigned old = 0;
		for (unsigned i = 1; i < hcache_n; i++)
			if (hcache[i].age < hcache[old].age)
				old = i;
		out[nout++] = hcache[old];
		hcache_bytes -= hcache[old].len;
		hcache[old] = hcache[--hcache_n];
	}
	hcache[hcache_n].base = base;
	hcache[hcache_n].len = len;
	hcache[hcache_n].age = ++hcache_clock;
	hcache_n++;
	hcache_bytes += len;
	pthread_mutex_unlock(&huge_lock);
	return nout;
}

static void *finish(void *base, size_t len)
{
	void *user = (char *)base + HA_LARGE_HDR;
	hhdr *h = hhdr_of(user);
	h->req = 0;
	h->pages = (uint32_t)(len / HA_PAGE_SIZE);
	h->magic = HUGE_MAGIC;
	__atomic_fetch_add(&huge_blocks, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&huge_bytes, len, __ATOMIC_RELAXED);
	return user;
}

void *ha_huge_alloc(size_t n, int zero)
{
	if (n > ((size_t)1 << 46)) {
		errno = ENOMEM;
		return NULL;
	}
	size_t len = map_len(n), have = 0;
	void *base = cache_take(len, &have);
	if (base) {
		if (have != len) {
			void *m = mremap(base, have, len, MREMAP_MAYMOVE);
			if (m == MAP_FAILED) {
				munmap(base, have);
				base = NULL;
			} else {
				base = m;
			}
		}
		/* pages beyond the old length arrive zeroed from the kernel */
		if (base && zero)
			memset((char *)base + HA_LARGE_HDR, 0, (have < len ? have : len) - HA_LARGE_HDR);
	}
	if (!base) {
		base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (base == MAP_FAILED) {
			errno = ENOMEM;
			return NULL;
		}
	}
	return finish(base, len);
}

int ha_huge_is(const void *p)
{
	return ((uintptr_t)p & (HA_PAGE_SIZE - 1)) == HA_LARGE_HDR && hhdr_of(p)->magic == HUGE_MAGIC;
}

size_t ha_huge_usable(const void *p)
{
	return (size_t)hhdr_of(p)->pages * HA_PAGE_SIZE - HA_LARGE_HDR;
}

uint64_t *ha_huge_req(void *p)
{
	return &hhdr_of(p)->req;
}

void ha_huge_free(void *p)
{
	hhdr *h = hhdr_of(p);
	size_t len = (size_t)h->pages * HA_PAGE_SIZE;
	void *base = (char *)p - HA_LARGE_HDR;
	h->magic = 0;     /* a second free of p fails the magic check */
	__atomic_fetch_sub(&huge_blocks, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&huge_bytes, len, __ATOMIC_RELAXED);
	if (len > HUGE_CACHE_BYTES / 2) {
		munmap(base, len);
		return;
	}
	hcached out[HUGE_CACHE_SLOTS];
	unsigned nout = cache_put(base, len, out);
	for (unsigned i = 0; i < nout; i++)
		munmap(out[i].base, out[i].len);
}

/* Resize a huge block to n (>= HA_HUGE_MIN) in place or by moving its
 * pages; NULL (p untouched) if the kernel refuses. */
void *ha_huge_realloc(void *p, size_t n)
{
	hhdr *h = hhdr_of(p);
	size_t old = (size_t)h->pages * HA_PAGE_SIZE, len = map_len(n);
	if (n > ((size_t)1 << 46))
		return NULL;
	if (len == old)
		return p;
	void *base = (char *)p - HA_LARGE_HDR;
	void *m = mremap(base, old, len, MREMAP_MAYMOVE);
	if (m == MAP_FAILED)
		return NULL;
	h = hhdr_of((char *)m + HA_LARGE_HDR);
	h->pages = (uint32_t)(len / HA_PAGE_SIZE);
	if (len > old)
		__atomic_fetch_add(&huge_bytes, len - old, __ATOMIC_RELAXED);
	else
		__atomic_fetch_sub(&huge_bytes, old - len, __ATOMIC_RELAXED);
	return (char *)m + HA_LARGE_HDR;
}

size_t ha_huge_trim(void)
{
	hcached out[HUGE_CACHE_SLOTS];
	unsigned n;
	size_t bytes;
	pthread_mutex_lock(&huge_lock);
	n = hcache_n;
	bytes = hcache_bytes;
	memcpy(out, hcache, n * sizeof *out);
	hcache_n = 0;
	hcache_bytes = 0;
	pthread_mutex_unlock(&huge_lock);
	for (unsigned i = 0; i < n; i++)
		munmap(out[i].base, out[i].len);
	return bytes;
}

void ha_huge_stats(uint64_t *blocks, uint64_t *bytes, uint64_t *cached)
{
	*blocks = __atomic_load_n(&huge_blocks, __ATOMIC_RELAXED);
	*bytes = __atomic_load_n(&huge_bytes, __ATOMIC_RELAXED);
	*cached = __atomic_load_n(&hcache_bytes, __ATOMIC_RELAXED);
}

void ha_huge_prefork(void)
{
	pthread_mutex_lock(&huge_lock);
}

void ha_huge_postfork(int child)
{
	if (child)
		pthread_mutex_init(&huge_lock, NULL);
	else
		pthread_mutex_unlock(&huge_lock);
}
