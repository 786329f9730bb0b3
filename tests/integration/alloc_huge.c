/* alloc_huge — blocks of 1 MiB and more (alloc/huge.c) come from regions
 * whose freed pages stay resident for reuse, within a bound, and go back to
 * the kernel when asked:
 *   - realloc between huge sizes keeps the contents and gives a usable size
 *     that covers the request, whether the block grows in place (the pages
 *     after it are free), moves out of its region (they are taken) or
 *     shrinks; the block it was next to is untouched;
 *   - calloc of a block carved from pages freed dirty reads zero, at every
 *     size, and blocks carved next to each other never overlap;
 *   - so does calloc over the range a block moved out of, once it was
 *     used, freed and trimmed (qemu-user ignored MADV_DONTNEED there);
 *   - 384 MiB of huge blocks freed and left alone: at most 256 MiB (the
 *     cache's cap) plus slack stays resident, without malloc_trim;
 *   - malloc_trim(0) then gives back every cached page: RSS within 16 MiB
 *     of where it was before the burst, mallinfo2's keepcost 0. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

#define MiB ((size_t)1 << 20)

static void grow_shrink(void)
{
	/* in a fresh region b lands right after a */
	size_t sizes[] = { 3 * MiB + 5, 7 * MiB, 7 * MiB + 4096, 2 * MiB + 1, 40 * MiB, 1 * MiB,
			   300 * MiB, 5 * MiB };
	char *a = malloc(2 * MiB), *b = malloc(2 * MiB);
	REQUIRE(a && b);
	pat_fill(b, 2 * MiB, 77);
	size_t have = 2 * MiB;
	pat_fill(a, have, 1);
	for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
		size_t n = sizes[k];
		char *q = realloc(a, n);
		REQUIRE(q != NULL);
		a = q;
		size_t keep = have < n ? have : n;
		CHECK_EQ(pat_check(a, keep, 1), (size_t)-1);
		CHECK_GE(malloc_usable_size(a), n);
		pat_fill(a, n, 1);
		have = n;
		CHECK_EQ(pat_check(b, 2 * MiB, 77), (size_t)-1);
		if (k == 2) {
			/* free b: a's next pages may now be free */
			free(b);
			b = malloc(2 * MiB);
			REQUIRE(b != NULL);
			pat_fill(b, 2 * MiB, 77);
		}
	}
	free(a);
	free(b);

	/* a region block: shrink, then grow back into the tail it gave up */
	size_t steps[] = { 6 * MiB, 2 * MiB + 100, 5 * MiB, 1 * MiB, 6 * MiB };
	a = malloc(steps[0]);
	REQUIRE(a != NULL);
	pat_fill(a, steps[0], 2);
	have = steps[0];
	for (size_t k = 1; k < sizeof steps / sizeof *steps; k++) {
		char *q = realloc(a, steps[k]);
		REQUIRE(q != NULL);
		a = q;
		size_t keep = have < steps[k] ? have : steps[k];
		CHECK_EQ(pat_check(a, keep, 2), (size_t)-1);
		CHECK_GE(malloc_usable_size(a), steps[k]);
		pat_fill(a, steps[k], 2);
		have = steps[k];
	}
	free(a);
}

/* First, while the region is fresh: a lands at its start, b right after
 * it, so a's growth moves out and the same-sized c and d are carved from
 * the range a left. */
static void moved_out_range(void)
{
	const size_t n = 4 * MiB;
	char *a = malloc(n), *b = malloc(2 * MiB);
	REQUIRE(a && b);
	pat_fill(a, n, 5);
	char *q = realloc(a, 40 * MiB);
	REQUIRE(q != NULL);
	CHECK_EQ(pat_check(q, n, 5), (size_t)-1);
	char *c = malloc(n);
	REQUIRE(c != NULL);
	if (c != a)
		fprintf(stderr, "note: c was not carved where a was (%p, %p)\n", (void *)c, (void *)a);
	memset(c, 0x5a, n);
	free(c);
	malloc_trim(0);
	char *d = calloc(1, n);
	REQUIRE(d != NULL);
	size_t bad = zero_check(d, n);
	if (bad != (size_t)-1)
		fprintf(stderr, "calloc(1, %zu) over a moved-out range: byte %zu not zero\n", n, bad);
	CHECK_EQ(bad, (size_t)-1);
	free(d);
	free(q);
	free(b);
}

static void calloc_reuse(void)
{
	enum { N = 12 };
	char *v[N];
	size_t n[N];
	for (int i = 0; i < N; i++) {
		n[i] = MiB + (size_t)i * 700 * 1024 + 17;
		v[i] = malloc(n[i]);
		REQUIRE(v[i] != NULL);
		memset(v[i], 0xa5, n[i]);
	}
	for (int i = 0; i < N; i++)
		free(v[i]);
	/* other sizes, so that windows straddle old blocks */
	for (int i = 0; i < N; i++) {
		n[i] = MiB + (size_t)(N - 1 - i) * 650 * 1024 + 3;
		v[i] = calloc(1, n[i]);
		REQUIRE(v[i] != NULL);
		size_t bad = zero_check(v[i], n[i]);
		if (bad != (size_t)-1)
			fprintf(stderr, "calloc(1, %zu): byte %zu not zero\n", n[i], bad);
		CHECK_EQ(bad, (size_t)-1);
		pat_fill(v[i], n[i], (uint32_t)i + 100);
	}
	for (int i = 0; i < N; i++) {
		CHECK_EQ(pat_check(v[i], n[i], (uint32_t)i + 100), (size_t)-1);
		free(v[i]);
	}
}

static void bounded_then_trimmed(void)
{
	enum { N = 24 };
	char *v[N];
	malloc_trim(0);
	long base = rss_kib();
	for (int i = 0; i < N; i++) {
		v[i] = malloc(16 * MiB);
		REQUIRE(v[i] != NULL);
		for (size_t off = 0; off < 16 * MiB; off += 4096)
			v[i][off] = 1;
	}
	long full = rss_kib();
	for (int i = 0; i < N; i++)
		free(v[i]);
	long idle = rss_kib();
	struct mallinfo2 before = mallinfo2();
	int rc = malloc_trim(0);
	long trimmed = rss_kib();
	struct mallinfo2 after = mallinfo2();
	if (base < 0 || full < 0 || idle < 0 || trimmed < 0)
		HARD_ERROR("cannot read VmRSS");
	fprintf(stderr, "VmRSS: %ld KiB before, %ld with 384 MiB of huge blocks, %ld after freeing them "
		"(cached %zu KiB), %ld after malloc_trim(0) = %d (cached %zu KiB)\n", base, full, idle,
		before.keepcost / 1024, trimmed, rc, after.keepcost / 1024);
	CHECK_GE(full - base, 300 * 1024);
	CHECK_LE(idle - base, (256 + 32) * 1024);
	CHECK_LE(trimmed - base, 16 * 1024);
	CHECK_EQ(rc, 1);
	CHECK_EQ(after.keepcost, (size_t)0);
}

int main(void)
{
	moved_out_range();
	grow_shrink();
	calloc_reuse();
	bounded_then_trimmed();
	return CHECK_DONE();
}
