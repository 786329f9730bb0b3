/* prof/capture/stack_table.c — the stack table: one bucket per (stack, size key).
 *
 * The only includer of <xxhash.h>.  A bucket counts the sampled
 * allocations and frees made at one call stack for objects of one size key
 * (sizes within 1/8 of each other, see ha_table_size_key): pprof unsamples a
 * line with the line's average object size, so one line must not mix 16-byte
 * and 1-MiB objects (docs/heap-profile-spec.md §4).  Several lines may share a stack.
 *
 * Memory (ha_table_stats counts it): the chain heads, 1 Ki of them (8 KiB
 * mapped from the kernel) doubled whenever there are as many buckets as
 * heads, up to 64 Ki (512 KiB), so a program with a few hundred stacks keeps
 * two pages of them, not one page per stack hashed (a replaced array stays
 * mapped, unused, until ha_table_destroy: a finder may still walk it);
 * and buckets carved from 64 KiB raw chunks (ha_raw_malloc: never sampled,
 * never re-enters the profiler); an index of buckets by number (8 MiB
 * mapped, 8 bytes resident per bucket), so that the object map keeps a
 * 20-bit number instead of a pointer;
 * bounded by MAX_BUCKETS, past which samples are counted as drops.
 * Locking: table_lock serialises every change (new buckets, the chunk list,
 * init/destroy) and snapshots.  Lookups of existing buckets take no table
 * lock (ha_table_find): a bucket is filled in before a release store links
 * it at its chain head and never changes or moves until ha_table_destroy,
 * which runs under the table lock AND every object-map stripe lock, so a
 * finder holding a stripe lock sees either a live table or none.  Counters
 * are updated with relaxed atomic adds so a free never needs the table lock.
 * Never unwinds, never calls the public malloc.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#define XXH_INLINE_ALL   /* compiled in: no libxxhash.so mapped */
#include <xxhash.h>

#include "prof/prof.h"
#include "prof/root.h"

#define HEAD_BITS_FIRST 10
#define HEAD_BITS_LAST 16
#define NHEADS_LAST (1u << HEAD_BITS_LAST)
#define CHUNK_BYTES (64 * 1024)
#define MAX_BUCKETS (1u << 20)

typedef struct chunk {
	struct chunk *next;
	size_t used;
	char mem[];
} chunk;

static ha_plock table_lock = HA_PLOCK_INIT;
/* One size of the chain heads; heads: the one in use (NULL: no table). */
typedef struct heads_tab {
	ha_bucket **h;
	size_t mask;
} heads_tab;
static heads_tab tabs[HEAD_BITS_LAST - HEAD_BITS_FIRST + 1];
static const heads_tab *heads;
static ha_bucket **byidx;       /* MAX_BUCKETS entries, filled in order */
static chunk *chunks;
static uint64_t nbuckets, chunk_bytes, drops;

void ha_table_lock(void)
{
	ha_plock_lock(&table_lock);
}

void ha_table_unlock(void)
{
	ha_plock_unlock(&table_lock);
}

void ha_table_postfork_child(void)
{
	ha_plock_init(&table_lock);
}

static size_t tab_bytes(int g)
{
	return ((size_t)1 << (HEAD_BITS_FIRST + g)) * sizeof(ha_bucket *);
}

