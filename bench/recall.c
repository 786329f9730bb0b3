/* recall — a heap of many small live objects, for what recording every
 * allocation costs in memory: argv[1] objects (default 1,000,000) of
 * 16–200 bytes from 50 call sites, all live at once, then half freed.
 * Prints "live_objects N" and "live_bytes N"; bench/recrss runs it plain and
 * under each heap profiler and compares peak RSS.
 */
#include "bench.h"

#define SITE(k) \
	__attribute__((noinline)) static void *site##k(size_t n) \
	{ char *p = malloc(n); memset(p, k, n < 16 ? n : 16); return p; }
#define S10(a) SITE(a##0) SITE(a##1) SITE(a##2) SITE(a##3) SITE(a##4) \
	SITE(a##5) SITE(a##6) SITE(a##7) SITE(a##8) SITE(a##9)
S10(1) S10(2) S10(3) S10(4) S10(5)
#define R10(a) site##a##0, site##a##1, site##a##2, site##a##3, site##a##4, \
	site##a##5, site##a##6, site##a##7, site##a##8, site##a##9,
static void *(*const sites[50])(size_t) = { R10(1) R10(2) R10(3) R10(4) R10(5) };

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	void **v = malloc((size_t)n * sizeof *v);
	uint64_t seed = 42;
	size_t bytes = 0;
	if (!v)
		return 1;
	for (long i = 0; i < n; i++) {
		size_t sz = bench_range(&seed, 16, 200);
		v[i] = sites[i % 50](sz);
		bytes += sz;
	}
	printf("live_objects %ld\nlive_bytes %zu\n", n, bytes);
	for (long i = 0; i < n; i += 2)
		free(v[i]);
	return 0;
}
