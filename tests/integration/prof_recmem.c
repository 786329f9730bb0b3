/* tests/integration/prof_recmem.c — what recording every allocation costs
 * (HEAP_PROFILE_SAMPLE_INTERVAL=1; tests/integration/prof_recmem.sh reads the profile
 * back through pprof).
 *
 *   prof_recmem PREFIX N
 *
 * Allocates blocks of the same classes before profiling starts (never
 * recorded, but they share spans with recorded ones), starts the profiler,
 * keeps N objects live from four sites (malloc of 16..200 bytes, calloc,
 * posix_memalign, and malloc with every other object freed), frees the
 * early blocks, then checks that heapalloc_get_stats().prof_memory holds
 * at least a 16-byte slot per live object and at most 64 bytes, dumps
 * PREFIX.0001.heap, stops, and frees everything (blocks of marked spans
 * with profiling off).  Prints "SITE BYTES OBJECTS" per site as the
 * profile must show them in use.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heapalloc.h"
#include "tests/lib/check.h"

#define EARLY 20000

static void **held;

static size_t size_a(long i)
{
	return 16 + (size_t)(i * 37 % 185);
}

static size_t size_d(long i)
{
	return 100 + (size_t)(i * 13 % 101);
}

__attribute__((noinline)) void recmem_site_a(long from, long to)
{
	for (long i = from; i < to; i++) {
		held[i] = malloc(size_a(i));
		memset(held[i], 'a', size_a(i));
	}
}

__attribute__((noinline)) void recmem_site_b(long from, long to)
{
	for (long i = from; i < to; i++) {
		unsigned char *p = calloc(1, 24);
		REQUIRE(p);
		for (int k = 0; k < 24; k++)
			CHECK_EQ(p[k], 0);
		held[i] = p;
	}
}

__attribute__((noinline)) void recmem_site_c(long from, long to)
{
	for (long i = from; i < to; i++) {
		REQUIRE(posix_memalign(&held[i], 64, 48) == 0);
		CHECK_EQ((uintptr_t)held[i] & 63, 0);
	}
}

__attribute__((noinline)) void recmem_site_d(long from, long to)
{
	for (long i = from; i < to; i++) {
		held[i] = malloc(size_d(i));
		memset(held[i], 'd', size_d(i));
	}
}

int main(int argc, char **argv)
{
	if (argc != 3)
		HARD_ERROR("usage: prof_recmem PREFIX N");
	long n = atol(argv[2]), q = n / 4;
	REQUIRE(n >= 4);
	/* unrecorded blocks of the classes the sites use */
	static void *early[EARLY];
	for (long i = 0; i < EARLY; i++)
		early[i] = malloc(i % 2 ? size_a(i) : 24);
	held = malloc((size_t)n * sizeof *held);
	REQUIRE(held);
	REQUIRE(heapalloc_profile_start(argv[1]) == 0);

	recmem_site_a(0, q);
	recmem_site_b(q, 2 * q);
	recmem_site_c(2 * q, 3 * q);
	recmem_site_d(3 * q, n);
	for (long i = 0; i < EARLY; i++)
		free(early[i]);
	uint64_t bytes_a = 0, bytes_d = 0, objs_d = 0;
	for (long i = 0; i < q; i++)
		bytes_a += size_a(i);
	for (long i = 3 * q; i < n; i++) {
		if ((i - 3 * q) % 2) {
			free(held[i]);
			held[i] = NULL;
		} else {
			bytes_d += size_d(i);
			objs_d++;
		}
	}
	long live = 3 * q + (long)objs_d;

	heapalloc_stats st;
	heapalloc_get_stats(&st);
	fprintf(stderr, "%ld live recorded objects: prof_memory %llu (%.1f bytes each)\n", live,
		(unsigned long long)st.prof_memory, (double)st.prof_memory / (double)live);
	/* the object map alone holds a 16-byte slot per object at <= 3/4 load */
	CHECK_GE(st.prof_memory, (uint64_t)live * 16 * 4 / 3);
	if (live >= 100000)
		CHECK_LE(st.prof_memory, (uint64_t)live * 64);
	REQUIRE(heapalloc_profile_dump("recmem") == 0);
	printf("recmem_site_a %llu %ld\n", (unsigned long long)bytes_a, q);
	printf("recmem_site_b %llu %ld\n", (unsigned long long)q * 24, q);
	printf("recmem_site_c %llu %ld\n", (unsigned long long)q * 48, q);
	printf("recmem_site_d %llu %llu\n", (unsigned long long)bytes_d,
	       (unsigned long long)objs_d);

	heapalloc_profile_stop();
	for (long i = 0; i < n; i++) {
		if (i < q)
			CHECK_EQ(((unsigned char *)held[i])[size_a(i) - 1], 'a');
		free(held[i]);
	}
	free(held);
	return CHECK_DONE();
}
