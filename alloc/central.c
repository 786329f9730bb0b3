/* alloc/central.c — the middle-end: one central cache per size class.
 *
 * Each class has a lock, a transfer cache (an array of block pointers: a
 * thread cache that overflows copies its top into it and another thread's
 * refill copies them out, which is the whole path of a block freed by
 * another thread), and the list of spans that still hold free objects.
 * Blocks that do not fit the transfer cache go back to their span (found
 * through the page map); a span whose objects are all back returns to
 * mimalloc, except that each class keeps one empty span (up to
 * HA_CLASS_KEEP_EMPTY) to avoid thrashing, until it goes a second unused.
 *
 * Empty spans beyond that go to a pool of free spans (records and memory
 * together), reused by any class with the same span size, newest first.
 * They stay resident (hot) while the program may want them back, up to
 * the bound ha_keep_cap gives (alloc/retain.h): past it the oldest go cold
 * (madvise'd MADV_DONTNEED) at once, at the release that passed it, so a
 * program that goes quiet right after a free keeps no more than that.  A
 * span idle for HA_DECAY_MS goes cold too, except for the idle floor
 * (ha_idle_floor) that always stays: refills and releases look (ha_purge_tick), and so does
 * the opt-in purge thread, with which the bound is HA_SPAN_HOT_MAX.
 * Cold spans are kept up to HA_SPAN_COLD_MAX of address space, and only
 * past that returned to mimalloc.  Cold spans cost no RSS, while
 * memory handed back to mimalloc costs some: mi_free writes its free-list
 * link into the block and faults one page of every span back in, and
 * mimalloc keeps a page of several spans while one of them lives.
 * malloc_trim() turns the hot part cold.
 *
 * After a decay period with the pool unused, its cold spans go back to
 * mimalloc (ha_central_release_cold), which frees the segments they held.
 *
 * Never calls malloc.  Drops its lock while getting a new span from the
 * back-end.  Span records come from spanrec.c.
 */
#include "alloc/internal.h"
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>


/* Each class's transfer cache is an array of block pointers, taken from
 * and given to by memcpy under the class lock (block memory is never
 * touched here: a block one core freed and another will allocate keeps
 * its cache line where it is), made on first use.  Its capacity in
 * blocks: HA_TRANSFER_CLASS bytes of them, between 16 moves of the largest
 * size (a thread that only frees hands over HA_MOVE_BATCHES batches at a
 * time, and two or more do so at once) and HA_TRANSFER_MAX_OBJS; all
 * classes' together hold at most HA_TRANSFER_MAX and ha_keep_cap
 * (alloc/retain.h has why); an unused class's array goes back after a
 * quiet second (classes_decay). */
static ha_counter transfer;        /* bytes in all transfer caches (atomic) */
#define transfer_bytes (transfer.v)

typedef struct central {
	pthread_mutex_t lock;
	unsigned nx;             /* blocks in xa */
	unsigned xcap;           /* xa's capacity, 0 until made */
	void **xa;               /* the transfer array (meta memory) */
	ha_span *partial;        /* spans with free or uncarved objects */
	uint64_t nspans;
	uint64_t free_objs;      /* in spans and the transfer array */
	uint64_t empty_bytes;    /* in empty spans kept on the list */
	uint32_t used_at;        /* ms clock of the last fetch or release */
} __attribute__((aligned(64))) central;

static central centrals[HA_NCLASSES];
static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
/* the free-span pool, under rec_lock: per span size, a hot list (pool_hot,
 * the decaying cache of alloc/retain.h) and the cold spans' addresses, a
 * stack of ncold (a cold span keeps no record: 8 bytes of address, not a
 * 128-byte record resident for each), mapped on first use */
