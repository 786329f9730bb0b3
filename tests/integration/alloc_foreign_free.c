/* tests/integration/alloc_foreign_free.c — passive false sharing: a thread that frees
 * another thread's block before it has allocated from that class does not
 * get the block (nor one on its cache lines) back from its next malloc.
 * Otherwise two workers each handed a block allocated back to back by the
 * main thread write to one cache line for as long as they run. */
#include "tests/lib/check.h"
#include <pthread.h>
#include <stdint.h>

#define N 8
#define SZ 24

static char *blk[N];

static int shares_line(const void *p)
{
	for (int i = 0; i < N; i++)
		if (((uintptr_t)p >> 6) == ((uintptr_t)blk[i] >> 6) ||
		    (((uintptr_t)p + SZ - 1) >> 6) == (((uintptr_t)blk[i] + SZ - 1) >> 6))
			return 1;
	return 0;
}

static void *worker(void *arg)
{
	char *given = arg;
	CHECK_EQ(given[0], 'M');
	free(given);
	char *p = malloc(SZ);
	REQUIRE(p != NULL);
	CHECK(p != given);
	CHECK(!shares_line(p));
	memset(p, 'W', SZ);
	CHECK_EQ(p[SZ - 1], 'W');
	free(p);
	return NULL;
}

int main(void)
{
	for (int i = 0; i < N; i++) {
		blk[i] = malloc(SZ);
		REQUIRE(blk[i] != NULL);
		memset(blk[i], 'M', SZ);
	}
	for (int i = 0; i < 2; i++) {
		pthread_t t;
		REQUIRE(pthread_create(&t, NULL, worker, blk[i]) == 0);
		REQUIRE(pthread_join(t, NULL) == 0);
	}
	for (int i = 2; i < N; i++) {
		CHECK_EQ(blk[i][0], 'M');
		free(blk[i]);
	}
	return CHECK_DONE();
}
