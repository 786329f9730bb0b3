/* alloc_usable — malloc_usable_size is >= the request and every usable byte
 * is the caller's: many neighbouring blocks of every size from 0 to 40 KiB
 * (and some large ones) are filled over their whole usable size with their
 * own pattern, and all of them must still hold it afterwards.  Also:
 * malloc_usable_size(NULL) == 0, and the size is stable for a live block. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

enum { N = 4000 };
static void *blk[N];
static size_t req[N], use[N];

static void round_of(size_t (*size_of)(int), void *(*get)(size_t), uint32_t salt)
{
	for (int i = 0; i < N; i++) {
		req[i] = size_of(i);
		blk[i] = get(req[i]);
		REQUIRE(blk[i] != NULL);
		use[i] = malloc_usable_size(blk[i]);
		if (use[i] < req[i])
			fprintf(stderr, "usable %zu < request %zu\n", use[i], req[i]);
		CHECK_GE(use[i], req[i]);
		pat_fill(blk[i], use[i], salt + i);
	}
	for (int i = 0; i < N; i++) {
		size_t bad = pat_check(blk[i], use[i], salt + i);
		if (bad != (size_t)-1)
			fprintf(stderr, "block %d (request %zu, usable %zu): byte %zu overwritten\n",
				i, req[i], use[i], bad);
		CHECK_EQ(bad, (size_t)-1);
		CHECK_EQ(malloc_usable_size(blk[i]), use[i]);
	}
	/* free every other block, refill the holes, check again */
	for (int i = 0; i < N; i += 2)
		free(blk[i]);
	for (int i = 0; i < N; i += 2) {
		blk[i] = get(req[i]);
		REQUIRE(blk[i] != NULL);
		use[i] = malloc_usable_size(blk[i]);
		CHECK_GE(use[i], req[i]);
		pat_fill(blk[i], use[i], salt + 7 * i);
	}
	for (int i = 0; i < N; i++) {
		CHECK_EQ(pat_check(blk[i], use[i], salt + (i % 2 ? i : 7 * i)), (size_t)-1);
		free(blk[i]);
	}
}

static size_t every_small(int i) { return (size_t)i; }               /* 0 .. 3999 */
static size_t around_boundary(int i) { return 28000 + (size_t)i * 3; } /* 28000 .. 40000 */
static size_t mixed(int i) { return i % 100 == 0 ? 100000 + (size_t)i * 37 : (size_t)(i * 7919) % 33000; }
static void *by_malloc(size_t n) { return malloc(n); }
static void *by_calloc(size_t n) { return calloc(1, n); }
static void *by_memalign(size_t n) { return memalign(64, n); }
static void *by_realloc(size_t n)
{
	void *p = malloc(n / 2 + 1);
	return p ? realloc(p, n) : NULL;
}

int main(void)
{
	CHECK_EQ(malloc_usable_size(NULL), 0);
	round_of(every_small, by_malloc, 1);
	round_of(around_boundary, by_malloc, 2);
	round_of(mixed, by_malloc, 3);
	round_of(mixed, by_calloc, 4);
	round_of(mixed, by_memalign, 5);
	round_of(mixed, by_realloc, 6);
	/* large blocks: usable size of big and page-multiple requests */
	static const size_t big[] = { 32768, 32769, 65536, 65537, 1 << 20, (1 << 20) + 1, 5 << 20 };
	for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
		void *p = malloc(big[i]);
		REQUIRE(p != NULL);
		size_t u = malloc_usable_size(p);
		CHECK_GE(u, big[i]);
		CHECK_LE(u, 2 * big[i] + 65536); /* a sane number, not garbage */
		pat_fill(p, u, 77);
		CHECK_EQ(pat_check(p, u, 77), (size_t)-1);
		free(p);
	}
	return CHECK_DONE();
}
