/* tests/integration/prof_dlmod.c — a module that allocates in its constructor and in
 * prof_dlmod_work, dlopened in a loop by `prof_work dlopen` while other
 * threads write heap profiles (a dump must not deadlock on the loader). */
#include <stdlib.h>

void *volatile prof_dlmod_sink;

__attribute__((constructor)) static void prof_dlmod_init(void)
{
	for (int i = 0; i < 50; i++) {
		prof_dlmod_sink = malloc(100 + i);
		free(prof_dlmod_sink);
	}
}

int prof_dlmod_work(void)
{
	void *p = malloc(4096);
	prof_dlmod_sink = p;
	free(p);
	return 0;
}
