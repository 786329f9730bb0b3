/* alloc_decay — with the opt-in purge thread (HEAPALLOC_PURGE_THREAD=1,
 * set here) free memory is given back on a delay, not at once:
 *   - a program that cycles 48 MiB of small blocks (allocate all, free
 *     all, again) faults its pages in once: the second and third cycles
 *     take fewer than a tenth of the first cycle's page faults, and RSS
 *     stays up between cycles;
 *   - once it goes quiet for longer than the delay (1 s), its next refill
 *     gives the idle memory back: RSS falls by at least 32 MiB;
 *   - malloc_trim(0) gives it back at once, without waiting. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

enum { N = 48 * 1024, SIZE = 1024 };   /* 48 MiB of 1 KiB blocks */
static void *v[N];

static long faults(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

/* Allocate every block, touch every page of it, free them all; returns
 * the minor faults it took. */
static long cycle(unsigned salt)
{
	long f0 = faults();
	for (int i = 0; i < N; i++) {
		v[i] = malloc(SIZE);
		REQUIRE(v[i]);
		pat_fill(v[i], 64, salt + i);
		((char *)v[i])[SIZE - 1] = (char)i;
	}
	size_t bad = 0;
	for (int i = 0; i < N; i++) {
		bad += pat_check(v[i], 64, salt + i) != (size_t)-1;
		free(v[i]);
	}
	CHECK_EQ(bad, 0);
	return faults() - f0;
}

/* A refill: enough small blocks of one class to reach the central cache. */
static void touch_allocator(void)
{
	void *w[4096];
	for (int i = 0; i < 4096; i++)
		w[i] = malloc(48);
	for (int i = 0; i < 4096; i++)
		free(w[i]);
}

int main(void)
{
	setenv("HEAPALLOC_PURGE_THREAD", "1", 1);   /* read when a cache first passes its floor */
	long first = cycle(1);
	long rss_after_first = rss_kib();
	long second = cycle(2), third = cycle(3);
	long rss_between = rss_kib();
	fprintf(stderr, "faults: %ld, %ld, %ld; RSS %ld KiB, %ld KiB\n", first, second, third,
		rss_after_first, rss_between);
	CHECK_GE(first, (long)N * SIZE / 4096 / 2);   /* the pages were really new */
	CHECK_LE(second * 10, first);
	CHECK_LE(third * 10, first);
	CHECK_GE(rss_between, 40 * 1024);               /* kept while cycling */

	struct timespec t = { 1, 600000000 };
	nanosleep(&t, NULL);
	touch_allocator();
	long rss_quiet = rss_kib();
	fprintf(stderr, "after 1.6 s quiet and a refill: RSS %ld KiB\n", rss_quiet);
	CHECK_LE(rss_quiet, rss_between - 32 * 1024);

	cycle(4);
	long rss_again = rss_kib();
	malloc_trim(0);
	long rss_trim = rss_kib();
	fprintf(stderr, "cycled again: RSS %ld KiB; after malloc_trim: %ld KiB\n", rss_again, rss_trim);
	CHECK_LE(rss_trim, rss_again - 32 * 1024);
	return CHECK_DONE();
}
