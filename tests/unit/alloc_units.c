/* tests/unit/alloc_units — the allocator's internals, linked without the
 * profiler (libha_alloc + alloc/prof_none.c): that this links at all shows
 * alloc/ needs nothing of prof/ beyond alloc/hooks.h.  Checks the size-class
 * table (every request's class is the smallest that holds it, 16-byte
 * multiples, waste within a ninth above 128 B, free's block-start check
 * exact over every offset of a span), the page map (set, get, neighbours),
 * and that the allocator alone serves the malloc family, every byte of
 * every block kept. */
#include "alloc/internal.h"
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

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
	CHECK_EQ(ha_pagemap_set(base, 11 * HA_PAGE_SIZE, NULL), 0);
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

int main(void)
{
	ha_alloc_init();
	size_classes();
	page_map();
	serves_malloc();
	return CHECK_DONE();
}
