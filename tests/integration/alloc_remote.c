/* alloc_remote — blocks freed by other threads are never lost and never
 * handed out twice.  Producers allocate blocks of 8 B .. 2 MiB, fill each
 * with a pattern naming it (every word below 4 KiB, then one word a page
 * and the last word), and queue them to consumers, which check the whole
 * pattern, sometimes realloc the block (its pattern must survive the move)
 * and free it — a remote free — or queue a reply they allocated themselves
 * back to the producer, which checks and frees it there (remote the other
 * way).  Threads are made afresh each round, so records and caches of
 * exited threads are reused.  A block handed to two owners at once shows as
 * a pattern that changed under its owner; a block lost shows in the books:
 * after every thread has exited and malloc_trim(0), mallinfo2's in-use
 * bytes and heapalloc_get_stats' large blocks are back exactly where they
 * were before the first round.
 *   alloc_remote [MESSAGES_PER_PRODUCER [ROUNDS]]   (default MESSAGES, ROUNDS:
 *   40000 and 3; the stress tier's build 400000 and 6)
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "tests/lib/check.h"
#include "heapalloc.h"

#ifndef MESSAGES
#define MESSAGES 40000
#endif
#ifndef ROUNDS
#define ROUNDS 3
#endif
enum { NP = 2, NC = 2, RING = 256 };

typedef struct msg { uint64_t *p; size_t n; uint64_t tag; } msg;

/* A bounded ring of messages between threads. */
typedef struct ring {
	pthread_mutex_t m;
	pthread_cond_t nonempty, nonfull;
	msg q[RING];
	unsigned head, len, closed;
} ring;

static ring to_cons[NC], to_prod[NP];
static long per_producer = MESSAGES;
static long bad_blocks, cons_done;
static pthread_mutex_t bad_lock = PTHREAD_MUTEX_INITIALIZER;

static void ring_init(ring *r)
{
	pthread_mutex_init(&r->m, NULL);
	pthread_cond_init(&r->nonempty, NULL);
	pthread_cond_init(&r->nonfull, NULL);
	r->head = r->len = r->closed = 0;
}

static void put(ring *r, msg x)
{
	pthread_mutex_lock(&r->m);
	while (r->len == RING)
		pthread_cond_wait(&r->nonfull, &r->m);
	r->q[(r->head + r->len++) % RING] = x;
	pthread_cond_signal(&r->nonempty);
	pthread_mutex_unlock(&r->m);
}

/* 1 with a message, 0 when the ring is closed and empty; wait: block. */
static int get(ring *r, msg *x, int wait)
{
	pthread_mutex_lock(&r->m);
	while (!r->len && !r->closed && wait)
		pthread_cond_wait(&r->nonempty, &r->m);
	int got = r->len > 0;
	if (got) {
		*x = r->q[r->head];
		r->head = (r->head + 1) % RING;
		r->len--;
		pthread_cond_signal(&r->nonfull);
	}
	pthread_mutex_unlock(&r->m);
	return got ? 1 : (r->closed || !wait) ? 0 : 1;
}

