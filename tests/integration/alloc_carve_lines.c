/* tests/integration/alloc_carve_lines.c — active false sharing: two threads
 * that allocate small blocks at the same time, from the same fresh spans,
 * never get blocks on one 128-byte line pair (the pair x86's adjacent-line
 * prefetcher moves together).  Otherwise each writes a line the other
 * writes too, for as long as the blocks live: glibc's bench-malloc-thread
 * ran at two thirds of its speed.  Every block keeps its pattern. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

#define NT 2
#define NB 6000           /* blocks a thread allocates */
#define PAIR 128

static char *blk[NT][NB];
static size_t len[NT][NB];
static pthread_barrier_t start, done;

static void *alloc_many(void *arg)
{
	int t = (int)(intptr_t)arg;
	uint64_t r = 0x9E3779B97F4A7C15ull * (uint64_t)(t + 1);
	pthread_barrier_wait(&start);
	for (int i = 0; i < NB; i++) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		/* 1 .. 480 bytes: every class whose blocks are not whole pairs */
		len[t][i] = 1 + (size_t)(r >> 33) % 480;
		blk[t][i] = malloc(len[t][i]);
		REQUIRE(blk[t][i] != NULL);
		pat_fill(blk[t][i], len[t][i], (uint32_t)(t * NB + i));
	}
	/* a thread that exits first hands its cached blocks back, and the
	 * other may take them: reuse, not carving, which is checked here */
	pthread_barrier_wait(&done);
	return NULL;
}

static int by_addr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

int main(void)
{
	pthread_t th[NT];
	REQUIRE(pthread_barrier_init(&start, NULL, NT) == 0);
	REQUIRE(pthread_barrier_init(&done, NULL, NT) == 0);
	for (int t = 0; t < NT; t++)
		REQUIRE(pthread_create(&th[t], NULL, alloc_many, (void *)(intptr_t)t) == 0);
	for (int t = 0; t < NT; t++)
		REQUIRE(pthread_join(th[t], NULL) == 0);

	/* every pair a block touches, tagged with its thread; sorted, a pair
	 * that appears with both tags is shared */
	size_t cap = 0, n = 0;
	for (int t = 0; t < NT; t++)
		for (int i = 0; i < NB; i++)
			cap += len[t][i] / PAIR + 2;
	uintptr_t *v = malloc(cap * sizeof *v);
	REQUIRE(v != NULL);
	for (int t = 0; t < NT; t++)
		for (int i = 0; i < NB; i++) {
			uintptr_t a = (uintptr_t)blk[t][i], e = a + len[t][i] - 1;
			for (uintptr_t p = a / PAIR; p <= e / PAIR; p++)
				v[n++] = p << 1 | (uintptr_t)t;
		}
	qsort(v, n, sizeof *v, by_addr);
	size_t pairs = 0, shared = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		unsigned who = 0;
		for (; j < n && v[j] >> 1 == v[i] >> 1; j++)
			who |= 1u << (v[j] & 1);
		pairs++;
		shared += who == 3;
		i = j;
	}
	fprintf(stderr, "%zu line pairs hold the blocks of %d threads; %zu hold blocks of both\n",
		pairs, NT, shared);
	CHECK_GE(pairs, (size_t)(NT * NB / 8));
	CHECK_EQ(shared, (size_t)0);
	free(v);

	for (int t = 0; t < NT; t++)
		for (int i = 0; i < NB; i++) {
			CHECK_EQ(pat_check(blk[t][i], len[t][i], (uint32_t)(t * NB + i)), (size_t)-1);
			free(blk[t][i]);
		}
	return CHECK_DONE();
}
