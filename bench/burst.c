/* burst — glibc's bench-malloc-simple idea: one thread allocates a burst of
 * blocks of one size, then frees them all.
 *
 * Bursts of 25, 100, 400 and 1600 blocks (cycling), all of one size, the
 * size moving through 16, 32, 64, 128 and 256 B after each cycle of four;
 * every block has its first and last byte written; the even bursts are
 * freed in the order they were allocated, the odd ones in reverse.  A
 * burst longer than a thread cache's limit for its class sends most of its
 * frees (and the next burst's mallocs) to the cache's slow paths.
 * Prints "burst_ns" (ns per malloc+free) and "ops_per_sec" (pairs per
 * second).  argv[1]: scale in percent.
 */
#include "bench.h"

#define MAXB 1600

static char *blk[MAXB];
static const int burst_len[4] = { 25, 100, 400, 1600 };

int main(int argc, char **argv)
{
	long pairs = (long)(20000000 * bench_scale(argc, argv)), done = 0;
	bench_print_allocator();
	double t0 = bench_now();
	for (long b = 0; done < pairs; b++) {
		int n = burst_len[b & 3];
		size_t sz = (size_t)16 << ((b >> 2) % 5);
		for (int i = 0; i < n; i++) {
			char *p = malloc(sz);
			p[0] = 'B';
			p[sz - 1] = 'E';
			blk[i] = p;
		}
		if (b & 1)
			for (int i = n - 1; i >= 0; i--)
				free(blk[i]);
		else
			for (int i = 0; i < n; i++)
				free(blk[i]);
		done += n;
	}
	double t = bench_now() - t0;
	printf("burst_ns %.2f\n", t * 1e9 / (double)done);
	printf("ops_per_sec %.0f\n", (double)done / t);
	return 0;
}
