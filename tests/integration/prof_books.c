/* tests/integration/prof_books.c — the default mode's dump totals against ground truth
 * (docs/heap-profile-spec.md §5): no header, the totals from the allocator's books, in the
 * allocated unit (a small block's class size, a big block's requested
 * bytes).  Known sizes of every tier are allocated, some kept and some
 * freed, by the main thread and by threads that have exited when the
 * totals are read; heapalloc_get_stats must move by exactly the ground
 * truth, allocated and freed, at every sampling interval (samples are big
 * blocks whose books follow the same unit).  Each class size is learnt
 * from malloc_usable_size of unsampled blocks (learn_units).
 */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heapalloc.h"
#include "tests/lib/check.h"
#include "tests/lib/prof_util.h"

static const size_t sizes[] = { 1, 8, 16, 17, 100, 1000, 1024, 4000, 10000, 32768,
				40000, 200000, (size_t)2 << 20 };
#define NS (sizeof sizes / sizeof sizes[0])
#define ROUNDS 40
#define THREADS 3
static size_t unit[NS];

typedef struct work {
	uint64_t alloc, freed;
	void *kept[ROUNDS * NS];
	int nkept;
} work;

/* Allocate every size ROUNDS times, fill and check each block, keep every
 * third, free the rest. */
static void *run(void *arg)
{
	work *w = arg;
	for (int r = 0; r < ROUNDS; r++)
		for (unsigned i = 0; i < NS; i++) {
			unsigned char *p = malloc(sizes[i]);
			if (!p)
				abort();
			memset(p, r + 1, sizes[i]);
			w->alloc += unit[i];
			if ((r + i) % 3 == 0) {
				w->kept[w->nkept++] = p;
			} else {
				if (p[sizes[i] - 1] != r + 1)
					abort();
				free(p);
				w->freed += unit[i];
			}
		}
	return NULL;
}

static void *nothing(void *arg)
{
	return arg;
}

/* A class size is the usable size of an unsampled block; the always-on
 * sampling (at the run's interval: every 32 KiB block at 4096) makes
 * sampled blocks report another, so the parent, sampling at most at the
 * default interval, learns them (the most common of 64) and hands them to
 * the runs in PROF_BOOKS_UNITS. */
static void learn_units(char *out, size_t cap)
{
	size_t k = 0;
	for (unsigned i = 0; i < NS; i++) {
		size_t got[64], best = 0, bestn = 0;
		for (int j = 0; j < 64; j++) {
			void *p = malloc(sizes[i]);
			REQUIRE(p);
			got[j] = sizes[i] <= 32768 ? malloc_usable_size(p) : sizes[i];
			free(p);
		}
		for (int j = 0; j < 64; j++) {
			size_t n = 0;
			for (int m = 0; m < 64; m++)
				n += got[m] == got[j];
			if (n > bestn)
				bestn = n, best = got[j];
		}
		k += (size_t)snprintf(out + k, cap - k, "%s%zu", i ? "," : "", best);
	}
}

static void session(const char *dir, const char *interval)
{
	const char *u = getenv("PROF_BOOKS_UNITS");
	REQUIRE(u);
	for (unsigned i = 0; i < NS; i++) {
		char *end;
		unit[i] = strtoull(u, &end, 10);
		REQUIRE(end != u);
		u = *end ? end + 1 : end;
	}
	char prefix[300];
	snprintf(prefix, sizeof prefix, "%s/b%s", dir, interval);
	REQUIRE(heapalloc_profile_start(prefix) == 0);
	static work w[THREADS + 1];
	pthread_t t[THREADS];
	/* glibc allocates for a thread's first start (its TLS vector): let
	 * that happen before the totals are read */
	static work warm[THREADS];
	for (int k = 0; k < THREADS; k++)
		REQUIRE(pthread_create(&t[k], NULL, nothing, &warm[k]) == 0);
	for (int k = 0; k < THREADS; k++)
		REQUIRE(pthread_join(t[k], NULL) == 0);
	heapalloc_stats a, b, c;
	heapalloc_get_stats(&a);
	run(&w[0]);
	for (int k = 1; k <= THREADS; k++)
		REQUIRE(pthread_create(&t[k - 1], NULL, run, &w[k]) == 0);
	for (int k = 1; k <= THREADS; k++)
		REQUIRE(pthread_join(t[k - 1], NULL) == 0);
	heapalloc_get_stats(&b);
	uint64_t alloc = 0, freed = 0, kept = 0;
	for (int k = 0; k <= THREADS; k++) {
		alloc += w[k].alloc;
		freed += w[k].freed;
		for (int j = 0; j < w[k].nkept; j++)
			free(w[k].kept[j]);
		kept += w[k].alloc - w[k].freed;
	}
	heapalloc_get_stats(&c);
	fprintf(stderr, "interval %s: allocated %llu, freed %llu then %llu (want %llu, %llu, %llu)\n",
		interval, (unsigned long long)(b.prof_alloc_bytes - a.prof_alloc_bytes),
		(unsigned long long)(b.prof_free_bytes - a.prof_free_bytes),
		(unsigned long long)(c.prof_free_bytes - b.prof_free_bytes),
		(unsigned long long)alloc, (unsigned long long)freed, (unsigned long long)kept);
	CHECK_EQ(b.prof_alloc_bytes - a.prof_alloc_bytes, alloc);
	CHECK_EQ(b.prof_free_bytes - a.prof_free_bytes, freed);
	CHECK_EQ(c.prof_free_bytes - b.prof_free_bytes, kept);
	CHECK_EQ(c.prof_alloc_bytes - b.prof_alloc_bytes, 0);
	if (strcmp(interval, "1") != 0)
		CHECK(c.prof_samples > 0);
	heapalloc_profile_stop();
}

int main(int argc, char **argv)
{
	if (getenv("HEAPPROFILE"))
		SKIP("HEAPPROFILE is set");
	if (argc == 3) {
		session(argv[1], argv[2]);
		return CHECK_DONE();
	}
	char dir[] = "/tmp/prof_books.XXXXXX";
	REQUIRE(mkdtemp(dir));
	static const char *const intervals[] = { "4096", "524288" };
	static char units[NS * 24];
	learn_units(units, sizeof units);
	for (int k = 0; k < 2; k++) {
		const char *env[] = { "HEAP_PROFILE_ALLOCATION_INTERVAL", "0",
				      "HEAP_PROFILE_INUSE_INTERVAL", "0",
				      "PROF_BOOKS_UNITS", units, NULL };
		CHECK(rerun_self(argv[0], dir, intervals[k], env));
	}
	CHECK(remove_dir(dir));
	return CHECK_DONE();
}