#define POOL_SIZES 32
static struct {
	uint32_t bytes;
	uint32_t ncold;
	uintptr_t *cold;
} pool[POOL_SIZES];
static ha_hot_list pool_lists[POOL_SIZES];
static size_t cold_bytes;
static size_t pool_size(const ha_hot_cache *c, unsigned i, const ha_hot_entry *e);
static void pool_cool(ha_hot_cache *c, unsigned i, ha_hot_entry *e);
static ha_hot_cache pool_hot = {
	.lock = &rec_lock, .lists = pool_lists, .nlists = POOL_SIZES, .size = pool_size, .cool = pool_cool,
};
#define hot_bytes (pool_hot.hot)
static uint32_t pool_used_at;     /* ms clock of the last take or busy put */
static uint64_t live_bytes;       /* bytes of spans held by size classes (atomic) */

void ha_central_init(void)
{
	/* zeroed bss already is the initializer on glibc: even reading the
	 * centrals (9 KiB) would make them resident in every process */
	static const pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER, zero;
	if (memcmp(&fresh, &zero, sizeof zero) == 0)
		return;
	for (unsigned c = 0; c < HA_NCLASSES; c++)
		pthread_mutex_init(&centrals[c].lock, NULL);
}

#define rec_get ha_spanrec_get
#define rec_put ha_spanrec_put

static void list_push(central *c, ha_span *s)
{
	s->prev = NULL;
	s->next = c->partial;
	if (c->partial)
		c->partial->prev = s;
	c->partial = s;
	s->on_list = 1;
}

static void list_remove(central *c, ha_span *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		c->partial = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->next = s->prev = NULL;
	s->on_list = 0;
}

/* The pool slot for a span size (POOL_SIZES distinct sizes at most; there
 * are fewer span sizes than that).  rec_lock held. */
static int pool_slot(uint32_t bytes)
{
	for (unsigned i = 0; i < POOL_SIZES; i++)
		if (pool[i].bytes == bytes || pool[i].bytes == 0) {
			pool[i].bytes = bytes;
			return (int)i;
		}
	return -1;
}

static ha_span *span_of(ha_hot_entry *e)
{
	return (ha_span *)((char *)e - offsetof(ha_span, hot));
}

static void hot_push(int i, ha_span *s, uint32_t now)
{
	ha_hot_push(&pool_hot, (unsigned)i, &s->hot, pool[i].bytes, now);
}

static void hot_unlink(int i, ha_span *s)
{
	ha_hot_unlink(&pool_hot, (unsigned)i, &s->hot, pool[i].bytes);
}

/* A span whose pages are gone (madvise'd) joins the cold stack, its record
 * freed, or goes back to mimalloc when that is full. */
