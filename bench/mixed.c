/* mixed — single-thread malloc/free pairs with random sizes against fixed.
 *
 * The sizes are drawn beforehand (SIZES of them, uniform in 16–256 B) so the
 * random number generator is not timed; the timed loop mallocs sizes[i],
 * writes a byte and frees it at once.  Fixed 16 B and 128 B pairs run the same
 * loop over an array holding one size, so the three differ only in how the
 * size classes vary: a size-to-class lookup whose branches mispredict on
 * mixed sizes shows as the gap between "mixed" and the fixed rows.  "alt"
 * alternates 16 and 32 B: no branch to mispredict, but each pair's free
 * stores to another class's list than the last one's
 * (bench/results/free-chain.md).
 * Prints "mixed_ns", "fixed16_ns", "fixed128_ns", "alt_ns" (ns per
 * malloc+free) and "pairs_per_sec" (of the mixed loop).
 * argv[1]: scale in percent.
 */
#include "bench.h"

#define SIZES 4096 /* a power of two */

static size_t sizes[SIZES];

static double run(long n)
{
	double t0 = bench_now();
	for (long i = 0; i < n; i++) {
		char *p = malloc(sizes[i & (SIZES - 1)]);
		p[0] = (char)i;
		bench_sink = (uintptr_t)p;
		free(p);
	}
	return (bench_now() - t0) * 1e9 / (double)n;
}

static double run_fixed(size_t size, long n)
{
	for (int i = 0; i < SIZES; i++)
		sizes[i] = size;
	run(n / 10);
	return run(n);
}

int main(int argc, char **argv)
{
	long n = (long)(1000000 * bench_scale(argc, argv));
	uint64_t seed = 12345;
	if (n < 10000)
		n = 10000;
	bench_print_allocator();
	double f16 = run_fixed(16, n), f128 = run_fixed(128, n);
	for (int i = 0; i < SIZES; i++)
		sizes[i] = i & 1 ? 32 : 16;
	run(n / 10);
	double alt = run(n);
	for (int i = 0; i < SIZES; i++)
		sizes[i] = bench_range(&seed, 16, 256);
	run(n / 10);
	double mixed = run(n);
	printf("mixed_ns %.2f\n", mixed);
	printf("fixed16_ns %.2f\n", f16);
	printf("fixed128_ns %.2f\n", f128);
	printf("alt_ns %.2f\n", alt);
	printf("pairs_per_sec %.0f\n", 1e9 / mixed);
	return 0;
}
