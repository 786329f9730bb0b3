/* Ground truth for heapalloc-symbolize and the text format's leaf
 * (tests/integration/names_pie.sh, tests/integration/names_nopie.sh), built as a user builds it
 * (-O2 -g: main lands in .text.startup).  Sites, all kept to exit:
 *   main       7 x 3000 B
 *   inl_leaf   10 x 1000 B, inlined into site_inlined; the code right after
 *              its malloc call is inl_next's, which must never be charged
 *   lib_keep   (libnames.so) 5 x 4000 B allocated, 3 kept */
#include <stdlib.h>

void lib_keep(void);
void *volatile kept[64];
volatile int nkept;

static inline __attribute__((always_inline)) void *inl_leaf(size_t n)
{
	return malloc(n);
}

static inline __attribute__((always_inline)) void inl_next(void *p)
{
	kept[nkept] = p;
	nkept = nkept + 1;
}

__attribute__((noinline)) void site_inlined(void)
{
	for (int i = 0; i < 10; i++)
		inl_next(inl_leaf(1000));
}

int main(void)
{
	for (int i = 0; i < 7; i++)
		kept[32 + i] = malloc(3000);
	site_inlined();
	lib_keep();
	return 0;
}
