/* alloc/thread_cache.c — the front-end: per-thread free lists.
 *
 * The fast paths (pop in malloc, push in free) live in entry.c as inline
 * code on ha_tc, an initial-exec TLS struct: no lock, no atomic.  This file
 * has their slow paths:
 *   refill    an empty list takes one batch from the central cache;
 *   overflow  a list longer than its max gives one batch back; the max
 *             starts at one batch and grows by a batch per refill up to
 *             4 batches (slow start), and when the whole cache holds more
 *             than HA_TC_BUDGET every list gives back half;
 *   exit      the pthread key destructor hands every list back.
 * A thread that has exited (state 2) keeps working: its lists have max 0,
 * so every free goes straight to the central cache and every malloc takes
 * a single object — frees from later TLS destructors stay correct.
 *
 * Live caches are linked in a registry (for stats and exact profiling
 * totals); the registry lock is only taken on thread start and exit and by
 * readers of the totals.
 */
#include "alloc/internal.h"

#define HA_TC_BUDGET ((uint64_t)4 << 20)

HA_TLS ha_tcache ha_tc;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static ha_tcache *registry;
static uint64_t ncaches;
/* profiling totals of threads that have exited */
static uint64_t retired[4];

static inline uint64_t rd(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

ha_tcache *ha_tcache_attach(void)
{
	ha_tcache *tc = &ha_tc;
	if (tc->state != 0)
		return tc;
	ha_ensure_init();
	for (unsigned c = 1; c < HA_NCLASSES; c++)
		tc->list[c].max = ha_class_batch[c];
	pthread_mutex_lock(&registry_lock);
	tc->prev = NULL;
	tc->next = registry;
	if (registry)
		registry->prev = tc;
	registry = tc;
	ncaches++;
	pthread_mutex_unlock(&registry_lock);
	tc->state = 1;
	pthread_setspecific(ha_thread_key, tc);
	return tc;
}

void *ha_tcache_refill(unsigned cls, size_t n)
{
	ha_tcache *tc = &ha_tc;
	if (HA_UNLIKELY(cls == 0)) {         /* tables not built yet */
		ha_ensure_init();
		return ha_alloc(n);
	}
	if (HA_UNLIKELY(tc->state == 0))
		ha_tcache_attach();
	ha_tlist *l = &tc->list[cls];
	if (l->head) {                        /* attach raced nothing: retry */
		void *p = l->head;
		l->head = *(void **)p;
		l->len--;
		return p;
	}
	unsigned want = tc->state == 1 ? ha_class_batch[cls] : 1;
	__atomic_fetch_add(&ha_slow_allocs, 1, __ATOMIC_RELAXED);
	void *head;
	unsigned got = ha_central_fetch(cls, want, &head);
	if (HA_UNLIKELY(!got))
		return NULL;
	void *p = head;
	l->head = *(void **)p;
	l->len += got - 1;
	if (tc->state == 1 && l->max < 4 * ha_class_batch[cls])
		l->max += ha_class_batch[cls];
	return p;
}

/* Give back `count` objects from the front of l. */
static void give_back(ha_tlist *l, unsigned cls, unsigned count)
{
	if (!count)
		return;
	void *head = l->head, *tail = head;
	for (unsigned i = 1; i < count; i++)
		tail = *(void **)tail;
	l->head = *(void **)tail;
	*(void **)tail = NULL;
	l->len -= count;
	ha_central_release(cls, head, count);
}

static uint64_t cache_bytes(const ha_tcache *tc)
{
	uint64_t b = 0;
	for (unsigned c = 1; c < HA_NCLASSES; c++)
		b += (uint64_t)tc->list[c].len * ha_class_size[c];
	return b;
}

void ha_tcache_overflow(ha_tlist *l, unsigned cls)
{
	ha_tcache *tc = &ha_tc;
	if (HA_UNLIKELY(tc->state == 0)) {
		/* first call of this thread is a free: set the lists up */
		ha_tcache_attach();
	}
	if (l->len <= l->max)
		return;
	if (tc->state != 1) {
		give_back(l, cls, l->len);
		return;
	}
	unsigned batch = ha_class_batch[cls];
	give_back(l, cls, l->len < batch ? l->len : batch);
	if (cache_bytes(tc) > HA_TC_BUDGET)
		for (unsigned c = 1; c < HA_NCLASSES; c++) {
			give_back(&tc->list[c], c, tc->list[c].len / 2);
			if (tc->list[c].max > ha_class_batch[c])
				tc->list[c].max -= ha_class_batch[c];
		}
}

static void flush_all(ha_tcache *tc)
{
	for (unsigned c = 1; c < HA_NCLASSES; c++)
		give_back(&tc->list[c], c, tc->list[c].len);
}

void ha_tcache_flush_self(void)
{
	if (ha_tc.state == 1)
		flush_all(&ha_tc);
}

void ha_tcache_retire_prof(uint64_t ab, uint64_t ac, uint64_t fb, uint64_t fc)
{
	__atomic_fetch_add(&retired[0], ab, __ATOMIC_RELAXED);
	__atomic_fetch_add(&retired[1], ac, __ATOMIC_RELAXED);
	__atomic_fetch_add(&retired[2], fb, __ATOMIC_RELAXED);
	__atomic_fetch_add(&retired[3], fc, __ATOMIC_RELAXED);
}

void ha_tcache_thread_exit(void *arg)
{
	ha_tcache *tc = &ha_tc;
	(void)arg;
	if (tc->state != 1)
		return;
	tc->state = 2;
	for (unsigned c = 1; c < HA_NCLASSES; c++)
		tc->list[c].max = 0;
	flush_all(tc);
	pthread_mutex_lock(&registry_lock);
	if (tc->prev)
		tc->prev->next = tc->next;
	else
		registry = tc->next;
	if (tc->next)
		tc->next->prev = tc->prev;
	ncaches--;
	ha_tcache_retire_prof(tc->prof_alloc_bytes, tc->prof_alloc_count,
			      tc->prof_free_bytes, tc->prof_free_count);
	tc->prof_alloc_bytes = tc->prof_alloc_count = 0;
	tc->prof_free_bytes = tc->prof_free_count = 0;
	pthread_mutex_unlock(&registry_lock);
}

uint64_t ha_tcache_count(uint64_t *bytes)
{
	uint64_t b = 0, n;
	pthread_mutex_lock(&registry_lock);
	n = ncaches;
	for (ha_tcache *tc = registry; tc; tc = tc->next)
		for (unsigned c = 1; c < HA_NCLASSES; c++)
			b += (uint64_t)__atomic_load_n(&tc->list[c].len, __ATOMIC_RELAXED) * ha_class_size[c];
	pthread_mutex_unlock(&registry_lock);
	*bytes = b;
	return n;
}

void ha_tcache_prof_totals(uint64_t out[4])
{
	pthread_mutex_lock(&registry_lock);
	for (int i = 0; i < 4; i++)
		out[i] = rd(&retired[i]);
	for (ha_tcache *tc = registry; tc; tc = tc->next) {
		out[0] += rd(&tc->prof_alloc_bytes);
		out[1] += rd(&tc->prof_alloc_count);
		out[2] += rd(&tc->prof_free_bytes);
		out[3] += rd(&tc->prof_free_count);
	}
	pthread_mutex_unlock(&registry_lock);
}

void ha_tcache_reset_countdowns(int64_t v)
{
	pthread_mutex_lock(&registry_lock);
	for (ha_tcache *tc = registry; tc; tc = tc->next)
		__atomic_store_n(&tc->sample_left, v, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&registry_lock);
}

void ha_tcache_prefork(void)
{
	pthread_mutex_lock(&registry_lock);
}

void ha_tcache_postfork(int child)
{
	if (!child) {
		pthread_mutex_unlock(&registry_lock);
		return;
	}
	pthread_mutex_init(&registry_lock, NULL);
	/* Only the forking thread lives on.  Fold the others' profiling totals
	 * into retired and drop them from the registry; their cached objects
	 * are lost to the child, as with every thread-caching allocator. */
	ha_tcache *self = &ha_tc;
	for (ha_tcache *tc = registry; tc; tc = tc->next)
		if (tc != self)
			ha_tcache_retire_prof(tc->prof_alloc_bytes, tc->prof_alloc_count,
					      tc->prof_free_bytes, tc->prof_free_count);
	registry = NULL;
	ncaches = 0;
	if (self->state == 1) {
		self->prev = self->next = NULL;
		registry = self;
		ncaches = 1;
	}
}
