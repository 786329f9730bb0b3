/* tests/unit/alloc_units — the allocator's internals, linked without the
 * profiler (libha_alloc + tests/unit/prof_none.c): that this links at all shows
 * alloc/ needs nothing of prof/ beyond alloc/hooks.h.  Checks the size-class
 * table (every request's class is the smallest that holds it, 16-byte
 * multiples, waste within a ninth above 128 B, free's block-start check
 * exact over every offset of a span), the page map (set, get, neighbours,
 * a part's pages given back), the retention rules (alloc/retain.h),
 * and that the allocator alone serves the malloc family, every byte of
 * every block kept. */
#include "alloc/internal.h"
#include "alloc/bitmap.h"
#include <pthread.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include "tests/lib/check.h"

static void size_classes(void)
{
	for (unsigned c = 2; c < HA_NCLASSES; c++)
		CHECK_GE(ha_class_size[c], ha_class_size[c - 1] + 16);
	for (unsigned c = 1; c < HA_NCLASSES; c++) {
		uint32_t s = ha_class_size[c];
		CHECK_EQ(s % 16, 0);
		CHECK_GE(ha_class_batch[c], 1);
		CHECK_EQ(ha_class_span_bytes[c] % HA_PAGE_SIZE, 0);
		uint32_t nobj = ha_class_span_bytes[c] / s;
		CHECK_GE(nobj, 1);
		/* free's check that p starts a block: the offset times the odd
		 * part's inverse, rotated, is the block's index for a start
		 * and at least nobj for any other 16-byte-aligned offset */
		for (uint64_t off = 0; off < (uint64_t)nobj * s; off += 16) {
			uint64_t q = off * ha_class_inv[c];
			unsigned r = ha_class_ror[c];
			q = (q >> r) | (q << (-r & 63));
			uint64_t want = off % s ? UINT64_MAX : off / s;
			if (want == UINT64_MAX ? q < nobj : q != want) {
				CHECK_EQ(c, 0);
				CHECK_EQ(off, 0);
				break;
			}
		}
	}
	for (size_t n = 1; n <= HA_SMALL_MAX; n++) {
		unsigned c = ha_size_to_class(n);
		if (c < 1 || c >= HA_CLASS_HDR_MAX || ha_class_size[c] < n ||
		    (c > 1 && ha_class_size[c - 1] >= n)) {
			CHECK_EQ(n, 0);   /* report the first bad size only */
			CHECK_EQ(c, 0);
			break;
		}
		if (n > 128 && (ha_class_size[c] - n) * 9 > ha_class_size[c]) {
			CHECK_EQ(ha_class_size[c] - n, 0);
			break;
		}
	}
	/* a profiled block's class holds its request plus a 16-byte header */
	for (size_t n = 0; n <= HA_HDR_LO_MAX; n++) {
		unsigned c = ha_class_hdr_lo[(n + 7) >> 3];   /* as alloc/compat.c looks it up */
		size_t need = (n ? n : 1) + 16;
		if (ha_class_size[c] < need || ha_class_size[c - 1] >= ((need + 7) & ~(size_t)7)) {
			CHECK_EQ(n, 0);
			CHECK_EQ(c, 0);
			break;
		}
	}
}

static void page_map(void)
{
	static ha_span a, b;
	/* addresses no mapping uses: the map only records them */
	uintptr_t base = (uintptr_t)1 << 45;
	CHECK_EQ(ha_pagemap_set(base, 8 * HA_PAGE_SIZE, &a), 0);
	CHECK_EQ(ha_pagemap_set(base + 8 * HA_PAGE_SIZE, 3 * HA_PAGE_SIZE, &b), 0);
	for (unsigned i = 0; i < 8; i++)
		CHECK(ha_pagemap_get((void *)(base + i * HA_PAGE_SIZE + 17)) == &a);
	for (unsigned i = 8; i < 11; i++)
		CHECK(ha_pagemap_get((void *)(base + i * HA_PAGE_SIZE)) == &b);
	CHECK(ha_pagemap_get((void *)(base + 11 * HA_PAGE_SIZE)) == NULL);
	CHECK(ha_pagemap_get((void *)(base - 1)) == NULL);
	CHECK(ha_pagemap_get((void *)((uintptr_t)1 << 60)) == NULL);   /* beyond 48 bits */
	CHECK_EQ(ha_pagemap_set(base, 8 * HA_PAGE_SIZE, NULL), 0);     /* each span's own */
	CHECK_EQ(ha_pagemap_set(base + 8 * HA_PAGE_SIZE, 3 * HA_PAGE_SIZE, NULL), 0);
	CHECK(ha_pagemap_get((void *)(base + 9 * HA_PAGE_SIZE)) == NULL);
}

