/* alloc/central.c — the middle-end: one central cache per size class.
 *
 * Each class has a lock, a transfer cache of whole batches (a thread cache
 * that overflows hands batches over and another thread's refill takes them,
 * linked through their kept tails, in O(batches)), and the list of spans that still hold free objects.  Objects that
 * do not fit the transfer cache go back to their span (found through the
 * page map); a span whose objects are all back returns to mimalloc, except
 * that each class keeps one empty span to avoid thrashing.
 *
 * Empty spans beyond that go to a pool of free spans (records and memory
 * together), reused by any class with the same span size, newest first.
 * They stay resident (hot) while the program may want them back, up to
 * the bound ha_keep_cap gives (purge.c): past it the oldest go cold
 * (madvise'd MADV_DONTNEED) at once, at the release that passed it, so a
 * program that goes quiet right after a free keeps no more than that.  A
 * span idle for SPAN_DECAY_MS goes cold too, except for SPAN_HOT_BYTES
 * that always stay: refills and releases look (ha_purge_tick), and so does
 * the opt-in purge thread, with which the bound is SPAN_HOT_MAX.
 * Cold spans are kept up to SPAN_COLD_BYTES of address space, and only
 * past that returned to mimalloc.  Cold spans cost no RSS, while
 * memory handed back to mimalloc costs some: mi_free writes its free-list
 * link into the block and faults one page of every span back in, and
 * mimalloc keeps a page of several spans while one of them lives.
 * malloc_trim() turns the hot part cold.
 *
 * Never calls malloc.  Drops its lock while getting a new span from the
 * back-end.  Span records come from meta.c and are recycled here.
 */
#include "alloc/internal.h"
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define SPAN_HOT_BYTES ((size_t)4 << 20)
#define SPAN_HOT_MAX ((size_t)64 << 20)
#define SPAN_COLD_BYTES ((size_t)1 << 30)
#define SPAN_DECAY_MS HA_DECAY_MS

/* A thread moves up to HA_MOVE_BATCHES batches under one lock hold, so a
 * class's slots hold a few such moves. */
#define TRANSFER_SLOTS 128
/* Empty spans a class keeps before handing them to the pool: refilling
 * from a kept span costs no page-map update. */
#define KEEP_EMPTY_BYTES ((uint64_t)64 << 10)
/* All classes' transfer caches together hold at most this much: objects
 * past it go back to their spans, so a heap that shrank can shrink. */
#define TRANSFER_BYTES ((uint64_t)8 << 20)
static ha_counter transfer;        /* bytes in all transfer caches (atomic) */
#define transfer_bytes (transfer.v)

typedef struct central {
	pthread_mutex_t lock;
	unsigned nbatches;       /* in slots[class] */
	ha_span *partial;        /* spans with free or uncarved objects */
	uint64_t nspans;
	uint64_t free_objs;      /* in spans and batches */
	uint64_t empty_bytes;    /* in empty spans kept on the list */
} __attribute__((aligned(64))) central;

static central centrals[HA_NCLASSES];
/* Each class's transfer cache, apart from the centrals so that what walks
 * those (statistics, fork) leaves the slots' pages untouched (not resident
 * until a class uses them): a batch's first object and its last, through
 * which batches link in O(1). */
static struct tslot { void *head, *tail; } slots[HA_NCLASSES][TRANSFER_SLOTS];
static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static ha_span *rec_free;
/* the free-span pool, under rec_lock: per span size, a hot list (newest at
 * the head, oldest at the tail, linked both ways) and a cold list */
#define POOL_SIZES 32
static struct { uint32_t bytes; ha_span *hot, *hot_tail, *cold; } pool[POOL_SIZES];
static size_t hot_bytes, cold_bytes;
static uint32_t decay_checked;    /* ms clock of the last look for idle spans */
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

static ha_span *rec_get(void)
{
	ha_lock(&rec_lock);
	ha_span *s = rec_free;
	if (s)
		rec_free = s->next;
	ha_unlock(&rec_lock);
	if (s) {
		memset(s, 0, sizeof *s);
	} else {
		/* 64-aligned (meta memory is 16-aligned): free reads one
		 * cache line of it; NULL stays NULL */
		uintptr_t raw = (uintptr_t)ha_meta_alloc(sizeof *s + 48);
		s = (ha_span *)((raw + 63) & ~(uintptr_t)63);
	}
	return s;
}

