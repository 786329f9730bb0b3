/* alloc_edges — glibc's semantics at the edges of malloc, calloc, realloc,
 * reallocarray and free: absurd sizes fail with NULL + ENOMEM and leave the
 * old block intact, overflowing products are caught, malloc(0) is unique,
 * free(NULL) is a no-op and free keeps errno (glibc >= 2.33), calloc zeroes
 * recycled memory; 1-5 GiB blocks work.  Built with -fno-builtin so the compiler cannot fold any
 * of it away; sizes go through volatile variables for the same reason. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

/* The test uses a block after a failed realloc on purpose. */
#if defined(__GNUC__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wuse-after-free"
#endif

static volatile size_t vsize;
static size_t sz(size_t n) { vsize = n; return vsize; }

/* Sizes no allocator can satisfy on x86-64 (user space is < 2^47 bytes). */
static const size_t huge[] = {
	SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 4095, SIZE_MAX - 65536,
	SIZE_MAX / 2 + 1, SIZE_MAX / 2, (size_t)1 << 62, (size_t)1 << 48,
	((size_t)1 << 48) + 12345,
};
#define NHUGE (sizeof huge / sizeof huge[0])

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
	return x < y ? -1 : x > y;
}

static void test_malloc_huge(void)
{
	for (size_t i = 0; i < NHUGE; i++) {
		errno = 0;
		void *p = malloc(sz(huge[i]));
		CHECK(p == NULL);
		CHECK_EQ(errno, ENOMEM);
		free(p);
	}
}

static void test_malloc_zero_unique(void)
{
	enum { N = 2000 };
	static void *v[N];
	for (int i = 0; i < N; i++) {
		v[i] = malloc(sz(0));
		REQUIRE(v[i] != NULL);
	}
	qsort(v, N, sizeof v[0], cmp_ptr);
	for (int i = 1; i < N; i++)
		CHECK_NE((uintptr_t)v[i - 1], (uintptr_t)v[i]);
	for (int i = 0; i < N; i++)
		free(v[i]);
	/* calloc with a zero factor is malloc(0): non-NULL, even with the
	 * other factor absurd. */
	void *a = calloc(0, sz(SIZE_MAX)), *b = calloc(sz(SIZE_MAX), 0), *c = calloc(0, 0);
	CHECK(a != NULL);
	CHECK(b != NULL);
	CHECK(c != NULL);
	CHECK(a != b && b != c && a != c);
	free(a); free(b); free(c);
}

static void test_free_null_and_errno(void)
{
	static const size_t sizes[] = { 1, 16, 1000, 32768, 32769, 200000, 8 << 20 };
	errno = 4321;
	free(NULL);
	CHECK_EQ(errno, 4321);
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		void *p = malloc(sz(sizes[i]));
		REQUIRE(p != NULL);
		memset(p, 1, sizes[i]);
		errno = 4321;
		free(p);
		CHECK_EQ(errno, 4321); /* glibc >= 2.33: free never changes errno */
	}
}

static void test_calloc(void)
{
	/* overflow of n * size */
	static const size_t pairs[][2] = {
		{ SIZE_MAX, 2 }, { 2, SIZE_MAX }, { SIZE_MAX / 2 + 1, 2 },
		{ (size_t)1 << 32, (size_t)1 << 32 }, { ((size_t)1 << 33) + 1, (size_t)1 << 31 },
		{ SIZE_MAX, SIZE_MAX }, { 65537, SIZE_MAX / 65536 },
	};
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
		errno = 0;
		void *p = calloc(sz(pairs[i][0]), sz(pairs[i][1]));
		CHECK(p == NULL);
		CHECK_EQ(errno, ENOMEM);
		free(p);
	}
	/* no overflow but impossible */
	for (size_t i = 0; i < NHUGE; i++) {
		errno = 0;
		void *p = calloc(1, sz(huge[i]));
		CHECK(p == NULL);
		CHECK_EQ(errno, ENOMEM);
	}
	/* zeroes, also on memory just dirtied and freed (small, boundary, large) */
	static const size_t sizes[] = { 1, 8, 15, 16, 17, 100, 512, 1024, 4096, 8191,
					32767, 32768, 32769, 65536, 300000, 4 << 20 };
	for (int round = 0; round < 3; round++)
		for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
			size_t n = sizes[i];
			void *d[8];
			for (int k = 0; k < 8; k++) {
				d[k] = malloc(n);
				REQUIRE(d[k] != NULL);
				memset(d[k], 0xA5, malloc_usable_size(d[k]));
			}
			for (int k = 0; k < 8; k++)
				free(d[k]);
			for (int k = 0; k < 8; k++) {
				d[k] = calloc(n, 1);
				REQUIRE(d[k] != NULL);
				CHECK_EQ(zero_check(d[k], n), (size_t)-1);
			}
			void *e = calloc(n / 4 + 1, 4);
			REQUIRE(e != NULL);
			CHECK_EQ(zero_check(e, (n / 4 + 1) * 4), (size_t)-1);
			free(e);
			for (int k = 0; k < 8; k++)
				free(d[k]);
		}
}

