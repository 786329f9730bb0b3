/* tests/integration/names_served.c — ground truth for a profile named in-process
 * (tests/integration/names_served.sh): known sites, one inlined, recorded with every
 * allocation; once its own binary is deleted, the program takes the
 * in-memory profile (heapalloc_profile_pprof, preloaded) and writes it to
 * argv[1].  argv[2]: a file created when the allocations are done.
 *   site_direct   5 x 4000 = 20000 bytes kept
 *   inl_leaf      10 x 1000 = 10000 bytes kept, inlined into site_outer
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "names_deleted.h"

void *volatile keep[16];

__attribute__((noinline)) void site_direct(void)
{
	for (int i = 0; i < 5; i++)
		keep[i] = malloc(4000);
}

static inline __attribute__((always_inline)) void inl_leaf(int i)
{
	keep[5 + i] = malloc(1000);
}

__attribute__((noinline)) void site_outer(void)
{
	for (int i = 0; i < 10; i++)
		inl_leaf(i);
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 99;
	site_direct();
	site_outer();
	FILE *r = fopen(argv[2], "w");
	if (!r || fclose(r) != 0 || wait_deleted((uintptr_t)&site_direct) != 0) {
		fprintf(stderr, "names_served: the binary was not deleted\n");
		return 99;
	}
	int (*pprof)(void **, size_t *) =
		(int (*)(void **, size_t *))dlsym(RTLD_DEFAULT, "heapalloc_profile_pprof");
	void *buf = NULL;
	size_t len = 0;
	int err = pprof ? pprof(&buf, &len) : -1;
	FILE *f = err ? NULL : fopen(argv[1], "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "names_served: no profile (%d)\n", err);
		return 99;
	}
	free(buf);
	return 0;
}
