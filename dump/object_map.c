/* dump/object_map.c — sampled objects: address -> (bucket, requested size).
 *
 * Only sampled objects live here (the allocator marks them, so an unsampled
 * free never looks anything up).  NSTRIPES independent open-addressing
 * tables, picked by a hash of the address, each with its own mutex, so
 * frees on different threads rarely meet.  Linear probing with
 * backward-shift deletion (no tombstones); a stripe doubles at 1/2 load.
 * Memory from ha_raw_calloc (safe under our locks, never re-enters us).
 * Never unwinds, never calls the public malloc.
 */
#include <errno.h>
#include <string.h>

#include "dump/prof.h"

#define NSTRIPES 64
#define MIN_SLOTS 256

typedef struct slot {
	uintptr_t addr;           /* 0 = empty */
	ha_bucket *b;
	uint64_t req;
} slot;

typedef struct stripe {
	ha_plock lock;
	slot *s;
	size_t mask, used;
} __attribute__((aligned(64))) stripe;   /* one cache line each */

static stripe stripes[NSTRIPES];
static int map_ready;

static inline uint64_t mix(uintptr_t p)
{
	uint64_t x = (uint64_t)p >> 4;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

int ha_objmap_init(void)
{
	static int once;
	if (!once) {
		for (int i = 0; i < NSTRIPES; i++)
			ha_plock_init(&stripes[i].lock);
		once = 1;
	}
	map_ready = 1;
	return 0;
}

void ha_objmap_lock_all(void)
{
	for (int i = 0; i < NSTRIPES; i++)
		ha_plock_lock(&stripes[i].lock);
}

void ha_objmap_unlock_all(void)
{
	for (int i = NSTRIPES - 1; i >= 0; i--)
		ha_plock_unlock(&stripes[i].lock);
}

void ha_objmap_postfork_child(void)
{
	for (int i = 0; i < NSTRIPES; i++)
		ha_plock_init(&stripes[i].lock);
}

/* Caller holds every stripe lock. */
void ha_objmap_destroy(void)
{
	for (int i = 0; i < NSTRIPES; i++) {
		if (stripes[i].s)
			ha_raw_free(stripes[i].s);
		stripes[i].s = NULL;
		stripes[i].mask = stripes[i].used = 0;
	}
}

static int grow(stripe *st)
{
	size_t n = st->s ? (st->mask + 1) * 2 : MIN_SLOTS;
	slot *ns = ha_raw_calloc(n, sizeof *ns);
	if (!ns)
		return ENOMEM;
	if (st->s) {
		for (size_t i = 0; i <= st->mask; i++) {
			if (!st->s[i].addr)
				continue;
			size_t j = (mix(st->s[i].addr) >> 6) & (n - 1);
			while (ns[j].addr)
				j = (j + 1) & (n - 1);
			ns[j] = st->s[i];
		}
		ha_raw_free(st->s);
	}
	st->s = ns;
	st->mask = n - 1;
	return 0;
}

/* Caller holds st->lock; room for one more was made (grow). */
static void put(stripe *st, uint64_t h, uintptr_t p, ha_bucket *b, size_t req)
{
	size_t j = (h >> 6) & st->mask;
	while (st->s[j].addr && st->s[j].addr != p)
		j = (j + 1) & st->mask;
	if (!st->s[j].addr) {
		st->used++;
	} else {              /* a free we never saw: count it freed now */
		ha_bucket *ob = st->s[j].b;
		__atomic_fetch_add(&ob->free_bytes, st->s[j].req, __ATOMIC_RELAXED);
		__atomic_fetch_add(&ob->free_count, 1, __ATOMIC_RELEASE);
	}
	st->s[j].addr = p;
	st->s[j].b = b;
	st->s[j].req = req;
}

static inline int need_grow(const stripe *st)
{
	return !st->s || (st->used + 1) * 2 > st->mask + 1;
}

int ha_objmap_insert(uintptr_t p, ha_bucket *b, size_t req)
{
	uint64_t h = mix(p);
	stripe *st = &stripes[h & (NSTRIPES - 1)];
	ha_plock_lock(&st->lock);
	if (need_grow(st) && grow(st)) {
		ha_plock_unlock(&st->lock);
		return ENOMEM;
	}
	put(st, h, p, b, req);
	ha_plock_unlock(&st->lock);
	return 0;
}

int ha_objmap_record(uintptr_t p, uint64_t th, const uintptr_t *pcs, int depth, size_t req)
{
	uint64_t h = mix(p);
	stripe *st = &stripes[h & (NSTRIPES - 1)];
	ha_plock_lock(&st->lock);
	/* our stripe lock keeps the table alive while we look (prof.h) */
	ha_bucket *b = ha_table_find(th, pcs, depth, req);
	if (!b) {
		ha_plock_unlock(&st->lock);
		return -1;
	}
	if (need_grow(st) && grow(st)) {
		ha_plock_unlock(&st->lock);
		return 0;
	}
	__atomic_fetch_add(&b->alloc_count, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&b->alloc_bytes, req, __ATOMIC_RELAXED);
	put(st, h, p, b, req);
	ha_plock_unlock(&st->lock);
	return 1;
}

int ha_objmap_remove(uintptr_t p)
{
	uint64_t h = mix(p);
	stripe *st = &stripes[h & (NSTRIPES - 1)];
	ha_plock_lock(&st->lock);
	if (!st->s) {
		ha_plock_unlock(&st->lock);
		return 0;
	}
	size_t j = (h >> 6) & st->mask;
	while (st->s[j].addr && st->s[j].addr != p)
		j = (j + 1) & st->mask;
	if (!st->s[j].addr) {
		ha_plock_unlock(&st->lock);
		return 0;
	}
	ha_bucket *b = st->s[j].b;
	uint64_t req = st->s[j].req;
	/* backward-shift delete: pull later members of the run into the hole */
	size_t hole = j;
	for (size_t k = (j + 1) & st->mask; st->s[k].addr; k = (k + 1) & st->mask) {
		size_t home = (mix(st->s[k].addr) >> 6) & st->mask;
		/* move k into hole unless home lies cyclically in (hole, k] */
		int keep = hole <= k ? (home > hole && home <= k)
				     : (home > hole || home <= k);
		if (!keep) {
			st->s[hole] = st->s[k];
			hole = k;
		}
	}
	st->s[hole].addr = 0;
	st->used--;
	/* the bucket cannot go away while we hold a stripe lock (stop takes
	 * them all before freeing the table) */
	__atomic_fetch_add(&b->free_bytes, req, __ATOMIC_RELAXED);
	__atomic_fetch_add(&b->free_count, 1, __ATOMIC_RELEASE);
	ha_plock_unlock(&st->lock);
	return 1;
}

void ha_objmap_stats(uint64_t *objects, uint64_t *memory)
{
	uint64_t o = 0, m = 0;
	for (int i = 0; i < NSTRIPES; i++) {
		ha_plock_lock(&stripes[i].lock);
		o += stripes[i].used;
		m += stripes[i].s ? (stripes[i].mask + 1) * sizeof(slot) : 0;
		ha_plock_unlock(&stripes[i].lock);
	}
	*objects = o;
	*memory = m;
}
