/* alloc/central.c — the middle-end: one central cache per size class.
 *
 * Each class has a lock, a transfer cache of whole batches (a thread cache
 * that overflows hands a batch over and another thread's refill takes it in
 * O(1)), and the list of spans that still hold free objects.  Objects that
 * do not fit the transfer cache go back to their span (found through the
 * page map); a span whose objects are all back returns to mimalloc, except
 * that each class keeps one empty span to avoid thrashing.
 *
 * Never calls malloc.  Drops its lock while getting a new span from the
 * back-end.  Span records come from meta.c and are recycled here.
 */
#include "alloc/internal.h"
#include <string.h>

#define TRANSFER_SLOTS 64

typedef struct central {
	pthread_mutex_t lock;
	unsigned nbatches;
	void *batches[TRANSFER_SLOTS];
	ha_span *partial;        /* spans with free or uncarved objects */
	uint64_t nspans;
	uint64_t free_objs;      /* in spans and batches */
} __attribute__((aligned(64))) central;

static central centrals[HA_NCLASSES];
static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static ha_span *rec_free;

void ha_central_init(void)
{
	for (unsigned c = 0; c < HA_NCLASSES; c++)
		pthread_mutex_init(&centrals[c].lock, NULL);
}

static ha_span *rec_get(void)
{
	pthread_mutex_lock(&rec_lock);
	ha_span *s = rec_free;
	if (s)
		rec_free = s->next;
	pthread_mutex_unlock(&rec_lock);
	if (s)
		memset(s, 0, sizeof *s);
	else
		s = ha_meta_alloc(sizeof *s);
	return s;
}

static void rec_put(ha_span *s)
{
	pthread_mutex_lock(&rec_lock);
	s->next = rec_free;
	rec_free = s;
	pthread_mutex_unlock(&rec_lock);
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

/* A new span for cls, not yet on any list; NULL when memory is out. */
static ha_span *span_new(unsigned cls)
{
	size_t bytes = ha_class_span_bytes[cls];
	void *mem = ha_arena_span_alloc(bytes);
	if (!mem)
		return NULL;
	ha_span *s = rec_get();
	if (!s) {
		ha_arena_span_free(mem);
		return NULL;
	}
	s->base = (uintptr_t)mem;
	s->cls = cls;
	s->nobj = (uint32_t)(bytes / ha_class_size[cls]);
	if (ha_pagemap_set(s->base, bytes, s) != 0) {
		ha_arena_span_free(mem);
		rec_put(s);
		return NULL;
	}
	return s;
}

static void span_release(ha_span *s)
{
	ha_pagemap_set(s->base, ha_class_span_bytes[s->cls], NULL);
	ha_arena_span_free((void *)s->base);
	if (s->req)
		ha_raw_free(s->req);
	rec_put(s);
}

/* Take up to want objects from c's spans onto *head; returns how many. */
static unsigned take_from_spans(central *c, unsigned cls, unsigned want, void **head)
{
	unsigned got = 0;
	uint32_t size = ha_class_size[cls];
	while (got < want && c->partial) {
		ha_span *s = c->partial;
		while (got < want && s->freelist) {
			void *o = s->freelist;
			s->freelist = *(void **)o;
			s->nfree--;
			*(void **)o = *head;
			*head = o;
			got++;
		}
		while (got < want && s->carved < s->nobj) {
			void *o = (void *)(s->base + (uintptr_t)s->carved * size);
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
	pthread_mutex_lock(&c->lock);
	if (want == ha_class_batch[cls] && c->nbatches) {
		*head = c->batches[--c->nbatches];
		c->free_objs -= want;
		pthread_mutex_unlock(&c->lock);
		return want;
	}
	for (;;) {
		got += take_from_spans(c, cls, want - got, head);
		if (got == want || got > 0)
			break;
		pthread_mutex_unlock(&c->lock);
		ha_span *s = span_new(cls);
		pthread_mutex_lock(&c->lock);
		if (!s)
			break;
		c->nspans++;
		c->free_objs += s->nobj;
		list_push(c, s);
	}
	pthread_mutex_unlock(&c->lock);
	return got;
}

/* Return one object to its span; an empty span is unlinked and appended
 * to *dead unless it is the class's only span with free objects. */
static void to_span(central *c, void *o, ha_span **dead)
{
	ha_span *s = ha_pagemap_get(o);
	if (HA_UNLIKELY(!s || s->cls != (uint32_t)(c - centrals)))
		ha_fatal("free(): object returned to the wrong size class", o);
	*(void **)o = s->freelist;
	s->freelist = o;
	s->nfree++;
	c->free_objs++;
	if (!s->on_list)
		list_push(c, s);
	if (s->nfree == s->carved && (c->partial != s || s->next)) {
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
		span_release(dead);
		dead = n;
	}
}

void ha_central_release(unsigned cls, void *head, unsigned n)
{
	central *c = &centrals[cls];
	ha_span *dead = NULL;
	pthread_mutex_lock(&c->lock);
	if (n == ha_class_batch[cls] && c->nbatches < TRANSFER_SLOTS) {
		c->batches[c->nbatches++] = head;
		c->free_objs += n;
		pthread_mutex_unlock(&c->lock);
		return;
	}
	while (head) {
		void *next = *(void **)head;
		to_span(c, head, &dead);
		head = next;
	}
	pthread_mutex_unlock(&c->lock);
	release_dead(dead);
}

/* malloc_trim: batches back to spans, then every empty span to mimalloc. */
void ha_central_trim(void)
{
	for (unsigned cls = 1; cls < HA_NCLASSES; cls++) {
		central *c = &centrals[cls];
		ha_span *dead = NULL;
		pthread_mutex_lock(&c->lock);
		while (c->nbatches) {
			void *head = c->batches[--c->nbatches];
			while (head) {
				void *next = *(void **)head;
				c->free_objs--;      /* to_span counts it back */
				to_span(c, head, &dead);
				head = next;
			}
		}
		ha_span *s = c->partial;
		while (s) {
			ha_span *next = s->next;
			if (s->nfree == s->carved) {
				list_remove(c, s);
				c->nspans--;
				c->free_objs -= s->nobj;
				s->next = dead;
				dead = s;
			}
			s = next;
		}
		pthread_mutex_unlock(&c->lock);
		release_dead(dead);
	}
}

void ha_central_stats(uint64_t *spans, uint64_t *span_bytes, uint64_t *free_bytes)
{
	uint64_t n = 0, b = 0, f = 0;
	for (unsigned cls = 1; cls < HA_NCLASSES; cls++) {
		central *c = &centrals[cls];
		pthread_mutex_lock(&c->lock);
		n += c->nspans;
		b += c->nspans * ha_class_span_bytes[cls];
		f += c->free_objs * ha_class_size[cls];
		pthread_mutex_unlock(&c->lock);
	}
	*spans = n;
	*span_bytes = b;
	*free_bytes = f;
}

void ha_central_prefork(void)
{
	for (unsigned c = 0; c < HA_NCLASSES; c++)
		pthread_mutex_lock(&centrals[c].lock);
	pthread_mutex_lock(&rec_lock);
}

void ha_central_postfork(int child)
{
	if (child) {
		pthread_mutex_init(&rec_lock, NULL);
		for (unsigned c = 0; c < HA_NCLASSES; c++)
			pthread_mutex_init(&centrals[c].lock, NULL);
	} else {
		pthread_mutex_unlock(&rec_lock);
		for (unsigned c = 0; c < HA_NCLASSES; c++)
			pthread_mutex_unlock(&centrals[c].lock);
	}
}
