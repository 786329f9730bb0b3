/* alloc_threads — 8 threads share 4096 slots; each picks slots at random
 * and mallocs, callocs, memaligns, reallocs or frees what is there, so most
 * blocks are freed or resized by a thread other than the one that made them.
 * Every block carries its own pattern over all its bytes, verified before it
 * is resized or freed (calloc'd blocks must be zero, aligned ones aligned).
 * A ninth thread calls malloc_trim and mallinfo2 all along.
 * Bounded: 120000 operations per thread or 2.5 seconds, whichever is first,
 * but never fewer than 3072 per thread (24576 in all): on a loaded or
 * emulated machine the clock would otherwise decide how much is tested. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <dlfcn.h>
#include "heapalloc.h"
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

enum { NT = 8, NSLOT = 4096, OPS = 120000, MIN_OPS = 3072 };

struct slot {
	pthread_mutex_t lock;
	unsigned char *p;
	size_t n;
	uint32_t seed;
	long owner; /* thread that allocated or last resized the block */
};
static struct slot slots[NSLOT];
static atomic_long bad_blocks, ops_done, cross_frees;
static atomic_uint seeds = 1;
static double deadline;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
	return *s;
}

static size_t pick_size(uint64_t *r)
{
	unsigned k = next(r) % 100;
	if (k < 70) return 1 + next(r) % 256;
	if (k < 90) return 257 + next(r) % 3840;
	if (k < 98) return 4097 + next(r) % 36000;
	if (next(r) % 8) return 40001 + next(r) % 260000;
	return ((size_t)1 << 20) + next(r) % (2u << 20); /* 1-3 MiB: the huge path */
}

static void report(const char *what, const void *p, size_t n, size_t at)
{
	atomic_fetch_add(&bad_blocks, 1);
	fprintf(stderr, "FAIL %s: block %p size %zu, byte %zu\n", what, p, n, at);
}

/* A new block of n bytes holding pattern `seed`. */
static unsigned char *make(uint64_t *r, size_t n, uint32_t seed)
{
	unsigned char *p = NULL;
	size_t align = 0;
	switch (next(r) % 8) {
	case 0: case 1: case 2: case 3: p = malloc(n); break;
	case 4:
		p = calloc(1, n);
		if (p) {
			size_t z = zero_check(p, n);
			if (z != (size_t)-1)
				report("calloc not zeroed", p, n, z);
		}
		break;
	case 5: align = (size_t)16 << (next(r) % 9); p = memalign(align, n); break;
	case 6:
		align = (size_t)8 << (next(r) % 10);
		if (posix_memalign((void **)&p, align, n))
			p = NULL;
		break;
	default: align = (size_t)64 << (next(r) % 4); p = aligned_alloc(align, n); break;
	}
	if (!p) {
		report("allocation returned NULL", p, n, 0);
		return NULL;
	}
	if (align && (uintptr_t)p % align)
		report("misaligned", p, n, align);
	if (malloc_usable_size(p) < n)
		report("usable size below request", p, n, malloc_usable_size(p));
	pat_fill(p, n, seed);
	return p;
}

static void *worker(void *arg)
{
	uint64_t r = 0x9E3779B97F4A7C15ull * ((uintptr_t)arg + 1);
	long me = (long)(uintptr_t)arg;
	for (long op = 0; op < OPS; op++) {
		if ((op & 1023) == 0 && op >= MIN_OPS && now() > deadline)
			break;
		struct slot *s = &slots[next(&r) % NSLOT];
		pthread_mutex_lock(&s->lock);
		unsigned char *p = s->p;
		size_t n = s->n;
		uint32_t seed = s->seed;
		long owner = s->owner;
		s->p = NULL;
		pthread_mutex_unlock(&s->lock);

		if (p) {
			size_t at = pat_check(p, n, seed);
			if (at != (size_t)-1)
				report("pattern damaged", p, n, at);
			unsigned k = next(&r) % 10;
			if (k < 5) {
				free(p);
				if (owner != me)
					atomic_fetch_add(&cross_frees, 1);
				p = NULL;
			} else if (k < 8) {
				size_t m = pick_size(&r);
				unsigned char *q = realloc(p, m);
				if (!q) {
					report("realloc returned NULL", p, m, 0);
					free(p);
					p = NULL;
				} else {
					size_t keep = n < m ? n : m;
					at = pat_check(q, keep, seed);
					if (at != (size_t)-1)
						report("realloc lost contents", q, m, at);
					p = q;
					n = m;
					seed = atomic_fetch_add(&seeds, 1);
					pat_fill(p, n, seed);
				}
			}
		} else {
			n = pick_size(&r);
			seed = atomic_fetch_add(&seeds, 1);
			p = make(&r, n, seed);
		}
		if (p) {
			pthread_mutex_lock(&s->lock);
			if (!s->p) {
				s->p = p;
				s->n = n;
				s->seed = seed;
				s->owner = me;
				p = NULL;
			}
			pthread_mutex_unlock(&s->lock);
			free(p); /* someone filled the slot meanwhile */
		}
		atomic_fetch_add_explicit(&ops_done, 1, memory_order_relaxed);
	}
	return NULL;
}

/* Meanwhile a ninth thread keeps calling the whole-heap functions:
 * malloc_trim, mallinfo2 and (under heapalloc) heapalloc_get_stats. */
static atomic_int janitor_stop;
static atomic_long janitor_rounds;
static void *janitor(void *arg)
{
	void (*stats)(heapalloc_stats *) = (void (*)(heapalloc_stats *))dlsym(RTLD_DEFAULT,
									 "heapalloc_get_stats");
	(void)arg;
	while (!atomic_load(&janitor_stop)) {
		int rc = malloc_trim(0);
		if (rc != 0 && rc != 1)
			report("malloc_trim returned neither 0 nor 1", NULL, 0, (size_t)rc);
		struct mallinfo2 m = mallinfo2();
		if (m.uordblks + m.hblkhd == 0)
			report("mallinfo2 shows nothing in use while blocks are live", NULL, 0, 0);
		if (stats) {
			heapalloc_stats hs;
			stats(&hs);
		}
		atomic_fetch_add(&janitor_rounds, 1);
		struct timespec ts = { 0, 2000000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

int main(void)
{
	pthread_t t[NT], jt;
	for (int i = 0; i < NSLOT; i++)
		pthread_mutex_init(&slots[i].lock, NULL);
	deadline = now() + 2.5;
	for (long i = 0; i < NT; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)i))
			HARD_ERROR("pthread_create");
	if (pthread_create(&jt, NULL, janitor, NULL))
		HARD_ERROR("pthread_create");
	for (int i = 0; i < NT; i++)
		pthread_join(t[i], NULL);
	atomic_store(&janitor_stop, 1);
	pthread_join(jt, NULL);
	/* main frees what is left, checking it once more */
	for (int i = 0; i < NSLOT; i++)
		if (slots[i].p) {
			size_t at = pat_check(slots[i].p, slots[i].n, slots[i].seed);
			if (at != (size_t)-1)
				report("pattern damaged at the end", slots[i].p, slots[i].n, at);
			free(slots[i].p);
		}
	fprintf(stderr, "%ld operations, %ld frees by a thread other than the allocating one, "
		"%ld malloc_trim/mallinfo2 rounds\n", (long)ops_done, (long)cross_frees,
		(long)janitor_rounds);
	CHECK_EQ(bad_blocks, 0);
	CHECK_GE(cross_frees, 2000);
	return CHECK_DONE();
}
