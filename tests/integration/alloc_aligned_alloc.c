/* alloc_aligned_alloc — aligned_alloc fails an alignment that is not a power
 * of two (0, 3, 9, 17, 24, 33, 65, 96, 4097, 2^62 + 1, SIZE_MAX) with NULL
 * and errno EINVAL, as C17 (DR 460) and glibc 2.38 do, from the main thread
 * and a second one; every power of two from 1 to 2^21 works and aligns;
 * memalign still rounds such alignments up to the next power of two, as
 * glibc does; a failed call leaves no block behind (RSS flat over a loop). */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

static volatile size_t vsize;
static size_t sz(size_t n) { vsize = n; return vsize; }   /* no constant folding */

static const size_t bad[] = { 0, 3, 9, 17, 24, 33, 65, 96, 4097, ((size_t)1 << 62) + 1, SIZE_MAX };

static void *check_all(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		static const size_t sizes[] = { 0, 1, 64, 40000, 3 << 20 };
		for (size_t j = 0; j < sizeof sizes / sizeof *sizes; j++) {
			errno = 0;
			void *p = aligned_alloc(sz(bad[i]), sz(sizes[j]));
			if (p || errno != EINVAL)
				fprintf(stderr, "aligned_alloc(%zu, %zu) = %p, errno %d\n", bad[i],
					sizes[j], p, errno);
			CHECK(p == NULL);
			CHECK_EQ(errno, EINVAL);
			free(p);
		}
	}
	for (unsigned sh = 0; sh <= 21; sh++) {
		size_t a = (size_t)1 << sh;
		errno = 0;
		char *p = aligned_alloc(sz(a), sz(a * 2));
		REQUIRE(p != NULL);
		CHECK_EQ((uintptr_t)p % a, 0);
		CHECK_EQ(errno, 0);
		pat_fill(p, a * 2, sh);
		CHECK_EQ(pat_check(p, a * 2, sh), (size_t)-1);
		free(p);
	}
	/* memalign keeps glibc's rounding: 3 -> 4, 17 -> 32, 65 -> 128, 4097 -> 8192 */
	static const size_t round[][2] = { { 3, 4 }, { 17, 32 }, { 65, 128 }, { 4097, 8192 } };
	for (size_t i = 0; i < sizeof round / sizeof *round; i++) {
		void *p = memalign(sz(round[i][0]), sz(100));
		REQUIRE(p != NULL);
		CHECK_EQ((uintptr_t)p % round[i][1], 0);
		free(p);
	}
	return NULL;
}

int main(void)
{
	check_all(NULL);
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, check_all, NULL) == 0);
	pthread_join(t, NULL);
	long before = rss_kib();
	for (int i = 0; i < 200000; i++)
		CHECK(aligned_alloc(sz(24), sz(4096)) == NULL);
	long after = rss_kib();
	CHECK_LE(after - before, 1024);
	return CHECK_DONE();
}
