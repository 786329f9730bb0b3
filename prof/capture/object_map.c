/* prof/capture/object_map.c — sampled objects: address -> (bucket, requested size,
 * allocation time).
 *
 * Only sampled objects live here (the allocator marks them, so an unsampled
 * free never looks anything up; with every allocation recorded it marks
 * their spans instead, and a free there that finds nothing was not one).  NSTRIPES independent open-addressing
 * tables, picked by a hash of the address, each with its own mutex, so
 * frees on different threads rarely meet.  Linear probing with
 * backward-shift deletion (no tombstones); a stripe grows by half at 3/4 load.
 * Memory from mmap (safe under our locks, never re-enters us).
 * Never unwinds, never calls the public malloc.
 * Samples whose record the allocator keeps in the block (ha_objmap_count)
 * are here too, for their allocation time alone: a live block's age and a
 * freed one's lifetime (prof/capture/ages.c) need it, and the header has no room.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include <stddef.h>

#include "prof/prof.h"
#include "prof/leakscan.h"
#include "prof/root.h"

#define NSTRIPES 64
#define MIN_SLOTS 256             /* 4 KiB: one page; sizes stay multiples */

/* A slot is 24 bytes: the address (16-aligned, below 2^48, so 44 bits) and
 * its bucket's index (ha_table_bucket, < 2^20) packed in one word, 0 for an
 * empty slot; the bytes counted (a kept sample's: the bytes asked for);
 * the allocation's CLOCK_MONOTONIC time in ns (ha_age_now).  A stripe grows by half at 3/4 load (so it is 1/2 full
 * after): 32..48 bytes per object, where doubling would leave 3/8 (64
 * bytes).  Any size works: a slot's home is the hash's top bits scaled to
 * the size (home()). */
#define ADDR_BITS 44
#define ADDR_MASK (((uint64_t)1 << ADDR_BITS) - 1)

typedef struct slot {
	uint64_t key;             /* addr >> 4 | bucket index << 44; 0 = empty */
	uint64_t req;
	uint64_t t;               /* allocated at (ha_age_now) | KEPT */
} slot;
/* A sample whose record the allocator keeps (ha_objmap_count): its slot is
 * its time alone, its bucket's counts are the allocator's record's. */
#define KEPT ((uint64_t)1 << 63)
#define TIME(t) ((t) & ~KEPT)

