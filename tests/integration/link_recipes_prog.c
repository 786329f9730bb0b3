/* link_recipes_prog — a program that allocates only through libc (strdup,
 * asprintf) and names no heapalloc or malloc-family symbol, so nothing in
 * it makes the linker keep libheapalloc: linked by link_recipes.sh each
 * way the README documents.  Prints who serves malloc in this process
 * ("self" when it is the program's own, i.e. libheapalloc.a linked in) and
 * leaves one 50001-byte block (strdup of 50000 characters) in use at exit.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static char text[50001];

int main(void)
{
	memset(text, 'x', sizeof text - 1);
	char *kept = strdup(text), *t = NULL;
	if (!kept || asprintf(&t, "%d %s", 42, "bytes") < 0)
		return 2;
	Dl_info m, self;
	void *p = dlsym(RTLD_DEFAULT, "malloc");
	if (!p || !dladdr(p, &m) || !dladdr((void *)&main, &self))
		return 3;
	const char *name = m.dli_fname ? strrchr(m.dli_fname, '/') : NULL;
	printf("malloc %s\n", m.dli_fbase == self.dli_fbase ? "self"
			      : name ? name + 1 : m.dli_fname);
	void (*release)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "free");
	release(t);
	return kept[0] == 'x' ? 0 : 4;
}