static void ring_close(ring *r)
{
	pthread_mutex_lock(&r->m);
	r->closed = 1;
	pthread_cond_broadcast(&r->nonempty);
	pthread_mutex_unlock(&r->m);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* 70% 8-256 B, 25% to 8 KiB, 4% to 32 KiB, 1% to 2 MiB (large and huge) */
static size_t pick_size(uint64_t *s)
{
	uint64_t r = rnd(s), k = r % 100;
	r >>= 8;
	if (k < 70)
		return 8 + r % 249;
	if (k < 95)
		return 257 + r % (8192 - 257);
	if (k < 99)
		return 8193 + r % (32768 - 8193);
	return 32769 + r % ((2u << 20) - 32769);
}

/* The words the pattern covers: all below 4 KiB, one a page after, the
 * last; next_word(i, w) is the one after word i of w, w when none. */
static size_t next_word(size_t i, size_t w)
{
	if (i < 511)
		return i + 1;
	if (i + 512 < w - 1)
		return i + 512;
	return i == w - 1 ? w : w - 1;
}
#define EACH_WORD(n, i) for (size_t i = 0; i < (n) / 8; i = next_word(i, (n) / 8))

static uint64_t word(uint64_t tag, size_t i)
{
	return (tag ^ (i * 0x9E3779B97F4A7C15ull)) | 1;
}

static void fill(uint64_t *p, size_t n, uint64_t tag)
{
	EACH_WORD(n, i)
		p[i] = word(tag, i);
}

/* The pattern of a block of n bytes, as far as its first `upto` bytes
 * (a realloc kept no more); counts a bad block once. */
static void check_upto(const uint64_t *p, size_t n, size_t upto, uint64_t tag)
{
	EACH_WORD(n, i)
		if (i < upto / 8 && p[i] != word(tag, i)) {
			pthread_mutex_lock(&bad_lock);
			if (bad_blocks++ < 5)
				fprintf(stderr, "block %p (%zu bytes, tag %llx): word %zu is %llx\n", (void *)p, n,
					(unsigned long long)tag, i, (unsigned long long)p[i]);
			pthread_mutex_unlock(&bad_lock);
			return;
		}
}

static void check(const uint64_t *p, size_t n, uint64_t tag)
{
	check_upto(p, n, n, tag);
}

static msg make(uint64_t *s, uint64_t tag)
{
	size_t n = pick_size(s) & ~(size_t)7;
	uint64_t *p = malloc(n);
	REQUIRE(p != NULL);
	fill(p, n, tag);
	return (msg){ p, n, tag };
}

static void *producer(void *arg)
{
	long id = (long)arg;
	uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(id + 7), tag = (uint64_t)id << 48;
	msg back;
	for (long k = 0; k < per_producer; k++) {
		put(&to_cons[rnd(&s) % NC], make(&s, ++tag));
		while (get(&to_prod[id], &back, 0)) {   /* replies, freed here */
			check(back.p, back.n, back.tag);
			free(back.p);
		}
	}
	return NULL;
}

static void *consumer(void *arg)
{
	long id = (long)arg;
	uint64_t s = 0xD1B54A32D192ED03ull * (uint64_t)(id + 3), tag = (uint64_t)(id + 100) << 48;
	msg x;
	while (get(&to_cons[id], &x, 1)) {
		check(x.p, x.n, x.tag);
		uint64_t r = rnd(&s) % 8;
		if (r == 0) {
			/* moved or not, the pattern of what stays must stay */
			size_t m = (x.n / 2 + 8 + (rnd(&s) % 3) * x.n) & ~(size_t)7;
			uint64_t *q = realloc(x.p, m);
			REQUIRE(q != NULL);
			check_upto(q, x.n, m, x.tag);
			x.p = q;
			x.n = m;
			fill(q, m, x.tag);
		}
		if (r < 3) {
			/* a reply this thread allocates, freed by the producer */
			put(&to_prod[(x.tag >> 48) % NP], make(&s, ++tag));
		}
		free(x.p);
	}
	__atomic_fetch_add(&cons_done, 1, __ATOMIC_RELAXED);
	return NULL;
}

static void *idle(void *arg)
{
	return arg;
}

static size_t in_use(uint64_t *large)
{
	heapalloc_stats st;
	malloc_trim(0);
	heapalloc_get_stats(&st);
	*large = st.large_blocks;
	return mallinfo2().uordblks;
}

int main(int argc, char **argv)
{
	long rounds = ROUNDS;
	if (argc > 1)
		per_producer = atol(argv[1]);
	if (argc > 2)
		rounds = atol(argv[2]);
	/* threads made and joined first: glibc keeps their stacks, and the
	 * TLS vectors it allocated for them, for the rounds' threads */
	pthread_t w[NP + NC];
	for (int i = 0; i < NP + NC; i++)
		REQUIRE(pthread_create(&w[i], NULL, idle, NULL) == 0);
	for (int i = 0; i < NP + NC; i++)
		REQUIRE(pthread_join(w[i], NULL) == 0);
	uint64_t large0;
	size_t base = in_use(&large0);
	for (long round = 0; round < rounds; round++) {
		pthread_t p[NP], c[NC];
		for (int i = 0; i < NC; i++)
			ring_init(&to_cons[i]);
		for (int i = 0; i < NP; i++)
			ring_init(&to_prod[i]);
		for (long i = 0; i < NC; i++)
			REQUIRE(pthread_create(&c[i], NULL, consumer, (void *)i) == 0);
		for (long i = 0; i < NP; i++)
			REQUIRE(pthread_create(&p[i], NULL, producer, (void *)i) == 0);
		for (int i = 0; i < NP; i++)
			REQUIRE(pthread_join(p[i], NULL) == 0);
		for (int i = 0; i < NC; i++)
			ring_close(&to_cons[i]);
		for (int i = 0; i < NC; i++)
			REQUIRE(pthread_join(c[i], NULL) == 0);
		/* the replies still queued, freed by this thread */
		msg back;
		for (int i = 0; i < NP; i++)
			while (get(&to_prod[i], &back, 0)) {
				check(back.p, back.n, back.tag);
				free(back.p);
			}
	}
	uint64_t large1;
	size_t end = in_use(&large1);
	fprintf(stderr, "%ld rounds of %d x %ld messages: %ld bad blocks; in use %zu bytes before, "
		"%zu after; large blocks %llu before, %llu after\n",
		rounds, NP, per_producer, bad_blocks, base, end, (unsigned long long)large0,
		(unsigned long long)large1);
	CHECK_EQ(bad_blocks, 0);
	CHECK_EQ(cons_done, rounds * NC);
	CHECK_EQ(end, base);
	CHECK_EQ(large1, large0);
	return CHECK_DONE();
}