/* Every class, a large block and a huge one: the pattern survives and the
 * usable size covers the request. */
static void serves_malloc(void)
{
	enum { N = 200 };
	static void *p[N];
	static size_t n[N];
	for (int i = 0; i < N; i++) {
		n[i] = i < 150 ? (size_t)(i * 219 + 1) % HA_SMALL_MAX + 1
		     : i < 199 ? 40000 + (size_t)i * 1000 : (size_t)3 << 20;
		p[i] = i % 3 ? malloc(n[i]) : calloc(1, n[i]);
		REQUIRE(p[i] != NULL);
		CHECK_EQ((uintptr_t)p[i] % 16, 0);
		CHECK_GE(malloc_usable_size(p[i]), n[i]);
		if (i % 3 == 0)
			for (size_t k = 0; k < n[i]; k += 97)
				CHECK_EQ(((unsigned char *)p[i])[k], 0);
		memset(p[i], i & 0xff, n[i]);
	}
	for (int i = 0; i < N; i++) {
		unsigned char *q = p[i];
		for (size_t k = 0; k < n[i]; k++)
			if (q[k] != (i & 0xff)) {
				CHECK_EQ(q[k], i & 0xff);
				break;
			}
		free(p[i]);
	}
	void *a = NULL;
	CHECK_EQ(posix_memalign(&a, 4096, 100), 0);
	CHECK_EQ((uintptr_t)a % 4096, 0);
	free(a);
}

/* The huge regions' bitmaps against a bit-at-a-time reference: random runs
 * set and cleared across word boundaries (runs of 0, 1, 63, 64, 65 and
 * more bits), every count (bounded ones too) and every next-bit search
 * compared. */
static void bitmaps(void)
{
	enum { NB = 640 };
	static uint64_t b[NB / 64];
	static unsigned char ref[NB];
	uint64_t x = 88172645463325252ull;
	for (int round = 0; round < 4000; round++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		size_t i = (size_t)(x % NB), n = (size_t)((x >> 20) % 131);
		if (i + n > NB)
			n = NB - i;
		int set = (x >> 40) & 1;
		if (set)
			ha_bits_set(b, i, n);
		else
			ha_bits_clear(b, i, n);
		memset(ref + i, set, n);
		for (size_t k = 0; k < NB; k++)
			if (((b[k >> 6] >> (k & 63)) & 1) != ref[k]) {
				CHECK_EQ((b[k >> 6] >> (k & 63)) & 1, ref[k]);
				return;
			}
		size_t c = 0, j = (size_t)((x >> 30) % NB), m = (size_t)((x >> 50) % (NB - j + 1));
		for (size_t k = j; k < j + m; k++)
			c += ref[k];
		CHECK_EQ(ha_bits_count(b, j, m), c);
		size_t lim = (size_t)((x >> 8) % (m + 2)), cz = ha_bits_count_clear_upto(b, j, m, lim);
		if (m - c <= lim)
			CHECK_EQ(cz, m - c);
		else
			CHECK(cz > lim);
		CHECK_EQ(ha_bits_count_clear_upto(b, j, m, (size_t)-1), m - c);
		for (int want = 0; want < 2; want++) {
			size_t e = j + m, r = j;
			while (r < e && ref[r] != want)
				r++;
			CHECK_EQ(ha_bits_next(b, j, e, want), r);
		}
	}
}

/* The thread cache's budget (alloc/thread_cache.c): a cache holds at most
 * its share of 32 MiB among the live threads, between 64 KiB and 4 MiB,
 * checked at every refill and overflow, so after freeing far more than
 * that it holds no more than its share plus what one list takes between
 * two checks (256 KiB at most); and it does keep blocks. */
