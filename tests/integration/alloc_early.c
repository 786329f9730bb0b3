/* alloc_early — allocation before main: a shared object's constructor
 * (alloc_early_lib) and this executable's own constructor malloc, calloc,
 * realloc, posix_memalign and free; main finds their surviving blocks intact
 * and frees them; a destructor allocates and frees after main returns. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

extern void *alloc_early_lib_block[4];
extern size_t alloc_early_lib_size[4];
extern int alloc_early_lib_ran, alloc_early_lib_bad;

static void *blk[16];
static size_t blk_n[16];
static int ctor_ran, ctor_bad;

__attribute__((constructor(101))) static void exe_init(void)
{
	ctor_ran = 1;
	for (int i = 0; i < 16; i++) {
		blk_n[i] = (size_t)1 << (i + 2); /* 4 B .. 128 KiB */
		blk[i] = i % 2 ? malloc(blk_n[i]) : calloc(1, blk_n[i]);
		if (!blk[i]) {
			ctor_bad++;
			continue;
		}
		if (i % 2 == 0 && zero_check(blk[i], blk_n[i]) != (size_t)-1)
			ctor_bad++;
		pat_fill(blk[i], blk_n[i], i);
	}
	void *r = NULL;
	for (size_t n = 1; n < 200000; n = n * 3 + 1)
		if (!(r = realloc(r, n)))
			ctor_bad++;
	free(r);
}

__attribute__((destructor)) static void exe_fini(void)
{
	void *p = malloc(5000), *q = malloc(100000);
	if (!p || !q)
		_exit(3);
	free(p);
	free(q);
}

int main(void)
{
	CHECK(alloc_early_lib_ran);
	CHECK_EQ(alloc_early_lib_bad, 0);
	for (int i = 0; i < 4; i++) {
		unsigned char *b = alloc_early_lib_block[i];
		REQUIRE(b != NULL);
		CHECK_GE(malloc_usable_size(b), alloc_early_lib_size[i]);
		size_t bad = 0;
		for (size_t k = 0; k < alloc_early_lib_size[i]; k++)
			bad += b[k] != 0x40 + i;
		CHECK_EQ(bad, 0);
		free(b);
	}
	CHECK(ctor_ran);
	CHECK_EQ(ctor_bad, 0);
	for (int i = 0; i < 16; i++) {
		REQUIRE(blk[i] != NULL);
		CHECK_EQ(pat_check(blk[i], blk_n[i], i), (size_t)-1);
		blk[i] = realloc(blk[i], blk_n[i] * 2);
		REQUIRE(blk[i] != NULL);
		CHECK_EQ(pat_check(blk[i], blk_n[i], i), (size_t)-1);
		free(blk[i]);
	}
	return CHECK_DONE();
}