static void cold_put(int i, ha_span *s)
{
	uint32_t bytes = pool[i].bytes;
	uintptr_t base = s->base;
	rec_put(s);
	if (!__atomic_load_n(&pool[i].cold, __ATOMIC_ACQUIRE)) {
		/* the stack for this span size, outside the lock: at most
		 * HA_SPAN_COLD_MAX / bytes entries, pages touched as it fills */
		int e = errno;
		void *m = ha_sys_mmap(NULL, HA_SPAN_COLD_MAX / bytes * sizeof(uintptr_t), PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		errno = e;
		ha_lock(&rec_lock);
		if (m != MAP_FAILED && !pool[i].cold) {
			__atomic_store_n(&pool[i].cold, m, __ATOMIC_RELEASE);
			m = MAP_FAILED;
		}
		ha_unlock(&rec_lock);
		if (m != MAP_FAILED)
			ha_sys_munmap(m, HA_SPAN_COLD_MAX / bytes * sizeof(uintptr_t));
	}
	ha_lock(&rec_lock);
	int room = pool[i].cold && cold_bytes + bytes <= HA_SPAN_COLD_MAX;
	if (room) {
		pool[i].cold[pool[i].ncold++] = base;
		cold_bytes += bytes;
	}
	ha_unlock(&rec_lock);
	if (!room)
		ha_arena_span_free((void *)base);
}

static size_t pool_size(const ha_hot_cache *c, unsigned i, const ha_hot_entry *e)
{
	(void)c;
	(void)e;
	return pool[i].bytes;
}

/* A span the decay made cold: its pages go, it joins the cold stack. */
static void pool_cool(ha_hot_cache *c, unsigned i, ha_hot_entry *e)
{
	(void)c;
	ha_span *s = span_of(e);
	ha_sys_discard((void *)s->base, pool[i].bytes);
	cold_put((int)i, s);
}

static void pool_decay(uint32_t now, size_t cap)
{
	ha_hot_decay(&pool_hot, now, cap);
}

/* What the pool may keep hot (the transfer arrays count as another
 * cache's: free and resident too). */
static size_t pool_cap(void)
{
	return ha_keep_cap(__atomic_load_n(&hot_bytes, __ATOMIC_RELAXED), HA_SPAN_HOT_MAX);
}

/* Put an empty span (pagemap cleared) in the pool: hot while the cap
 * (ha_keep_cap) allows, the oldest hot ones going cold past it; else cold
 * at once.  0 if there is no room at all. */
static int pool_put(ha_span *s, uint32_t bytes, int idle)
{
	int hot = 0, i;
	uint32_t now = ha_now_ms(), since = idle ? now - HA_DECAY_MS : now;
	size_t cap = pool_cap();
	if (!idle)
		__atomic_store_n(&pool_used_at, now, __ATOMIC_RELAXED);
	size_t floor = idle ? ha_idle_floor(__atomic_load_n(&hot_bytes, __ATOMIC_RELAXED)) : 0;
	ha_lock(&rec_lock);
	i = pool_slot(bytes);
	/* an idle span stays hot only below the idle floor */
	if (i >= 0 && bytes <= cap && (!idle || hot_bytes + bytes <= floor)) {
		hot_push(i, s, since);
		hot = 1;
	}
	ha_unlock(&rec_lock);
	if (i < 0)
		return 0;
	if (!hot) {
		ha_sys_discard((void *)s->base, bytes);
		cold_put(i, s);
		if (!idle)
			ha_keep_forced(now);
	}
	pool_decay(now, cap);
	if (__atomic_load_n(&hot_bytes, __ATOMIC_RELAXED) > HA_IDLE_KEEP)
		ha_purge_kick();
	if (!idle)   /* an idle give-back (a scavenge) ticks once it is done */
		ha_purge_tick(now);
	return 1;
}

static int classes_decay(uint32_t now);

static void pool_release_cold(void);

int ha_central_decay(uint32_t now)
{
	int more = classes_decay(now);
	if (!__atomic_load_n(&hot_bytes, __ATOMIC_RELAXED))
		return more;
	pool_decay(now, pool_cap());
	uint64_t h = __atomic_load_n(&hot_bytes, __ATOMIC_RELAXED);
	return more || h > ha_idle_floor(h);
}

int ha_central_pool_idle(uint32_t now)
{
	return (int32_t)(now - __atomic_load_n(&pool_used_at, __ATOMIC_RELAXED)) >= HA_DECAY_MS;
}

int ha_central_release_cold(void)
{
	if (!__atomic_load_n(&cold_bytes, __ATOMIC_RELAXED))
		return 0;
	pool_release_cold();
	return 1;
}

uint64_t ha_central_held_bytes(void)
{
	return __atomic_load_n(&hot_bytes, __ATOMIC_RELAXED) +
	       __atomic_load_n(&transfer_bytes, __ATOMIC_RELAXED);
}

uint64_t ha_central_live_bytes(void)
{
	return __atomic_load_n(&live_bytes, __ATOMIC_RELAXED);
}

static ha_span *pool_take(uint32_t bytes, int *cold)
{
	ha_span *s = NULL;
	uintptr_t base = 0;
	if (!__atomic_load_n(&hot_bytes, __ATOMIC_RELAXED) && !__atomic_load_n(&cold_bytes, __ATOMIC_RELAXED))
		return NULL;
	__atomic_store_n(&pool_used_at, ha_now_ms(), __ATOMIC_RELAXED);
	ha_lock(&rec_lock);
	for (int i = 0; i < POOL_SIZES && pool[i].bytes; i++)
		if (pool[i].bytes == bytes) {
			if (pool_lists[i].head) {
				s = span_of(pool_lists[i].head);
				hot_unlink(i, s);
			} else if (pool[i].ncold) {
				base = pool[i].cold[--pool[i].ncold];
				cold_bytes -= bytes;
				*cold = 1;
			}
			break;
		}
	ha_unlock(&rec_lock);
	if (base && !(s = rec_get()))
		ha_arena_span_free((void *)base);   /* no record: out of memory */
	else if (base)
		s->base = base;
	return s;
}

/* Give span memory back to mimalloc, its pages to the OS first. */
static void span_unmap(ha_span *s, size_t bytes)
{
	ha_sys_discard((void *)s->base, bytes);
	ha_arena_span_free((void *)s->base);
	rec_put(s);
}

/* Spans start on page boundaries, so the first object of every class
 * would share one L1 set (bits 6-11 of the address).  Carving starts at a
 * different line of the page in each new span instead (slab colouring),
 * 7 lines further each time so that consecutive spans cover all 64 sets.
 * In callgrind's cache model this takes a loop of random 16-256 B pairs
 * from 0.35 D1 misses a pair to 0, with no change in that loop's time;
 * where blocks cross threads it shows: xmalloc-testN, one pass of 5
 * interleaved pairs, 0.31 of glibc's time with it, 0.43 without (spreads
 * 0.27-0.37 and 0.31-0.52). */
static uint32_t span_color(const ha_span *s, unsigned cls)
{
	static uint32_t next;   /* a hint: racy increments are harmless */
	uint32_t line = __atomic_fetch_add(&next, 7, __ATOMIC_RELAXED) & 63;
	uint32_t g = ha_class_line_group(cls), k = (line * 64 + s->size - 1) / s->size;
	k = (k + g - 1) / g * g;    /* the start of a line group */
	return k < s->nobj ? k : 0;
}

static void span_set_class(ha_span *s, unsigned cls, size_t bytes)
{
	s->cls = cls;
	s->nobj = (uint32_t)(bytes / ha_class_size[cls]);
	s->size = ha_class_size[cls];
	s->magic = ha_class_magic[cls];
	s->inv = ha_class_inv[cls];
	s->ror = ha_class_ror[cls];
	s->tl_key = ha_tl_key(cls);
	s->plain_max = s->nobj;
	s->color = span_color(s, cls);
}

static ha_span *span_reuse(unsigned cls)
{
	size_t bytes = ha_class_span_bytes[cls];
	int cold = 0;
	ha_span *s = pool_take((uint32_t)bytes, &cold);
	if (!s)
		return NULL;
	if (cold)
		ha_keep_refault(bytes);
	uintptr_t base = s->base;
	memset(s, 0, sizeof *s);
	s->base = base;
	span_set_class(s, cls, bytes);
	if (ha_pagemap_set(s->base, bytes, s) != 0) {
		span_unmap(s, bytes);
		return NULL;
	}
	return s;
}

/* A new span for cls, not yet on any list; NULL when memory is out. */
static ha_span *span_new(unsigned cls)
{
	size_t bytes = ha_class_span_bytes[cls];
	ha_span *r = span_reuse(cls);
	if (r)
		return r;
	void *mem = ha_arena_span_alloc(bytes);
	if (!mem)
		return NULL;
	ha_keep_refault(bytes);
	ha_span *s = rec_get();
	if (!s) {
		ha_arena_span_free(mem);
		return NULL;
	}
	s->base = (uintptr_t)mem;
	span_set_class(s, cls, bytes);
	if (ha_pagemap_set(s->base, bytes, s) != 0) {
		ha_arena_span_free(mem);
		rec_put(s);
		return NULL;
	}
	return s;
}

static void span_release(ha_span *s, int idle)
{
	uint32_t bytes = ha_class_span_bytes[s->cls];
	ha_pagemap_set(s->base, bytes, NULL);
	if (!pool_put(s, bytes, idle))
		span_unmap(s, bytes);
}

/* Cold spans back to mimalloc: only when memory ran out (they hold
 * address space, which RLIMIT_AS counts). */
static void pool_release_cold(void)
{
	for (;;) {
		uintptr_t base = 0;
		ha_lock(&rec_lock);
		for (unsigned i = 0; i < POOL_SIZES && !base; i++)
			if (pool[i].ncold) {
				base = pool[i].cold[--pool[i].ncold];
				cold_bytes -= pool[i].bytes;
			}
		ha_unlock(&rec_lock);
		if (!base)
			return;
		ha_arena_span_free((void *)base);
	}
}

/* malloc_trim: every hot span's pages back to the OS; the spans go cold. */
static void pool_drain(void)
{
	pool_decay(ha_now_ms(), 0);
}

/* Take up to want blocks from c's spans into out[0 ..); returns how many.
 * A carved block is not touched: its pages fault in at the program's
 * first write.  Carving goes by whole line groups (the colour starts one),
 * so two threads that carve one span never share a line pair. */
static unsigned take_from_spans(central *c, unsigned cls, unsigned want, void **out)
{
	unsigned got = 0;
	uint32_t size = ha_class_size[cls];
	while (got < want && c->partial) {
		ha_span *s = c->partial;
		if (s->kept_empty) {
			s->kept_empty = 0;
			c->empty_bytes -= ha_class_span_bytes[cls];
		}
		while (got < want && s->freelist) {
			void *o = s->freelist;
			s->freelist = *(void **)o;
			s->nfree--;
			out[got++] = o;
		}
		/* whole line groups, unless that would give nothing; the
		 * colour's wrap to block 0 ends a group too */
		uint32_t n = want - got, g = ha_class_line_group(cls);
		uint32_t wrap = s->nobj - s->color, stop = s->carved < wrap ? wrap : s->nobj;
		if (n >= g || got)
			n -= n % g;
		if (n > stop - s->carved)
			n = stop - s->carved;
		for (uint32_t end = s->carved + n; s->carved < end; s->carved++) {
			uint32_t k = s->carved + s->color;   /* in turn from the colour on */
			out[got++] = (void *)(s->base + (uintptr_t)(k < s->nobj ? k : k - s->nobj) * size);
		}
		if (got < want && s->carved < s->nobj)
			break;       /* the rest of a group: left for this span */
		if (!s->freelist && s->carved == s->nobj)
			list_remove(c, s);
	}
	c->free_objs -= got;
	return got;
}

unsigned ha_central_fetch(unsigned cls, unsigned want, void **out)
{
	central *c = &centrals[cls];
	unsigned got = 0;
	uint32_t now = ha_now_ms();
	ha_lock(&c->lock);
	c->used_at = now;
	if (c->nx) {
		/* the most recently given back first: the likeliest cached */
		got = want < c->nx ? want : c->nx;
		c->nx -= got;
		memcpy(out, c->xa + c->nx, got * sizeof(void *));
		c->free_objs -= got;
		__atomic_fetch_sub(&transfer_bytes, (uint64_t)got * ha_class_size[cls], __ATOMIC_RELAXED);
		ha_unlock(&c->lock);
		return got;
	}
	for (;;) {
		got += take_from_spans(c, cls, want - got, out + got);
		if (got == want || got > 0)
			break;
		ha_unlock(&c->lock);
		ha_span *s = span_new(cls);
		ha_lock(&c->lock);
		if (!s)
			break;
		c->nspans++;
		c->free_objs += s->nobj;
		__atomic_fetch_add(&live_bytes, ha_class_span_bytes[cls], __ATOMIC_RELAXED);
		list_push(c, s);
	}
	ha_unlock(&c->lock);
	ha_purge_tick(now);   /* a program that only allocates now */
	return got;
}

/* Return one object to its span; an empty span is unlinked and appended
 * to *dead unless it is the class's only span with free objects. */
static void to_span(central *c, void *o, ha_span **dead, int keep)
{
	ha_span *s = ha_pagemap_get(o);
	if (HA_UNLIKELY(!s || s->cls != (uint32_t)(c - centrals)))
		ha_fatal("free(): object returned to the wrong size class", o);
	HA_ASSERT(s->nfree < s->carved);   /* a block more free than carved: freed twice */
	*(void **)o = s->freelist;
	s->freelist = o;
	s->nfree++;
	c->free_objs++;
	if (!s->on_list)
		list_push(c, s);
	if (s->nfree == s->carved) {
		/* no block of it is out, so none is recorded: a mark goes
		 * (ha_span_mark_recorded; nobody can set it meanwhile) */
		if (!__atomic_load_n(&s->plain_max, __ATOMIC_RELAXED)) {
			__atomic_store_n(&s->plain_max, s->nobj, __ATOMIC_RELAXED);
			ha_pagemap_mark(s);
		}
		uint32_t bytes = ha_class_span_bytes[s->cls];
		if (keep && (c->empty_bytes + bytes <= HA_CLASS_KEEP_EMPTY || (c->partial == s && !s->next))) {
			c->empty_bytes += bytes;   /* keep it for the next refill */
			s->kept_empty = 1;
			return;
		}
		list_remove(c, s);
		c->nspans--;
		c->free_objs -= s->nobj;
		s->next = *dead;
		*dead = s;
	}
}

static void release_dead(ha_span *dead, int idle)
{
	while (dead) {
		ha_span *n = dead->next;
		__atomic_fetch_sub(&live_bytes, ha_class_span_bytes[dead->cls], __ATOMIC_RELAXED);
		span_release(dead, idle);
		dead = n;
	}
}

/* The class's transfer array, made on first use: a mapping of its own
 * (at most HA_TRANSFER_MAX_OBJS pointers), so that an idle class can give its
 * pages back (drain_class).  Lock held; 0 if there is none. */
static unsigned xa_cap(central *c, unsigned cls)
{
	if (HA_UNLIKELY(!c->xcap)) {
		uint64_t k = HA_TRANSFER_CLASS / ha_class_size[cls];
		uint64_t lo = 2 * HA_MOVE_BATCHES * (uint64_t)ha_class_batch[cls];
		k = k < lo ? lo : k > HA_TRANSFER_MAX_OBJS ? HA_TRANSFER_MAX_OBJS : k;
		int e = errno;
		void *a = ha_sys_mmap(NULL, k * sizeof(void *), PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		errno = e;
		if (a == MAP_FAILED)
			return 0;
		ha_meta_note(a, k * sizeof(void *));
		c->xa = a;
		c->xcap = (unsigned)k;
	}
	return c->xcap;
}

void ha_central_release(unsigned cls, void *const *objs, unsigned n, int to_spans)
{
	central *c = &centrals[cls];
	ha_span *dead = NULL;
	unsigned i = 0;
	uint32_t now = ha_now_ms();
	/* the transfer arrays are a cache like the span pool: together with
	 * the others they keep what ha_keep_cap allows, so a freed spike
	 * comes back at its free */
	uint64_t held = __atomic_load_n(&transfer_bytes, __ATOMIC_RELAXED);
	uint64_t limit = to_spans ? 0 : ha_keep_cap(held, HA_TRANSFER_MAX);
	ha_lock(&c->lock);
	if (to_spans != HA_TO_SPANS_IDLE)   /* a scavenged cache's blocks are no use */
		c->used_at = now;
	if (!to_spans) {
		/* into the transfer array, as far as its capacity and the
		 * bytes all classes' arrays may keep allow */
		uint64_t size = ha_class_size[cls];
		uint64_t room_b = limit - __atomic_load_n(&transfer_bytes, __ATOMIC_RELAXED);
		unsigned cap = xa_cap(c, cls), k = cap - c->nx;
		if ((int64_t)room_b < 0)
			room_b = 0;
		if (k > n)
			k = n;
		if ((uint64_t)k * size > room_b)
			k = (unsigned)(room_b / size);
		memcpy(c->xa + c->nx, objs, k * sizeof(void *));
		c->nx += k;
		c->free_objs += k;
		__atomic_fetch_add(&transfer_bytes, (uint64_t)k * size, __ATOMIC_RELAXED);
		i = k;
		/* over the bound (the bytes in use fell since this array
		 * filled): this class's part of the excess back to its spans,
		 * so that a freed spike does not stay here */
		uint64_t tb = __atomic_load_n(&transfer_bytes, __ATOMIC_RELAXED);
		if (HA_UNLIKELY(tb > limit) && c->nx) {
			uint64_t m = (tb - limit + size - 1) / size;
			if (m > c->nx)
				m = c->nx;
			__atomic_fetch_sub(&transfer_bytes, m * size, __ATOMIC_RELAXED);
			c->free_objs -= m;          /* to_span counts them back */
			while (m--)
				to_span(c, c->xa[--c->nx], &dead, 1);
		}
	}
	/* the top of the stack first, as it was pushed last: the oldest
	 * block ends up first on its span's free list */
	for (unsigned j = n; j-- > i;)
		to_span(c, objs[j], &dead, to_spans != HA_TO_SPANS_IDLE);
	ha_unlock(&c->lock);
	release_dead(dead, to_spans == HA_TO_SPANS_IDLE);
	/* cached past the floor: the opt-in purge thread (if enabled) runs,
	 * as the span pool's puts start it */
	if (!to_spans && __atomic_load_n(&transfer_bytes, __ATOMIC_RELAXED) > HA_IDLE_KEEP)
		ha_purge_kick();
}

/* Class cls's transfer array back to its spans; with all_empty, also its
 * empty spans (the ones kept too); idle: they have been (pooled as idle). */
static void drain_class(unsigned cls, int all_empty, int idle)
{
	central *c = &centrals[cls];
	ha_span *dead = NULL;
	ha_lock(&c->lock);
	__atomic_fetch_sub(&transfer_bytes, (uint64_t)c->nx * ha_class_size[cls], __ATOMIC_RELAXED);
	c->free_objs -= c->nx;      /* to_span counts them back */
	while (c->nx)
		to_span(c, c->xa[--c->nx], &dead, !idle);
	if (idle && c->xcap)   /* the array's pages too (refaulted if it fills again) */
		ha_sys_discard(c->xa, (size_t)c->xcap * sizeof(void *));
	for (ha_span *s = all_empty ? c->partial : NULL, *next; s; s = next) {
		next = s->next;
		if (s->nfree == s->carved) {
			if (s->kept_empty) {
				s->kept_empty = 0;
				c->empty_bytes -= ha_class_span_bytes[cls];
			}
			list_remove(c, s);
			c->nspans--;
			c->free_objs -= s->nobj;
			s->next = dead;
			dead = s;
		}
	}
	ha_unlock(&c->lock);
	release_dead(dead, idle);
}

/* Every transfer array back to its spans; with all_empty, also every empty
 * span and the span pool. */
static void drain(int all_empty)
{
	for (unsigned cls = 1; cls < HA_NCLASSES; cls++)
		if (all_empty || __atomic_load_n(&centrals[cls].nx, __ATOMIC_RELAXED))
			drain_class(cls, all_empty, 0);
	if (all_empty)
		pool_drain();
}

/* The decay step's part for the classes: one unused for HA_DECAY_MS gives
 * its transfer array and its kept empty spans back to the pool as idle
 * (the pool's decay then gives their pages back).  Nonzero while a class
 * still holds some. */
static int classes_decay(uint32_t now)
{
	int more = 0;
	for (unsigned cls = 1; cls < HA_NCLASSES; cls++) {
		central *c = &centrals[cls];
		if (!__atomic_load_n(&c->nx, __ATOMIC_RELAXED) && !__atomic_load_n(&c->empty_bytes, __ATOMIC_RELAXED))
			continue;
		/* signed: another thread may have stamped a later ms */
		if ((int32_t)(now - __atomic_load_n(&c->used_at, __ATOMIC_RELAXED)) < HA_DECAY_MS) {
			more = 1;
			continue;
		}
		drain_class(cls, 1, 1);
	}
	return more;
}

/* malloc_trim: everything free goes back. */
void ha_central_trim(void)
{
	drain(1);
}

/* Out of memory: that, and the cold spans' address space too. */
void ha_central_release_all(void)
{
	drain(1);
	pool_release_cold();
}

/* A thread exited: the batches other threads handed over while it ran pin
 * spans all over the heap, and an exit often ends a phase of the program;
 * past 1 MiB they go back to their spans. */
void ha_central_thread_exited(void)
{
	if (__atomic_load_n(&transfer_bytes, __ATOMIC_RELAXED) > ((uint64_t)1 << 20))
		drain(0);
}

void ha_central_stats(uint64_t *spans, uint64_t *span_bytes, uint64_t *free_bytes)
{
	uint64_t n = 0, b = 0, f = 0;
	for (unsigned cls = 1; cls < HA_NCLASSES; cls++) {
		central *c = &centrals[cls];
		ha_lock(&c->lock);
		n += c->nspans;
		b += c->nspans * ha_class_span_bytes[cls];
		f += c->free_objs * ha_class_size[cls];
		ha_unlock(&c->lock);
	}
	*spans = n;
	*span_bytes = b;
	*free_bytes = f;
}

void ha_central_free_ranges(ha_free_range_fn *add, void *ctx)
{
	for (unsigned cls = 1; cls < HA_NCLASSES; cls++) {
		central *c = &centrals[cls];
		uintptr_t size = ha_class_size[cls];
		ha_lock(&c->lock);
		for (unsigned i = 0; i < c->nx; i++)
			add(ctx, (uintptr_t)c->xa[i], (uintptr_t)c->xa[i] + size);
		for (const ha_span *s = c->partial; s; s = s->next) {
			for (void *o = s->freelist; o; o = *(void **)o)
				add(ctx, (uintptr_t)o, (uintptr_t)o + size);
			/* uncarved: blocks color + carved .. color + nobj, mod nobj */
			uint32_t a = s->color + s->carved, e = s->color + s->nobj;
			if (a < s->nobj)
				add(ctx, s->base + a * size, s->base + s->nobj * size);
			if (e > s->nobj && a < e)
				add(ctx, s->base + (a > s->nobj ? a - s->nobj : 0) * size,
				    s->base + (e - s->nobj) * size);
		}
		ha_unlock(&c->lock);
	}
	ha_lock(&rec_lock);
	for (unsigned i = 0; i < POOL_SIZES && pool[i].bytes; i++) {
		for (ha_hot_entry *e = pool_lists[i].head; e; e = e->next)
			add(ctx, span_of(e)->base, span_of(e)->base + pool[i].bytes);
		for (uint32_t k = 0; k < pool[i].ncold; k++)
			add(ctx, pool[i].cold[k], pool[i].cold[k] + pool[i].bytes);
	}
	ha_unlock(&rec_lock);
}

void ha_central_prefork(void)
{
	for (unsigned c = 0; c < HA_NCLASSES; c++)
		ha_lock(&centrals[c].lock);
	ha_lock(&rec_lock);
}

void ha_central_postfork(int child)
{
	if (child) {
		pthread_mutex_init(&rec_lock, NULL);
		for (unsigned c = 0; c < HA_NCLASSES; c++)
			pthread_mutex_init(&centrals[c].lock, NULL);
	} else {
		ha_unlock(&rec_lock);
		for (unsigned c = 0; c < HA_NCLASSES; c++)
			ha_unlock(&centrals[c].lock);
	}
}

void ha_central_pool_bytes(uint64_t *hot, uint64_t *cold)
{
	*hot = __atomic_load_n(&hot_bytes, __ATOMIC_RELAXED);
	*cold = __atomic_load_n(&cold_bytes, __ATOMIC_RELAXED);
}