static void test_realloc_huge_keeps_block(void)
{
	static const size_t sizes[] = { 1, 24, 1000, 32768, 40000, 1 << 20 };
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t n = sizes[i];
		unsigned char *p = malloc(n);
		REQUIRE(p != NULL);
		pat_fill(p, n, (uint32_t)i);
		for (size_t h = 0; h < NHUGE; h++) {
			errno = 0;
			void *q = realloc(p, sz(huge[h]));
			CHECK(q == NULL);
			CHECK_EQ(errno, ENOMEM);
			if (q) { p = q; n = 0; continue; }
			/* reallocarray: overflow and impossible sizes */
			errno = 0;
			q = reallocarray(p, sz(huge[h]), 2);
			CHECK(q == NULL);
			CHECK_EQ(errno, ENOMEM);
			if (q) { p = q; n = 0; continue; }
			errno = 0;
			q = reallocarray(p, sz(1), sz(huge[h]));
			CHECK(q == NULL);
			CHECK_EQ(errno, ENOMEM);
			if (q) { p = q; n = 0; continue; }
		}
		errno = 0;
		void *q = reallocarray(p, sz((size_t)1 << 32), sz((size_t)1 << 32));
		CHECK(q == NULL);
		CHECK_EQ(errno, ENOMEM);
		if (q)
			p = q, n = 0;
		/* the block is untouched and still usable */
		CHECK_EQ(pat_check(p, n, (uint32_t)i), (size_t)-1);
		CHECK_GE(malloc_usable_size(p), n);
		p = realloc(p, n + 100);
		REQUIRE(p != NULL);
		CHECK_EQ(pat_check(p, n, (uint32_t)i), (size_t)-1);
		free(p);
	}
	/* reallocarray that does not overflow behaves like realloc */
	int *a = reallocarray(NULL, sz(10), sizeof(int));
	REQUIRE(a != NULL);
	for (int i = 0; i < 10; i++)
		a[i] = i * 7;
	a = reallocarray(a, sz(100000), sizeof(int));
	REQUIRE(a != NULL);
	for (int i = 0; i < 10; i++)
		CHECK_EQ(a[i], i * 7);
	free(a);
}

/* Big but possible: 1 and 3 GiB blocks (only their ends are touched), grown
 * by realloc to 5 GiB with both ends kept; calloc of a big block that reuses
 * memory just dirtied and freed is still zero. */
static void test_big_possible(void)
{
	static const size_t gib[] = { (size_t)1 << 30, (size_t)3 << 30 };
	for (size_t i = 0; i < 2; i++) {
		size_t n = sz(gib[i]);
		unsigned char *p = malloc(n);
		CHECK(p != NULL);
		if (!p)
			continue;
		CHECK_GE(malloc_usable_size(p), n);
		pat_fill(p, 4096, 1);
		pat_fill(p + n - 4096, 4096, 2);
		unsigned char *q = realloc(p, sz((size_t)5 << 30));
		CHECK(q != NULL);
		if (!q) {
			free(p);
			continue;
		}
		CHECK_EQ(pat_check(q, 4096, 1), (size_t)-1);
		CHECK_EQ(pat_check(q + n - 4096, 4096, 2), (size_t)-1);
		q[((size_t)5 << 30) - 1] = 7;
		free(q);
	}
	static const size_t big[] = { 16 << 20, 64 << 20 };
	for (size_t i = 0; i < 2; i++) {
		for (int round = 0; round < 2; round++) {
			unsigned char *p = malloc(big[i]);
			REQUIRE(p != NULL);
			memset(p, 0xA5, big[i]);
			free(p);
			p = calloc(1, big[i]);
			REQUIRE(p != NULL);
			CHECK_EQ(zero_check(p, big[i]), (size_t)-1);
			memset(p, 0x5A, big[i]);
			free(p);
		}
	}
}

/* More big-but-not-huge blocks at once than any reserved arena holds:
 * 6000 blocks of 512-600 KiB (3.3 GB of address space), the aligned half
 * included; both ends of each keep their bytes. */
static void test_many_large(void)
{
	enum { N = 6000 };
	static unsigned char *v[N];
	size_t bad = 0;
	for (int i = 0; i < N; i++) {
		v[i] = i % 2 ? malloc(512 << 10) : memalign(65536, 600 << 10);
		REQUIRE(v[i] != NULL);
		v[i][0] = (unsigned char)i;
		v[i][(512 << 10) - 1] = (unsigned char)(i >> 3);
	}
	for (int i = 0; i < N; i++) {
		bad += v[i][0] != (unsigned char)i || v[i][(512 << 10) - 1] != (unsigned char)(i >> 3);
		free(v[i]);
	}
	CHECK_EQ(bad, 0);
}

int main(void)
{
	test_malloc_huge();
	test_malloc_zero_unique();
	test_free_null_and_errno();
	test_calloc();
	test_realloc_huge_keeps_block();
	test_big_possible();
	test_many_large();
	return CHECK_DONE();
}