int ha_table_init(void)
{
	void *m = ha_sys_mmap(NULL, tab_bytes(0), PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return ENOMEM;
	void *x = ha_sys_mmap(NULL, MAX_BUCKETS * sizeof(ha_bucket *), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (x == MAP_FAILED) {
		ha_sys_munmap(m, tab_bytes(0));
		return ENOMEM;
	}
	ha_plock_lock(&table_lock);
	byidx = x;
	tabs[0].h = m;
	tabs[0].mask = ((size_t)1 << HEAD_BITS_FIRST) - 1;
	__atomic_store_n(&heads, &tabs[0], __ATOMIC_RELEASE);
	chunks = NULL;
	nbuckets = chunk_bytes = drops = 0;
	ha_plock_unlock(&table_lock);
	return 0;
}

/* Caller holds the table lock and every object-map lock. */
void ha_table_destroy(void)
{
	for (chunk *c = chunks, *n; c; c = n) {
		n = c->next;
		ha_raw_free(c);
	}
	chunks = NULL;
	for (int g = 0; g < (int)(sizeof tabs / sizeof tabs[0]); g++)
		if (tabs[g].h) {
			ha_sys_munmap(tabs[g].h, tab_bytes(g));
			tabs[g].h = NULL;
		}
	if (byidx)
		ha_sys_munmap(byidx, MAX_BUCKETS * sizeof *byidx);
	byidx = NULL;
	__atomic_store_n(&heads, NULL, __ATOMIC_RELEASE);
	nbuckets = chunk_bytes = 0;
}

/* Size key: exact for sizes < 16, else the top 4 significant bits, so
 * sizes on one line differ by less than 1/8 (e.g. 1000..1023 share a key,
 * 1024..1151 the next).  Objects of one line have one size in practice. */
uint32_t ha_table_size_key(size_t req)
{
	if (req < 16)
		return (uint32_t)req;
	unsigned lg = 63 - (unsigned)__builtin_clzll((unsigned long long)req);
	return (lg << 3) | (uint32_t)((req >> (lg - 3)) & 7);
}

/* Bytes carve() takes for a bucket of depth frames. */
static inline size_t carved_size(uint32_t depth)
{
	return (sizeof(ha_bucket) + (size_t)depth * sizeof(uintptr_t) + 15) & ~(size_t)15;
}

/* bytes: from carved_size(), a multiple of 16 */
static void *carve(size_t bytes)
{
	if (!chunks || chunks->used + bytes > CHUNK_BYTES - sizeof(chunk)) {
		chunk *c = ha_raw_malloc(CHUNK_BYTES);
		if (!c)
			return NULL;
		c->next = chunks;
		c->used = 0;
		chunks = c;
		chunk_bytes += CHUNK_BYTES;
	}
	void *p = chunks->mem + chunks->used;
	chunks->used += bytes;
	return p;
}

uint64_t ha_table_hash(const uintptr_t *pcs, int depth, size_t req)
{
	return XXH3_64bits_withSeed(pcs, (size_t)depth * sizeof *pcs, ha_table_size_key(req));
}

static inline int same(const ha_bucket *b, uint64_t h, uint32_t skey, const uintptr_t *pcs,
		       int depth)
{
	return b->hash == h && b->skey == skey && b->depth == (uint32_t)depth &&
	       memcmp(b->pcs, pcs, (size_t)depth * sizeof *pcs) == 0;
}

/* No table lock: the caller holds an object-map stripe lock (or the table
 * lock), which keeps the table from being destroyed under us. */
ha_bucket *ha_table_find(uint64_t h, const uintptr_t *pcs, int depth, size_t req)
{
	const heads_tab *t = __atomic_load_n(&heads, __ATOMIC_ACQUIRE);
	if (HA_UNLIKELY(!t))
		return NULL;
	uint32_t skey = ha_table_size_key(req);
	/* next: relaxed, a grow may relink it (see grow_heads) */
	for (ha_bucket *b = __atomic_load_n(&t->h[h & t->mask], __ATOMIC_ACQUIRE); b;
	     b = __atomic_load_n(&b->next, __ATOMIC_RELAXED))
		if (same(b, h, skey, pcs, depth))
			return b;
	return NULL;
}

ha_bucket *ha_table_find_at(uint32_t idx, const uintptr_t *pcs, int depth, size_t req)
{
	ha_bucket *b = ha_table_bucket_live(idx);
	if (!b || b->depth != (uint32_t)depth || b->skey != ha_table_size_key(req) ||
	    memcmp(b->pcs, pcs, (size_t)depth * sizeof *pcs) != 0)
		return NULL;
	return b;
}

/* Relink every bucket into heads twice as many, and publish them; under the
 * table lock.  A finder still on the old heads may step from an old chain
 * into a new one and miss its bucket (it then takes the table lock and
 * finds it here), but never loops: a bucket's new next is one relinked
 * before it, so a walk that takes a new link only goes down that order to
 * NULL.  The old array is kept until ha_table_destroy.  On no memory the
 * chains just grow longer. */
static void grow_heads(void)
{
	int g = (int)(heads - tabs) + 1;
	if (g >= (int)(sizeof tabs / sizeof tabs[0]))
		return;
	void *m = ha_sys_mmap(NULL, tab_bytes(g), PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return;
	tabs[g].h = m;
	tabs[g].mask = ((size_t)1 << (HEAD_BITS_FIRST + g)) - 1;
	for (uint64_t i = 0; i < nbuckets; i++) {
		ha_bucket *b = byidx[i], **slot = &tabs[g].h[b->hash & tabs[g].mask];
		__atomic_store_n(&b->next, *slot, __ATOMIC_RELAXED);
		*slot = b;
	}
	__atomic_store_n(&heads, &tabs[g], __ATOMIC_RELEASE);
}

/* The caller holds the table lock (and then inserts into the object map
 * before dropping it, so a stop cannot free the bucket in between). */
ha_bucket *ha_table_record_hashed(uint64_t h, const uintptr_t *pcs, int depth, size_t req)
{
	uint32_t skey = ha_table_size_key(req);
	ha_bucket *b;
	HA_ASSERT(depth >= 0 && depth <= HA_PROF_DEPTH);
	if (HA_UNLIKELY(!heads))
		return NULL;
	ha_bucket **slot = &heads->h[h & heads->mask];
	for (b = *slot; b; b = b->next)
		if (same(b, h, skey, pcs, depth))
			break;
	if (!b && nbuckets > heads->mask && nbuckets < MAX_BUCKETS) {
		grow_heads();
		slot = &heads->h[h & heads->mask];
	}
	if (!b) {
		if (nbuckets >= MAX_BUCKETS ||
		    !(b = carve(carved_size((uint32_t)depth)))) {
			drops++;
			return NULL;
		}
		memset(b, 0, sizeof *b);
		b->hash = h;
		b->skey = (uint16_t)skey;
		b->depth = (uint16_t)depth;
		b->idx = (uint32_t)nbuckets;
		byidx[nbuckets] = b;   /* before the release store below */
		memcpy(b->pcs, pcs, (size_t)depth * sizeof *pcs);
		__atomic_store_n(&b->next, *slot, __ATOMIC_RELAXED);
		/* publish: lock-free finders see a complete bucket */
		__atomic_store_n(slot, b, __ATOMIC_RELEASE);
		__atomic_store_n(&nbuckets, nbuckets + 1, __ATOMIC_RELEASE);
	}
	__atomic_fetch_add(&b->alloc_count, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&b->alloc_bytes, req, __ATOMIC_RELAXED);
	ha_peak_touch(b);
	return b;
}

ha_bucket *ha_table_record(const uintptr_t *pcs, int depth, size_t req)
{
	return ha_table_record_hashed(ha_table_hash(pcs, depth, req), pcs, depth, req);
}

ha_bucket *ha_table_bucket(uint32_t idx)
{
	HA_ASSERT(byidx && idx < __atomic_load_n(&nbuckets, __ATOMIC_RELAXED));
	return byidx[idx];
}

ha_bucket *ha_table_bucket_live(uint32_t idx)
{
	if (!byidx || idx >= __atomic_load_n(&nbuckets, __ATOMIC_ACQUIRE))
		return NULL;
	return byidx[idx];
}

/* The caller holds the table lock (the bucket stays put meanwhile). */
size_t ha_table_copy(ha_line *lines, size_t cap)
{
	if (!heads || nbuckets > cap)
		return heads ? nbuckets : 0;
	/* every bucket was carved in turn from the chunks, and nothing else
	 * is: walking the chunks visits each once, without the heads */
	size_t k = 0;
	for (chunk *c = chunks; c; c = c->next)
		for (size_t off = 0; off < c->used && k < nbuckets;) {
			ha_bucket *b = (ha_bucket *)(void *)(c->mem + off);
			off += carved_size(b->depth);
			ha_table_line(&lines[k++], b);
		}
	return k;
}

void ha_table_line(ha_line *l, const ha_bucket *b)
{
	l->b = b;
	/* frees first: a line never shows more freed than allocated */
	l->free_count = __atomic_load_n(&b->free_count, __ATOMIC_ACQUIRE);
	l->free_bytes = __atomic_load_n(&b->free_bytes, __ATOMIC_RELAXED);
	l->alloc_count = __atomic_load_n(&b->alloc_count, __ATOMIC_ACQUIRE);
	l->alloc_bytes = __atomic_load_n(&b->alloc_bytes, __ATOMIC_RELAXED);
	if (l->free_count > l->alloc_count)
		l->free_count = l->alloc_count;
	if (l->free_bytes > l->alloc_bytes)
		l->free_bytes = l->alloc_bytes;
}

size_t ha_table_count(void)
{
	return byidx ? (size_t)__atomic_load_n(&nbuckets, __ATOMIC_ACQUIRE) : 0;
}

ha_line *ha_table_snapshot(size_t *n)
{
	*n = 0;
	if (!heads)
		return NULL;
	ha_line *lines = ha_dump_mem((nbuckets ? nbuckets : 1) * sizeof *lines);
	if (!lines)
		return NULL;
	*n = ha_table_copy(lines, nbuckets);
	return lines;
}

/* Bytes of the chain heads: every array mapped (in use or replaced); each
 * is dense, a head per bucket at most. */
static uint64_t heads_bytes(void)
{
	uint64_t n = 0;
	for (int g = 0; g < (int)(sizeof tabs / sizeof tabs[0]); g++)
		if (tabs[g].h)
			n += tab_bytes(g);
	return n;
}

uint64_t ha_table_raw_bytes(void)
{
	return __atomic_load_n(&chunk_bytes, __ATOMIC_RELAXED);
}

void ha_table_stats(uint64_t *buckets, uint64_t *memory, uint64_t *drops_out)
{
	ha_plock_lock(&table_lock);
	*buckets = nbuckets;
	/* the index: the pages its buckets' entries have touched */
	uint64_t idx_bytes = (nbuckets * sizeof(ha_bucket *) + 4095) & ~(uint64_t)4095;
	*memory = chunk_bytes + (heads ? heads_bytes() : 0) + idx_bytes;
	*drops_out = drops;
	ha_plock_unlock(&table_lock);
}

void ha_table_root(struct ha_root_table *t)
{
	t->index = (uint64_t)(uintptr_t)&byidx;
	t->count = (uint64_t)(uintptr_t)&nbuckets;
	t->chunks = (uint64_t)(uintptr_t)&chunks;
	t->drops = (uint64_t)(uintptr_t)&drops;
	t->max = MAX_BUCKETS;
	t->depth_max = HA_PROF_DEPTH;
	t->chunk_bytes = CHUNK_BYTES;
	t->chunk_next = offsetof(chunk, next);
	t->chunk_used = offsetof(chunk, used);
	t->chunk_mem = offsetof(chunk, mem);
	t->b_size = sizeof(ha_bucket);
	t->b_hash = offsetof(ha_bucket, hash);
	t->b_alloc_count = offsetof(ha_bucket, alloc_count);
	t->b_alloc_bytes = offsetof(ha_bucket, alloc_bytes);
	t->b_free_count = offsetof(ha_bucket, free_count);
	t->b_free_bytes = offsetof(ha_bucket, free_bytes);
	t->b_skey = offsetof(ha_bucket, skey);
	t->b_depth = offsetof(ha_bucket, depth);
	t->b_idx = offsetof(ha_bucket, idx);
	t->b_pcs = offsetof(ha_bucket, pcs);
	t->b_life = offsetof(ha_bucket, life);
	t->life_bins = HA_LIFE_BINS;
}