typedef struct stripe {
	ha_plock lock;
	slot *s;
	size_t n, used;           /* slots (a multiple of MIN_SLOTS), in use */
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

/* Where hash h starts probing in a table of n slots (the stripe took the
 * low bits of h). */
static inline size_t home(uint64_t h, size_t n)
{
	return (size_t)(((unsigned __int128)h * n) >> 64);
}

static inline size_t next(size_t j, size_t n)
{
	return j + 1 == n ? 0 : j + 1;
}

static inline uintptr_t key_addr(uint64_t k)
{
	return (uintptr_t)((k & ADDR_MASK) << 4);
}

/* Tables come straight from the kernel: zeroed, and given back whole when a
 * stripe doubles (a freed table must not linger in an allocator's cache). */
static slot *table_map(size_t n)
{
	void *m = ha_sys_mmap(NULL, n * sizeof(slot), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return m == MAP_FAILED ? NULL : m;
}

static void table_unmap(slot *t, size_t n)
{
	ha_sys_munmap(t, n * sizeof(slot));
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
			table_unmap(stripes[i].s, stripes[i].n);
		stripes[i].s = NULL;
		stripes[i].n = stripes[i].used = 0;
	}
}

static int grow(stripe *st)
{
	size_t n = st->s ? (st->n + st->n / 2 + MIN_SLOTS - 1) & ~(size_t)(MIN_SLOTS - 1)
			 : MIN_SLOTS;
	slot *ns = table_map(n);
	if (!ns)
		return ENOMEM;
	if (st->s) {
		for (size_t i = 0; i < st->n; i++) {
			if (!st->s[i].key)
				continue;
			size_t j = home(mix(key_addr(st->s[i].key)), n);
			while (ns[j].key)
				j = next(j, n);
			ns[j] = st->s[i];
		}
		table_unmap(st->s, st->n);
	}
	st->s = ns;
	st->n = n;
	return 0;
}

/* Can p be kept (16-aligned, below 2^48)?  Every heapalloc block is. */
static inline int storable(uintptr_t p)
{
	return p && !(p & 15) && ((uint64_t)p >> 4) <= ADDR_MASK;
}

/* Caller holds st->lock; room for one more was made (grow); key_of(p) != 0. */
static void put(stripe *st, uint64_t h, uintptr_t p, const ha_bucket *b, size_t req, uint64_t t)
{
	HA_ASSERT(storable(p) && st->used < st->n);
	size_t j = home(h, st->n);
	uint64_t a = (uint64_t)p >> 4;
	while (st->s[j].key && (st->s[j].key & ADDR_MASK) != a)
		j = next(j, st->n);
	if (!st->s[j].key) {
		st->used++;
	} else if (!(st->s[j].t & KEPT)) {   /* a free we never saw: count it freed now */
		ha_bucket *ob = ha_table_bucket((uint32_t)(st->s[j].key >> ADDR_BITS));
		__atomic_fetch_add(&ob->free_bytes, st->s[j].req, __ATOMIC_RELAXED);
		__atomic_fetch_add(&ob->free_count, 1, __ATOMIC_RELEASE);
		ha_peak_touch(ob);
	}
	st->s[j].key = a | (uint64_t)b->idx << ADDR_BITS;
	st->s[j].req = req;
	st->s[j].t = t;
}

static inline int need_grow(const stripe *st)
{
	return !st->s || (st->used + 1) * 4 > st->n * 3;
}

/* A kept sample's slot, for its time: without room it is simply not aged
 * (its bucket counts it all the same).  Caller holds st->lock. */
static void keep_time(stripe *st, uint64_t h, uintptr_t p, const ha_bucket *b, size_t req,
		      uint64_t t)
{
	if (HA_UNLIKELY(!storable(p)) || (need_grow(st) && grow(st)))
		return;
	put(st, h, p, b, req, t | KEPT);
}

/* Empty slot j by backward shift: later members of its run move into the
 * hole.  Caller holds st->lock. */
static void unslot(stripe *st, size_t j)
{
	size_t hole = j;
	for (size_t k = next(j, st->n); st->s[k].key; k = next(k, st->n)) {
		size_t hk = home(mix(key_addr(st->s[k].key)), st->n);
		/* move k into hole unless its home lies cyclically in (hole, k] */
		int keep = hole <= k ? (hk > hole && hk <= k)
				     : (hk > hole || hk <= k);
		if (!keep) {
			st->s[hole] = st->s[k];
			hole = k;
		}
	}
	st->s[hole].key = 0;
	st->used--;
}

/* The slot of p in st, or NULL.  Caller holds st->lock. */
static slot *find(stripe *st, uint64_t h, uintptr_t p)
{
	if (!st->s)
		return NULL;
	uint64_t a = (uint64_t)p >> 4;
	size_t j = home(h, st->n);
	while (st->s[j].key && (st->s[j].key & ADDR_MASK) != a)
		j = next(j, st->n);
	return st->s[j].key ? &st->s[j] : NULL;
}

int ha_objmap_insert(uintptr_t p, ha_bucket *b, size_t req, uint64_t t)
{
	if (HA_UNLIKELY(!storable(p)))
		return ENOMEM;
	uint64_t h = mix(p);
	stripe *st = &stripes[h & (NSTRIPES - 1)];
	ha_plock_lock(&st->lock);
	if (need_grow(st) && grow(st)) {
		ha_plock_unlock(&st->lock);
		return ENOMEM;
	}
	put(st, h, p, b, req, t);
	ha_plock_unlock(&st->lock);
	return 0;
}

/* The bucket of a sample's stack: at hint when it is there (the same stack
 * as this thread's last sample), else by its hash, computed into *th.  The
 * caller holds a stripe lock, which keeps the table alive (prof.h). */
static inline ha_bucket *lookup(uint32_t hint, uint64_t *th, const uintptr_t *pcs, int depth,
				size_t req)
{
	if (hint) {
		ha_bucket *b = ha_table_find_at(hint - 1, pcs, depth, req);
		if (b)
			return b;
	}
	*th = ha_table_hash(pcs, depth, req);
	return ha_table_find(*th, pcs, depth, req);
}

int ha_objmap_record(uintptr_t p, uint32_t hint, uint64_t *th, const uintptr_t *pcs, int depth,
		     size_t req, uint64_t t, uint32_t *idx)
{
	if (HA_UNLIKELY(!storable(p)))
		return 0;
	uint64_t h = mix(p);
	stripe *st = &stripes[h & (NSTRIPES - 1)];
	ha_plock_lock(&st->lock);
	ha_bucket *b = lookup(hint, th, pcs, depth, req);
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
	ha_peak_touch(b);
	put(st, h, p, b, req, t);
	*idx = b->idx;
	ha_plock_unlock(&st->lock);
	return 1;
}

int ha_objmap_count(uintptr_t p, uint32_t hint, uint64_t *th, const uintptr_t *pcs, int depth,
		    size_t req, size_t asked, uint64_t t, uint32_t *idx)
{
	uint64_t h = mix(p);
	stripe *st = &stripes[h & (NSTRIPES - 1)];
	ha_plock_lock(&st->lock);
	ha_bucket *b = lookup(hint, th, pcs, depth, req);
	if (b) {
		__atomic_fetch_add(&b->alloc_count, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&b->alloc_bytes, req, __ATOMIC_RELAXED);
		ha_peak_touch(b);
		*idx = b->idx;
		keep_time(st, h, p, b, asked, t);
	}
	ha_plock_unlock(&st->lock);
	return b ? 1 : -1;
}

void ha_objmap_keep(uintptr_t p, ha_bucket *b, size_t asked, uint64_t t)
{
	uint64_t h = mix(p);
	stripe *st = &stripes[h & (NSTRIPES - 1)];
	ha_plock_lock(&st->lock);
	keep_time(st, h, p, b, asked, t);
	ha_plock_unlock(&st->lock);
}

void ha_objmap_free_kept(uintptr_t p, uint32_t idx, size_t req, uint32_t session)
{
	uint64_t h = mix(p);
	stripe *st = &stripes[h & (NSTRIPES - 1)];
	ha_plock_lock(&st->lock);
	/* a stop (and a new start) since the caller looked: not this table's */
	ha_bucket *b = ha_alloc_session_live(session) ? ha_table_bucket_live(idx) : NULL;
	if (b) {
		slot *s = storable(p) ? find(st, h, p) : NULL;
		if (s && (s->t & KEPT)) {
			if ((uint32_t)(s->key >> ADDR_BITS) == idx)
				ha_life_add(b, req, TIME(s->t));
			unslot(st, (size_t)(s - st->s));
		}
		__atomic_fetch_add(&b->free_bytes, req, __ATOMIC_RELAXED);
		__atomic_fetch_add(&b->free_count, 1, __ATOMIC_RELEASE);
		ha_peak_touch(b);
	}
	ha_plock_unlock(&st->lock);
}

int ha_objmap_remove_bytes(uintptr_t p, uint64_t *bytes)
{
	if (HA_UNLIKELY(!storable(p)))
		return 0;
	uint64_t h = mix(p);
	stripe *st = &stripes[h & (NSTRIPES - 1)];
	ha_plock_lock(&st->lock);
	slot *s = find(st, h, p);
	if (!s) {
		ha_plock_unlock(&st->lock);
		return 0;
	}
	if (HA_UNLIKELY(s->t & KEPT)) {   /* not ours to count: forget its time */
		unslot(st, (size_t)(s - st->s));
		ha_plock_unlock(&st->lock);
		return 0;
	}
	ha_bucket *b = ha_table_bucket((uint32_t)(s->key >> ADDR_BITS));
	uint64_t req = s->req;
	ha_life_add(b, req, s->t);
	unslot(st, (size_t)(s - st->s));
	/* the bucket cannot go away while we hold a stripe lock (stop takes
	 * them all before freeing the table) */
	__atomic_fetch_add(&b->free_bytes, req, __ATOMIC_RELAXED);
	__atomic_fetch_add(&b->free_count, 1, __ATOMIC_RELEASE);
	ha_peak_touch(b);
	ha_plock_unlock(&st->lock);
	if (bytes)
		*bytes = req;
	return 1;
}

int ha_objmap_remove(uintptr_t p)
{
	return ha_objmap_remove_bytes(p, NULL);
}

void ha_objmap_stats(uint64_t *objects, uint64_t *memory)
{
	uint64_t o = 0, m = 0;
	for (int i = 0; i < NSTRIPES; i++) {
		ha_plock_lock(&stripes[i].lock);
		o += stripes[i].used;
		m += stripes[i].n * sizeof(slot);
		ha_plock_unlock(&stripes[i].lock);
	}
	*objects = o;
	*memory = m;
}

size_t ha_objmap_ages(ha_agent *out, size_t cap)
{
	size_t k = 0;
	for (int i = 0; i < NSTRIPES; i++) {
		stripe *st = &stripes[i];
		ha_plock_lock(&st->lock);
		for (size_t j = 0; st->s && j < st->n; j++) {
			if (!st->s[j].key)
				continue;
			if (k < cap)
				out[k] = (ha_agent){ (uint32_t)(st->s[j].key >> ADDR_BITS),
						     st->s[j].req, TIME(st->s[j].t) };
			k++;
		}
		ha_plock_unlock(&st->lock);
	}
	return k;
}

size_t ha_objmap_blocks(ha_leak_block *out, uint32_t *idx, size_t cap)
{
	size_t k = 0;
	for (int i = 0; i < NSTRIPES; i++) {
		stripe *st = &stripes[i];
		ha_plock_lock(&st->lock);
		for (size_t j = 0; st->s && j < st->n; j++) {
			if (!st->s[j].key)
				continue;
			if (k < cap) {
				uint64_t a = key_addr(st->s[j].key);
				out[k] = (ha_leak_block){ a, a + (st->s[j].req ? st->s[j].req : 1),
							  (uint32_t)k, 0 };
				idx[k] = (uint32_t)(st->s[j].key >> ADDR_BITS);
			}
			k++;
		}
		ha_plock_unlock(&st->lock);
	}
	return k;
}

void ha_objmap_root(struct ha_root_objmap *m)
{
	m->stripes = (uint64_t)(uintptr_t)stripes;
	m->nstripes = NSTRIPES;
	m->stripe_size = sizeof(stripe);
	m->s_slots = offsetof(stripe, s);
	m->s_n = offsetof(stripe, n);
	m->s_used = offsetof(stripe, used);
	m->slot_size = sizeof(slot);
	m->addr_bits = ADDR_BITS;
	m->slot_time = offsetof(slot, t);
}
