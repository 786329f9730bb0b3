/* pairs — single-thread malloc/free pairs by size, 16 B … 32 KiB.
 *
 * Two patterns per size, each after a short warm-up:
 *   pair   malloc one block, write a byte, free it (the thread-cache fast
 *          path at its best: the same block comes straight back);
 *   batch  malloc 100 blocks, write a byte in each, free them newest first
 *          (the free lists must really hold 100 objects per class).
 * Prints "pair <size> <ns per malloc+free>" and "batch <size> <ns>".
 * argv[1]: scale in percent of the full run (bench/run --quick passes less).
 */
#include "bench.h"

#define BATCH 100

static const size_t sizes[] = { 16, 32, 64, 128, 256, 512, 1024, 2048,
				4096, 8192, 16384, 32768 };

static double run_pair(size_t size, long n)
{
	double t0 = bench_now();
	for (long i = 0; i < n; i++) {
		char *p = malloc(size);
		p[0] = (char)i;
		bench_sink = (uintptr_t)p;
		free(p);
	}
	return (bench_now() - t0) * 1e9 / (double)n;
}

static double run_batch(size_t size, long rounds)
{
	char *p[BATCH];
	double t0 = bench_now();
	for (long r = 0; r < rounds; r++) {
		for (int j = 0; j < BATCH; j++) {
			p[j] = malloc(size);
			p[j][0] = (char)j;
		}
		bench_sink = (uintptr_t)p[BATCH / 2];
		for (int j = BATCH - 1; j >= 0; j--)
			free(p[j]);
	}
	return (bench_now() - t0) * 1e9 / ((double)rounds * BATCH);
}

int main(int argc, char **argv)
{
	double scale = bench_scale(argc, argv);
	long n = (long)(100000 * scale);
	long rounds = n / BATCH;
	if (n < 1000)
		n = 1000;
	if (rounds < 10)
		rounds = 10;
	bench_print_allocator();
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		/* Past 1 KiB, fewer iterations: the same bytes, not the same count. */
		long div = sizes[i] > 1024 ? (long)(sizes[i] / 1024) : 1;
		long ni = n / div, ri = rounds / div + 1;
		run_pair(sizes[i], ni / 10);
		printf("pair %zu %.2f\n", sizes[i], run_pair(sizes[i], ni));
		run_batch(sizes[i], ri / 10 + 1);
		printf("batch %zu %.2f\n", sizes[i], run_batch(sizes[i], ri));
	}
	return 0;
}
