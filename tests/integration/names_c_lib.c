/* A shared library of the test program's own (tests/integration/names_pie.sh): its
 * allocation site must be named from the library's ELF, wherever it loads. */
#include <stdlib.h>

static void *lib_kept[8];

/* 5 x 4000 B, the first 2 freed: 3 objects, 12000 B in use. */
__attribute__((noinline)) void lib_keep(void)
{
	for (int i = 0; i < 5; i++)
		lib_kept[i] = malloc(4000);
	for (int i = 0; i < 2; i++)
		free(lib_kept[i]);
}
