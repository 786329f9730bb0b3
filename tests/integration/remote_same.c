/* tests/integration/remote_same.c — a program whose tables an in-process dump and
 * `heapalloc dump PID` both write (tests/integration/remote_same.sh), run with
 * libheapalloc preloaded and HEAPPROFILE set.  Built as a user builds a
 * program (-O2 -g, not linked with heapalloc: the API is looked up).
 *
 *   remote_same READY
 * keeps blocks of three sizes at site_keep, site_mixed and site_small,
 * frees some of each (a line with frees, lifetimes), then writes READY
 * (created whole, by rename) and reads stdin: each line of four bytes
 * ("dump") is heapalloc_profile_dump("asked"), answered "dumped STATUS" on
 * stdout, and nothing else is allocated until stdin closes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define N 6000

static void *kept[3][N];

NOINLINE static void *site_keep(size_t n)
{
	void *p = malloc(n);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

NOINLINE static void *site_mixed(size_t n)
{
	void *p = malloc(n);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

NOINLINE static void *site_small(size_t n)
{
	void *p = malloc(n);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT,
								   "heapalloc_profile_dump");
	if (!dump) {
		fprintf(stderr, "remote_same: heapalloc is not loaded\n");
		return 2;
	}
	for (int i = 0; i < N; i++) {
		kept[0][i] = site_keep(4096);
		kept[1][i] = site_mixed(1000 + (size_t)i % 7 * 100);
		kept[2][i] = site_small(48);
	}
	for (int i = 0; i < N; i += 2) {      /* half of two sites freed */
		free(kept[1][i]);
		free(kept[2][i]);
	}
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
	FILE *f = fopen(tmp, "w");
	if (!f || fprintf(f, "ready\n") < 0 || fclose(f) != 0 || rename(tmp, argv[1]) != 0)
		return 2;
	/* read(2) and write(2): stdio's buffers would be allocations the
	 * books count between two dumps */
	char c, out[32];
	size_t k = 0;
	while (read(0, &c, 1) == 1) {
		if (c != '\n') {
			k++;
			continue;
		}
		if (k == 4) {
			int n = snprintf(out, sizeof out, "dumped %d\n", dump("asked"));
			if (write(1, out, (size_t)n) != n)
				return 2;
		}
		k = 0;
	}
	return 0;
}
