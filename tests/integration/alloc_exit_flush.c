/* alloc_exit_flush — a thread's exit hands back every block its cache
 * holds, whichever way each class's stack came into use: by malloc (and the
 * frees that refill it), or by a first free of a block another thread
 * allocated (no malloc of that class in the thread at all).  Threads of
 * three kinds, each over every size from 16 B to 32 KiB; every block's
 * pattern is checked before it is freed.  After the joins, heapalloc's
 * books say that the bytes in use in small spans are what they were before
 * the main thread's foreign blocks were allocated: a class left out of the
 * exit flush would keep its blocks counted as in use, a whole thread's
 * cache of them. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"
#include "heapalloc.h"

enum { NT = 12, K = 6, NSIZES = 64 };

/* 16 B .. 32 KiB, every 16 bytes up to 256, then steps of about 1/8 */
static size_t sizes[NSIZES];
static int nsizes;

struct job {
	int kind, id, bad;
	void *foreign[NSIZES];   /* kind 1 and 2: blocks main allocated */
};

static uint32_t seed_of(int id, int s, int k)
{
	return (uint32_t)(id * 7919 + s * 131 + k + 1);
}

static int free_foreign(struct job *j)
{
	for (int s = nsizes - 1; s >= 0; s--) {   /* not the order they came in */
		if (pat_check(j->foreign[s], sizes[s], seed_of(1000 + j->id, s, 0)) != (size_t)-1)
			return 1;
		free(j->foreign[s]);
	}
	return 0;
}

static void *body(void *arg)
{
	struct job *j = arg;
	void *v[NSIZES][K];
	/* kind 1: the first thing each class sees here is a free */
	if (j->kind != 0 && free_foreign(j)) {
		j->bad = 1;
		return NULL;
	}
	if (j->kind == 1)
		return NULL;
	/* kinds 0 and 2: K blocks of every size, freed in another order, so
	 * that the stacks hold them at exit */
	for (int s = 0; s < nsizes; s++)
		for (int k = 0; k < K; k++) {
			v[s][k] = malloc(sizes[s]);
			if (!v[s][k]) {
				j->bad = 1;
				return NULL;
			}
			pat_fill(v[s][k], sizes[s], seed_of(j->id, s, k));
		}
	for (int k = K - 1; k >= 0; k--)
		for (int s = 0; s < nsizes; s++) {
			if (pat_check(v[s][k], sizes[s], seed_of(j->id, s, k)) != (size_t)-1)
				j->bad = 1;
			free(v[s][k]);
		}
	return NULL;
}

static int64_t in_use(void (*stats)(heapalloc_stats *))
{
	heapalloc_stats st;
	memset(&st, 0, sizeof st);
	stats(&st);
	return (int64_t)(st.small_span_bytes - st.small_free_bytes);
}

int main(void)
{
	void (*stats)(heapalloc_stats *) = (void (*)(heapalloc_stats *))dlsym(RTLD_DEFAULT,
									 "heapalloc_get_stats");
	for (size_t n = 16; n <= 32768 && nsizes < NSIZES; n += n < 256 ? 16 : n / 8)
		sizes[nsizes++] = n;
	sizes[nsizes - 1] = 32768;
	static struct job jobs[NT];
	int64_t before = stats ? in_use(stats) : 0;
	int64_t foreign = 0;
	for (int i = 0; i < NT; i++) {
		jobs[i].kind = i % 3;
		jobs[i].id = i;
		if (jobs[i].kind == 0)
			continue;
		for (int s = 0; s < nsizes; s++) {
			jobs[i].foreign[s] = malloc(sizes[s]);
			REQUIRE(jobs[i].foreign[s]);
			pat_fill(jobs[i].foreign[s], sizes[s], seed_of(1000 + i, s, 0));
			foreign += (int64_t)sizes[s];
		}
	}
	int64_t loaded = stats ? in_use(stats) : 0;
	pthread_t t[NT];
	for (int i = 0; i < NT; i++)
		if (pthread_create(&t[i], NULL, body, &jobs[i]))
			HARD_ERROR("pthread_create");
	for (int i = 0; i < NT; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(jobs[i].bad, 0);
	}
	if (!stats) {
		fprintf(stderr, "not under heapalloc: patterns checked, books not\n");
		return CHECK_DONE();
	}
	int64_t after = in_use(stats);
	/* the foreign blocks were counted in use (in class units, >= their
	 * sizes); the main thread's own cache (a thread's TLS vector, which
	 * pthread_create allocates here) moves by a few KiB at most */
	CHECK_GE(loaded - before, foreign);
	CHECK_LE(after - before, 64 << 10);
	CHECK_GE(after - before, -(64 << 10));
	fprintf(stderr, "in use: before %lld, with foreign blocks %lld (%lld requested), after the threads %lld\n",
		(long long)before, (long long)loaded, (long long)foreign, (long long)after);
	return CHECK_DONE();
}