static void rec_put(ha_span *s)
{
	ha_lock(&rec_lock);
	s->next = rec_free;
	rec_free = s;
	ha_unlock(&rec_lock);
}

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

static void hot_push(int i, ha_span *s, uint32_t now)
{
	s->idle_since = now;
	s->prev = NULL;
	s->next = pool[i].hot;
	if (s->next)
		s->next->prev = s;
	else
		pool[i].hot_tail = s;
	pool[i].hot = s;
	hot_bytes += pool[i].bytes;
}

static void hot_unlink(int i, ha_span *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		pool[i].hot = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		pool[i].hot_tail = s->prev;
	s->next = s->prev = NULL;
	hot_bytes -= pool[i].bytes;
}

/* A span whose pages are gone (madvise'd) joins the cold list, or goes
 * back to mimalloc when that is full. */
static void cold_put(int i, ha_span *s)
{
	uint32_t bytes = pool[i].bytes;
	ha_lock(&rec_lock);
	int room = cold_bytes + bytes <= SPAN_COLD_BYTES;
	if (room) {
		s->next = pool[i].cold;
		pool[i].cold = s;
		cold_bytes += bytes;
	}
	ha_unlock(&rec_lock);
	if (!room) {
		ha_arena_span_free((void *)s->base);
		rec_put(s);
	}
}

/* Hot spans go cold, oldest first: while more than cap bytes are hot, and
 * while more than SPAN_HOT_BYTES are, those idle SPAN_DECAY_MS (looked for
 * at most every SPAN_DECAY_MS / 8); cap 0: all.  A few at a time under
 * the lock, madvise'd outside it. */
static void pool_decay(uint32_t now, size_t cap)
{
	int idle = (uint32_t)(now - __atomic_load_n(&decay_checked, __ATOMIC_RELAXED)) >= SPAN_DECAY_MS / 8;
	if (!idle && __atomic_load_n(&hot_bytes, __ATOMIC_RELAXED) <= cap)
		return;
	if (idle)
		__atomic_store_n(&decay_checked, now, __ATOMIC_RELAXED);
	int forced = 0;
	for (;;) {
		ha_span *got[8];
		int slot[8], n = 0;
		ha_lock(&rec_lock);
		while (n < 8) {
			int o = -1;   /* the slot whose oldest span is the oldest */
			for (int i = 0; i < POOL_SIZES && pool[i].bytes; i++)
				if (pool[i].hot_tail && (o < 0 || (uint32_t)(now - pool[i].hot_tail->idle_since) >
							 (uint32_t)(now - pool[o].hot_tail->idle_since)))
					o = i;
			if (o < 0)
				break;
			ha_span *s = pool[o].hot_tail;
			if (hot_bytes > cap)
				forced = 1;
			else if (!(idle && hot_bytes > SPAN_HOT_BYTES &&
				   (uint32_t)(now - s->idle_since) >= SPAN_DECAY_MS))
				break;
			hot_unlink(o, s);
			slot[n] = o;
			got[n++] = s;
		}
		ha_unlock(&rec_lock);
		for (int k = 0; k < n; k++) {
			ha_sys_discard((void *)got[k]->base, pool[slot[k]].bytes);
			cold_put(slot[k], got[k]);
		}
		if (forced && cap)
			ha_keep_forced(now);
		if (n < 8)
			return;
	}
}

/* What the pool may keep hot (the transfer batches count as another
 * cache's: free and resident too). */
static size_t pool_cap(void)
{
	return ha_keep_cap(__atomic_load_n(&hot_bytes, __ATOMIC_RELAXED), SPAN_HOT_MAX);
}

/* Put an empty span (pagemap cleared) in the pool: hot while the cap
 * (ha_keep_cap) allows, the oldest hot ones going cold past it; else cold
 * at once.  0 if there is no room at all. */