uint64_t ha_tcache_cached(const ha_tcache *tc);   /* thread_cache.c, hidden */

static uint64_t tc_share(void)
{
	uint64_t b = ((uint64_t)32 << 20) / ha_alloc_threads();
	return b < ((uint64_t)64 << 10) ? (uint64_t)64 << 10 : b > ((uint64_t)4 << 20) ? (uint64_t)4 << 20 : b;
}

static uint64_t fill_and_free(size_t bytes)
{
	static const size_t sizes[] = { 16, 48, 128, 512, 1024, 4096, 16384 };
	size_t n = 0, cap = bytes / 16;
	void **p = ha_raw_malloc(cap * sizeof *p);
	REQUIRE(p != NULL);
	for (size_t got = 0; got < bytes && n < cap; n++) {
		size_t s = sizes[n % (sizeof sizes / sizeof *sizes)];
		REQUIRE((p[n] = malloc(s)) != NULL);
		got += s;
	}
	for (size_t k = 0; k < n; k++)
		free(p[k]);
	ha_raw_free(p);
	return ha_tcache_cached(&ha_tc);
}

enum { TC_THREADS = 24 };
static pthread_barrier_t tc_bar;
static uint64_t tc_have[TC_THREADS], tc_limit[TC_THREADS];

static void *tc_thread(void *arg)
{
	size_t t = (size_t)arg;
	free(malloc(16));                      /* this thread's cache is live */
	pthread_barrier_wait(&tc_bar);         /* all live: the share is small */
	tc_limit[t] = tc_share();
	tc_have[t] = fill_and_free((size_t)8 << 20);
	pthread_barrier_wait(&tc_bar);
	return NULL;
}

static void tcache_budget(void)
{
	uint64_t have = fill_and_free((size_t)64 << 20), share = tc_share();
	CHECK_GE(have, 1);
	CHECK_LE(have, share + (256u << 10));
	pthread_t th[TC_THREADS];
	REQUIRE(pthread_barrier_init(&tc_bar, NULL, TC_THREADS) == 0);
	for (size_t t = 0; t < TC_THREADS; t++)
		REQUIRE(pthread_create(&th[t], NULL, tc_thread, (void *)t) == 0);
	for (size_t t = 0; t < TC_THREADS; t++)
		pthread_join(th[t], NULL);
	for (size_t t = 0; t < TC_THREADS; t++) {
		CHECK_LE(tc_limit[t], ((uint64_t)32 << 20) / TC_THREADS);
		CHECK_GE(tc_have[t], 1);
		CHECK_LE(tc_have[t], tc_limit[t] + (256u << 10));
	}
	pthread_barrier_destroy(&tc_bar);
}

/* A part of the page map no span names gives its pages back at the decay
 * step and reads "no span" after; a part a span names keeps its entries. */
static void page_map_give_back(void)
{
	static ha_span a, b;
	uintptr_t base = (uintptr_t)3 << 44;   /* a leaf of its own */
	size_t part = (size_t)HA_PAGE_SIZE << HA_PM_PART_BITS;
	CHECK_EQ(ha_pagemap_set(base, 4 * HA_PAGE_SIZE, &a), 0);
	CHECK_EQ(ha_pagemap_set(base + part, 4 * HA_PAGE_SIZE, &b), 0);
	CHECK_EQ(ha_pagemap_set(base + part, 4 * HA_PAGE_SIZE, NULL), 0);
	/* the part's span entries, found as free finds them (an index past
	 * ha_pm.none: integer arithmetic, not an array subscript) */
	uintptr_t leaf = (uintptr_t)ha_pm.none.span +
			 (uintptr_t)ha_pagemap_index((base + part) >> HA_PAGE_SHIFT) * sizeof(uintptr_t);
	CHECK_GE(ha_resident(leaf, leaf + 1), 1);              /* written: resident */
	ha_pagemap_decay(ha_now_ms());
	CHECK_EQ(ha_resident(leaf, leaf + 1), 0);              /* given back */
	CHECK(ha_pagemap_get((void *)(base + part)) == NULL);
	CHECK(ha_pagemap_get((void *)(base + HA_PAGE_SIZE)) == &a);   /* kept */
	CHECK_EQ(ha_pagemap_set(base + part, 4 * HA_PAGE_SIZE, &b), 0);   /* set again */
	CHECK(ha_pagemap_get((void *)(base + part + 3 * HA_PAGE_SIZE)) == &b);
	CHECK_EQ(ha_pagemap_set(base + part, 4 * HA_PAGE_SIZE, NULL), 0);
	CHECK_EQ(ha_pagemap_set(base, 4 * HA_PAGE_SIZE, NULL), 0);
}

