/* alloc_libc_aliases — glibc's __libc_malloc/__libc_free/__libc_calloc/
 * __libc_realloc/__libc_memalign work and are interchangeable with the public
 * names (a block from one may be freed or resized by the other): libc and
 * static programs call them directly. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Walloc-size-larger-than=" /* sizes are volatile */
#endif

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static volatile size_t vsize;
static size_t sz(size_t n) { vsize = n; return vsize; }

int main(void)
{
	static const size_t sizes[] = { 0, 1, 16, 100, 4096, 32768, 32769, 100000, 3 << 20 };
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t n = sz(sizes[i]);
		uint32_t s = (uint32_t)i * 10;

		char *a = __libc_malloc(n);
		REQUIRE(a != NULL);
		CHECK_GE(malloc_usable_size(a), n);
		pat_fill(a, n, s);
		a = realloc(a, n * 2 + 1); /* public realloc on a __libc block */
		REQUIRE(a != NULL);
		CHECK_EQ(pat_check(a, n, s), (size_t)-1);
		pat_fill(a, n * 2 + 1, s + 1);
		a = __libc_realloc(a, n + 1); /* shrink */
		REQUIRE(a != NULL);
		CHECK_EQ(pat_check(a, n + 1, s + 1), (size_t)-1);
		free(a);

		char *b = malloc(n);
		REQUIRE(b != NULL);
		pat_fill(b, n, s + 2);
		b = __libc_realloc(b, n + 1000);
		REQUIRE(b != NULL);
		CHECK_EQ(pat_check(b, n, s + 2), (size_t)-1);
		__libc_free(b);

		char *c = __libc_calloc(n + 1, 3);
		REQUIRE(c != NULL);
		CHECK_EQ(zero_check(c, (n + 1) * 3), (size_t)-1);
		memset(c, 0xee, (n + 1) * 3);
		free(c);
		c = __libc_calloc(n + 1, 3); /* again, on recycled memory */
		REQUIRE(c != NULL);
		CHECK_EQ(zero_check(c, (n + 1) * 3), (size_t)-1);
		__libc_free(c);

		for (size_t al = 8; al <= (1u << 20); al <<= 3) {
			char *d = __libc_memalign(al, n);
			REQUIRE(d != NULL);
			CHECK_EQ((uintptr_t)d % al, 0);
			CHECK_GE(malloc_usable_size(d), n);
			pat_fill(d, n, s + 3);
			CHECK_EQ(pat_check(d, n, s + 3), (size_t)-1);
			if (al & 1)
				free(d);
			else
				__libc_free(d);
		}
	}
	__libc_free(NULL);
	void *z = __libc_realloc(NULL, 10);
	CHECK(z != NULL);
	__libc_free(z);
	/* overflow through the alias too */
	CHECK(__libc_calloc(SIZE_MAX / 2 + 1, 4) == NULL);
	CHECK(__libc_malloc((size_t)-1) == NULL);
	return CHECK_DONE();
}