static int pool_put(ha_span *s, uint32_t bytes)
{
	int hot = 0, i;
	uint32_t now = ha_now_ms();
	size_t cap = pool_cap();
	ha_lock(&rec_lock);
	i = pool_slot(bytes);
	if (i >= 0 && bytes <= cap) {
		hot_push(i, s, now);
		hot = 1;
	}
	ha_unlock(&rec_lock);
	if (i < 0)
		return 0;
	if (!hot) {
		ha_sys_discard((void *)s->base, bytes);
		cold_put(i, s);
		ha_keep_forced(now);
	}
	pool_decay(now, cap);
	if (__atomic_load_n(&hot_bytes, __ATOMIC_RELAXED) > SPAN_HOT_BYTES)
		ha_purge_kick();
	ha_purge_tick(now);
	return 1;
}

int ha_central_decay(uint32_t now)
{
	if (__atomic_load_n(&hot_bytes, __ATOMIC_RELAXED) <= SPAN_HOT_BYTES)
		return 0;
	pool_decay(now, pool_cap());
	return __atomic_load_n(&hot_bytes, __ATOMIC_RELAXED) > SPAN_HOT_BYTES;
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
	if (!__atomic_load_n(&hot_bytes, __ATOMIC_RELAXED) && !__atomic_load_n(&cold_bytes, __ATOMIC_RELAXED))
		return NULL;
	ha_lock(&rec_lock);
	for (int i = 0; i < POOL_SIZES && pool[i].bytes; i++)
		if (pool[i].bytes == bytes) {
			if ((s = pool[i].hot) != NULL) {
				hot_unlink(i, s);
			} else if ((s = pool[i].cold) != NULL) {
				pool[i].cold = s->next;
				cold_bytes -= bytes;
				*cold = 1;
			}
			break;
		}
	ha_unlock(&rec_lock);
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
 * from 0.35 D1 misses a pair to 0; on this VM's hardware the loop's time
 * did not change (7.5 ns either way). */
static uint32_t span_color(const ha_span *s)
{
	static uint32_t next;   /* a hint: racy increments are harmless */
	uint32_t line = __atomic_fetch_add(&next, 7, __ATOMIC_RELAXED) & 63;
	uint32_t k = (line * 64 + s->size - 1) / s->size;
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
	s->color = span_color(s);
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

static void span_release(ha_span *s)
{
	uint32_t bytes = ha_class_span_bytes[s->cls];
	ha_pagemap_set(s->base, bytes, NULL);
	if (!pool_put(s, bytes))
		span_unmap(s, bytes);
}

/* Cold spans back to mimalloc: only when memory ran out (they hold
 * address space, which RLIMIT_AS counts). */
static void pool_release_cold(void)
{
	for (;;) {
		ha_span *s = NULL;
		uint32_t bytes = 0;
		ha_lock(&rec_lock);
		for (unsigned i = 0; i < POOL_SIZES && !s; i++)
			if ((s = pool[i].cold) != NULL) {
				pool[i].cold = s->next;
				bytes = pool[i].bytes;
				cold_bytes -= bytes;
			}
		ha_unlock(&rec_lock);
		if (!s)
			return;
		ha_arena_span_free((void *)s->base);
		rec_put(s);
	}
}

/* malloc_trim: every hot span's pages back to the OS; the spans go cold. */
static void pool_drain(void)
{
	pool_decay(ha_now_ms(), 0);
}

/* Take up to want objects from c's spans onto *head; returns how many. */
static unsigned take_from_spans(central *c, unsigned cls, unsigned want, void **head)
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
			*(void **)o = *head;
			*head = o;
			got++;
		}
		while (got < want && s->carved < s->nobj) {
			uint32_t k = s->carved + s->color;   /* in turn from the colour on */
			void *o = (void *)(s->base + (uintptr_t)(k < s->nobj ? k : k - s->nobj) * size);
			s->carved++;
			*(void **)o = *head;
			*head = o;
			got++;
		}
		if (!s->freelist && s->carved == s->nobj)
			list_remove(c, s);
	}
	c->free_objs -= got;
	return got;
}