/* The retention rules of alloc/retain.h on chosen figures, each expected
 * value worked out from the rule as documented there (M = 1 MiB). */
static void retention_rules(void)
{
	const uint64_t M = (uint64_t)1 << 20, K = 1024;
	/* ha_keep_cap_of: 8M + live / 8 + learned, less what the other
	 * caches hold, within [0, hot_max] */
	CHECK_EQ(ha_keep_cap_of(0, 0, 0, 0, 64 * M), 8 * M);
	CHECK_EQ(ha_keep_cap_of(80 * M, 0, 0, 0, 64 * M), 18 * M);          /* 8 + 10 */
	CHECK_EQ(ha_keep_cap_of(80 * M, 12 * M, 2 * M, 0, 64 * M), 8 * M);  /* 18 - 10 */
	CHECK_EQ(ha_keep_cap_of(80 * M, 30 * M, 2 * M, 0, 64 * M), 0);      /* 18 - 28 */
	CHECK_EQ(ha_keep_cap_of(800 * M, 0, 0, 0, 64 * M), 64 * M);         /* 108, at most 64 */
	CHECK_EQ(ha_keep_cap_of(16 * M, 0, 0, 5 * M, 64 * M), 15 * M);      /* 8 + 2 + 5 */
	CHECK_EQ(ha_keep_cap_of(0, 1 * M, 3 * M, 0, 64 * M), 8 * M);        /* own > held: no others */
	CHECK_EQ(ha_keep_cap_of(0, 0, 0, 0, 5 * M), 5 * M);
	/* ha_idle_floor_of: 1M less what the others hold, at least 0 */
	CHECK_EQ(ha_idle_floor_of(0, 0), 1 * M);
	CHECK_EQ(ha_idle_floor_of(768 * K, 256 * K), 512 * K);
	CHECK_EQ(ha_idle_floor_of(3 * M, 0), 0);
	CHECK_EQ(ha_idle_floor_of(1 * M, 1 * M), 1 * M);
	/* ha_huge_dirty_max: 2 x peak - in use, within [64M, 256M] */
	CHECK_EQ(ha_huge_dirty_max(0, 0), 64 * M);
	CHECK_EQ(ha_huge_dirty_max(100 * M, 50 * M), 150 * M);
	CHECK_EQ(ha_huge_dirty_max(200 * M, 100 * M), 256 * M);
	CHECK_EQ(ha_huge_dirty_max(40 * M, 100 * M), 64 * M);
	/* ha_huge_budget (huge.c's cache_budget): the dirty max, or less:
	 * keep + the block freed last (at most 8M) + in use */
	CHECK_EQ(ha_huge_budget(100 * M, 50 * M, 3 * M, 10 * M), 63 * M);   /* 10 + 3 + 50 < 150 */
	CHECK_EQ(ha_huge_budget(100 * M, 50 * M, 20 * M, 10 * M), 68 * M);  /* 10 + 8 + 50 */
	CHECK_EQ(ha_huge_budget(200 * M, 200 * M, 0, 64 * M), 200 * M);     /* 264 > 400 - 200 */
	CHECK_EQ(ha_huge_budget(0, 0, 0, 8 * M), 8 * M);
}

int main(void)
{
	ha_alloc_init();
	size_classes();
	page_map();
	serves_malloc();
	bitmaps();
	tcache_budget();
	page_map_give_back();
	retention_rules();
	return CHECK_DONE();
}
