/* alloc_realloc — realloc keeps the contents over every grow and shrink,
 * across the 32 KiB small/large boundary in both directions and up past
 * 1 MiB, including blocks that came from the aligned allocators; and glibc's
 * special cases: realloc(NULL, n) is malloc(n), realloc(p, 0) frees p and
 * returns NULL, realloc(NULL, 0) is malloc(0). */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

static volatile size_t vsize;
static size_t sz(size_t n) { vsize = n; return vsize; }

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void)
{
	rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* Resize p (holding n bytes of pattern *seed) to m bytes; verify and refill. */
static void *step(void *p, size_t n, size_t m, uint32_t *seed)
{
	void *q = realloc(p, m);
	REQUIRE(q != NULL);
	size_t keep = n < m ? n : m;
	size_t bad = pat_check(q, keep, *seed);
	if (bad != (size_t)-1) {
		fprintf(stderr, "realloc %zu -> %zu: byte %zu differs\n", n, m, bad);
		CHECK_EQ(bad, (size_t)-1);
	}
	CHECK_GE(malloc_usable_size(q), m);
	*seed += 1;
	pat_fill(q, m, *seed);
	return q;
}

static void walk(size_t const *sizes, size_t count, void *start, size_t n0, uint32_t seed)
{
	void *p = start;
	size_t n = n0;
	/* a neighbour that must never be disturbed */
	void *nb = malloc(777);
	REQUIRE(nb != NULL);
	pat_fill(nb, 777, 99);
	for (size_t i = 0; i < count; i++) {
		p = step(p, n, sizes[i], &seed);
		n = sizes[i];
	}
	CHECK_EQ(pat_check(nb, 777, 99), (size_t)-1);
	free(nb);
	free(p);
}

int main(void)
{
	enum { MAXN = 4096 };
	static size_t sizes[MAXN];
	size_t k = 0;
	uint32_t seed = 1;

	/* 1. every size 1..300, then geometric growth to 1.5 MiB, then back down */
	for (size_t n = 1; n <= 300; n++)
		sizes[k++] = n;
	for (size_t n = 301; n < (3u << 19); n = n * 9 / 8 + (rnd() & 63))
		sizes[k++] = n;
	size_t up = k;
	for (size_t i = up; i-- > 0 && k < MAXN;)
		sizes[k++] = sizes[i];
	walk(sizes, k, NULL, 0, seed++);

	/* 2. hop back and forth over the small/large boundary and page edges */
	static const size_t hops[] = { 32767, 32768, 32769, 32768, 32767, 40000, 16,
		32769, 1, 65536, 32768, 4096, 4097, 4095, 1 << 20, 32768, 1 << 20, 8, 1 << 21,
		32769, 131072, 131071, 24, 1 << 20, (1 << 20) + 1, (1 << 20) - 1, 33000, 100,
		(1 << 20) - 1, 100 << 20, 3 << 20, 50000, 64 << 20, (64 << 20) + 1, 10, 5 << 20 };
	walk(hops, sizeof hops / sizeof hops[0], NULL, 0, seed++);

	/* 3. random walk, log-uniform sizes 1 B .. 2 MiB, several blocks at once */
	for (int blk = 0; blk < 4; blk++) {
		k = 0;
		for (int i = 0; i < 600; i++) {
			unsigned bits = rnd() % 21;
			sizes[k++] = 1 + (rnd() & ((2u << bits) - 1));
		}
		walk(sizes, k, NULL, 0, seed++);
	}

	/* 4. blocks from the aligned allocators resize like any other */
	static const size_t aligns[] = { 16, 64, 4096, 65536, 1 << 20 };
	for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
		static const size_t from[] = { 10, 5000, 40000, 300000 };
		for (size_t f = 0; f < 4; f++) {
			void *p = NULL;
			REQUIRE(posix_memalign(&p, aligns[a], from[f]) == 0);
			pat_fill(p, from[f], seed);
			const size_t path[] = { from[f] * 3, 33, 70000, from[f], 1 << 20, 5 };
			walk(path, 6, p, from[f], seed++);
			p = memalign(aligns[a], from[f]);
			REQUIRE(p != NULL);
			pat_fill(p, from[f], seed);
			walk(path, 6, p, from[f], seed++);
		}
	}

	/* 5. glibc's special cases */
	void *p = realloc(NULL, sz(100));
	CHECK(p != NULL);
	if (p) {
		CHECK_GE(malloc_usable_size(p), 100);
		memset(p, 1, 100);
	}
	static const size_t zs[] = { 1, 100, 32768, 40000, 1 << 20 };
	for (size_t i = 0; i < sizeof zs / sizeof zs[0]; i++) {
		void *q = malloc(zs[i]);
		REQUIRE(q != NULL);
		memset(q, 2, zs[i]);
		errno = 0;
		void *r = realloc(q, sz(0));
		CHECK(r == NULL); /* glibc: realloc(p, 0) frees p, returns NULL */
		free(r);
	}
	void *z = realloc(NULL, sz(0));
	CHECK(z != NULL); /* realloc(NULL, 0) is malloc(0) */
	free(z);
	/* the same size, and shrink to 1 byte and back */
	uint32_t s2 = 500;
	void *b = malloc(5000);
	REQUIRE(b != NULL);
	pat_fill(b, 5000, s2);
	b = step(b, 5000, 5000, &s2);
	b = step(b, 5000, 1, &s2);
	b = step(b, 1, 5000, &s2);
	free(b);
	free(p);
	return CHECK_DONE();
}