unsigned ha_central_fetch(unsigned cls, unsigned want, void **head)
{
	central *c = &centrals[cls];
	unsigned got = 0;
	*head = NULL;
	unsigned batch = ha_class_batch[cls];
	ha_lock(&c->lock);
	if (want >= batch && c->nbatches) {
		/* whole batches, linked through their tails once the lock is
		 * dropped: a tail is a line the freeing thread wrote last, a
		 * cache miss that no other thread should wait behind */
		unsigned k = want / batch < c->nbatches ? want / batch : c->nbatches;
		struct tslot got_b[HA_MOVE_BATCHES];
		if (k > HA_MOVE_BATCHES)
			k = HA_MOVE_BATCHES;
		c->nbatches -= k;
		memcpy(got_b, &slots[cls][c->nbatches], k * sizeof got_b[0]);
		got = k * batch;
		c->free_objs -= got;
		__atomic_fetch_sub(&transfer_bytes, (uint64_t)got * ha_class_size[cls], __ATOMIC_RELAXED);
		ha_unlock(&c->lock);
		void *h = NULL;
		for (unsigned i = k; i-- > 0;) {
			*(void **)got_b[i].tail = h;
			h = got_b[i].head;
		}
		*head = h;
		return got;
	}
	for (;;) {
		got += take_from_spans(c, cls, want - got, head);
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
	ha_purge_tick(ha_now_ms());   /* a program that only allocates now */
	return got;
}

/* Return one object to its span; an empty span is unlinked and appended
 * to *dead unless it is the class's only span with free objects. */
static void to_span(central *c, void *o, ha_span **dead)
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
		__atomic_store_n(&s->plain_max, s->nobj, __ATOMIC_RELAXED);
		uint32_t bytes = ha_class_span_bytes[s->cls];
		if (c->empty_bytes + bytes <= KEEP_EMPTY_BYTES || (c->partial == s && !s->next)) {
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

static void release_dead(ha_span *dead)
{
	while (dead) {
		ha_span *n = dead->next;
		__atomic_fetch_sub(&live_bytes, ha_class_span_bytes[dead->cls], __ATOMIC_RELAXED);
		span_release(dead);
		dead = n;
	}
}

void ha_central_release(unsigned cls, void *head)
{
	central *c = &centrals[cls];
	ha_span *dead = NULL;
	ha_lock(&c->lock);
	while (head) {
		void *next = *(void **)head;
		to_span(c, head, &dead);
		head = next;
	}
	ha_unlock(&c->lock);
	release_dead(dead);
}

void ha_central_release_batches(unsigned cls, void **heads, void **tails, unsigned k)
{
	central *c = &centrals[cls];
	unsigned batch = ha_class_batch[cls];
	uint64_t bytes = (uint64_t)batch * ha_class_size[cls];
	ha_span *dead = NULL;
	unsigned i = 0;
	HA_ASSERT(k <= HA_MOVE_BATCHES);
	for (unsigned j = 0; j < k; j++)
		*(void **)tails[j] = NULL;   /* drain() walks a batch to its end */
	ha_lock(&c->lock);
	for (; i < k && c->nbatches < TRANSFER_SLOTS &&
	       __atomic_load_n(&transfer_bytes, __ATOMIC_RELAXED) + bytes <= TRANSFER_BYTES; i++) {
		slots[cls][c->nbatches++] = (struct tslot){ heads[i], tails[i] };
		c->free_objs += batch;
		__atomic_fetch_add(&transfer_bytes, bytes, __ATOMIC_RELAXED);
	}
	for (; i < k; i++) {   /* no room: to their spans */
		for (void *o = heads[i], *next; o; o = next) {
			next = *(void **)o;
			to_span(c, o, &dead);
		}
	}
	ha_unlock(&c->lock);
	release_dead(dead);
}

/* Every transfer batch back to its spans; with all_empty, also every empty
 * span (the one kept per class too) and the span pool. */
static void drain(int all_empty)
{
	for (unsigned cls = 1; cls < HA_NCLASSES; cls++) {
		central *c = &centrals[cls];
		ha_span *dead = NULL;
		if (!all_empty && !__atomic_load_n(&c->nbatches, __ATOMIC_RELAXED))
			continue;
		ha_lock(&c->lock);
		while (c->nbatches) {
			void *head = slots[cls][--c->nbatches].head;
			__atomic_fetch_sub(&transfer_bytes, (uint64_t)ha_class_batch[cls] * ha_class_size[cls],
					   __ATOMIC_RELAXED);
			while (head) {
				void *next = *(void **)head;
				c->free_objs--;      /* to_span counts it back */
				to_span(c, head, &dead);
				head = next;
			}
		}
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
		release_dead(dead);
	}
	if (all_empty)
		pool_drain();
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
