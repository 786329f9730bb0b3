/* alloc_large_reuse — a large block freed and asked for again is reused,
 * not faulted in afresh: the loop mstress runs (a 640 KiB and an 800 KB
 * block, each written whole, freed, asked for again; mimalloc makes both
 * 1 MiB blocks), 200 times.  After the first round, a round must cost
 * fewer than a tenth of a block's pages in minor faults on average: the
 * kept blocks serve the requests.  (When the cache looked only 3 bins up
 * from the request, it never found the 1 MiB blocks it held, every round
 * faulted both blocks in: ~350 faults a round.) */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "tests/lib/check.h"

enum { ROUNDS = 200 };
static const size_t sizes[2] = { 640u << 10, 800000 };

static long faults(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

static void round_trip(int salt)
{
	void *p[2];
	for (int k = 0; k < 2; k++) {
		p[k] = malloc(sizes[k]);
		REQUIRE(p[k] != NULL);
		memset(p[k], salt + k, sizes[k]);
	}
	for (int k = 0; k < 2; k++) {
		CHECK_EQ(((unsigned char *)p[k])[sizes[k] - 1], (unsigned char)(salt + k));
		free(p[k]);
	}
}

int main(void)
{
	round_trip(1);   /* the first round faults the blocks in */
	long f0 = faults();
	for (int i = 0; i < ROUNDS; i++)
		round_trip(i);
	long per_round = (faults() - f0) / ROUNDS;
	long pages = (long)((sizes[0] + sizes[1]) / 4096);
	fprintf(stderr, "%ld faults a round, %ld pages a round\n", per_round, pages);
	CHECK_LE(per_round * 10, pages);
	return ck_failures ? 1 : 0;
}
