/* alloc_early_lib — a shared object whose constructor allocates before
 * main, and before heapalloc's own constructor has run: it does not depend
 * on heapalloc, and the loader initialises it first both when the program
 * is linked with heapalloc and when heapalloc is preloaded (seen with
 * LD_DEBUG=libs), so heapalloc's first call must initialise it.  The
 * blocks it keeps are checked and freed by alloc_early's main. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *alloc_early_lib_block[4];
size_t alloc_early_lib_size[4] = { 24, 1000, 40000, 300000 };
int alloc_early_lib_ran, alloc_early_lib_bad;

__attribute__((constructor)) static void early_lib_init(void)
{
	alloc_early_lib_ran = 1;
	for (int i = 0; i < 4; i++) {
		alloc_early_lib_block[i] = malloc(alloc_early_lib_size[i]);
		if (!alloc_early_lib_block[i]) {
			alloc_early_lib_bad++;
			continue;
		}
		memset(alloc_early_lib_block[i], 0x40 + i, alloc_early_lib_size[i]);
	}
	void *c = calloc(100, 10), *a = NULL;
	if (!c || ((char *)c)[999])
		alloc_early_lib_bad++;
	c = realloc(c, 50000);
	if (!c || ((char *)c)[999])
		alloc_early_lib_bad++;
	free(c);
	if (posix_memalign(&a, 4096, 5000) || ((size_t)a & 4095))
		alloc_early_lib_bad++;
	free(a);
	char *s = strdup("early");
	if (!s || strcmp(s, "early"))
		alloc_early_lib_bad++;
	free(s);
	FILE *f = fopen("/proc/self/status", "r"); /* stdio allocates */
	if (!f || fgetc(f) == EOF)
		alloc_early_lib_bad++;
	if (f)
		fclose(f);
}
