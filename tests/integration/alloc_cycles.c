/* alloc_cycles — the same workload run 6 times must not cost more each
 * time: every cycle allocates ~400000 small blocks, 500 large and 16 huge
 * ones, writes every byte, frees them all in random order and calls
 * malloc_trim (so that lazily purged memory does not count; giving memory
 * back unasked is alloc_release's business).  The lowest resident size of the
 * last three cycles must not exceed the highest of the first three by more
 * than 24 MiB: a leak raises the floor.  (Not less: after mi_collect,
 * mimalloc 2.0.9's arena sometimes keeps ~16 MiB committed, for several
 * cycles in a row — 14 MiB resident after a cycle, 29 MiB after the next,
 * with heapalloc's own spans and blocks the same — which failed an 8 MiB
 * margin in 2 of 40 runs.  The counts below are exact.)  Under heapalloc its own metadata
 * and span counts must stay put as well:
 * span records, page-map leaves and cached big blocks are reused, not
 * leaked. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"
#include "heapalloc.h"

enum { NSMALL = 400000, NLARGE = 500, NHUGE = 16, N = NSMALL + NLARGE + NHUGE, CYCLES = 6 };

static void *v[N];
static size_t sizes[N];
static uint32_t order[N];

int main(void)
{
	void (*stats)(heapalloc_stats *) = (void (*)(heapalloc_stats *))dlsym(RTLD_DEFAULT,
									 "heapalloc_get_stats");
	uint64_t r = 0x2545F4914F6CDD1Dull;
	long rss[CYCLES];
	heapalloc_stats hs[CYCLES];
	memset(hs, 0, sizeof hs);
	for (int i = 0; i < N; i++) {
		r ^= r << 13; r ^= r >> 7; r ^= r << 17;
		sizes[i] = i < NSMALL ? 8 + r % 505 : i < NSMALL + NLARGE ? 33000 + r % 500000
									    : (2u << 20) + r % (6u << 20);
		order[i] = (uint32_t)i;
	}
	for (int c = 0; c < CYCLES; c++) {
		for (int i = 0; i < N; i++) {
			v[i] = malloc(sizes[i]);
			REQUIRE(v[i] != NULL);
			memset(v[i], c, sizes[i]); /* resident, all of it */
		}
		for (int i = N - 1; i > 0; i--) { /* a new random free order each cycle */
			r ^= r << 13; r ^= r >> 7; r ^= r << 17;
			uint32_t j = (uint32_t)(r % (uint64_t)(i + 1)), t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
		for (int i = 0; i < N; i++)
			free(v[order[i]]);
		malloc_trim(0); /* what stays resident now is held, not just not yet purged */
		rss[c] = rss_kib();
		if (stats)
			stats(&hs[c]);
	}
	fprintf(stderr, "VmRSS after each cycle (KiB):");
	for (int c = 0; c < CYCLES; c++)
		fprintf(stderr, " %ld", rss[c]);
	fprintf(stderr, "\n");
	long first_max = 0, last_min = LONG_MAX;
	for (int c = 0; c < 3; c++)
		first_max = rss[c] > first_max ? rss[c] : first_max;
	for (int c = CYCLES - 3; c < CYCLES; c++)
		last_min = rss[c] < last_min ? rss[c] : last_min;
	CHECK_LE(last_min, first_max + 24 * 1024);
	if (stats) {
		fprintf(stderr, "heapalloc metadata bytes: %llu after cycle 2, %llu after cycle %d; "
			"spans %llu -> %llu\n", (unsigned long long)hs[1].metadata_bytes,
			(unsigned long long)hs[CYCLES - 1].metadata_bytes, CYCLES,
			(unsigned long long)hs[1].small_spans, (unsigned long long)hs[CYCLES - 1].small_spans);
		CHECK_LE(hs[CYCLES - 1].metadata_bytes, hs[1].metadata_bytes + (1 << 20));
		CHECK_LE(hs[CYCLES - 1].small_spans, hs[1].small_spans + 64);
		CHECK_LE(hs[CYCLES - 1].large_blocks, hs[1].large_blocks);
	}
	return CHECK_DONE();
}
