/* tests/integration/cmd_static.c — a fully static program without heapalloc: LD_PRELOAD
 * cannot reach it, so `heapalloc run` must say so before it starts.  Prints
 * one line and exits 7, which must reach the caller unchanged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
	char *p = malloc(4096);
	if (!p)
		return 99;
	strcpy(p, "static program ran");
	puts(p);
	free(p);
	return 7;
}
