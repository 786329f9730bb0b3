/* espresso — a single-threaded program's mix in the manner of espresso (the
 * logic minimiser in mimalloc-bench): many sizes, lifetimes interleaved.
 *
 * Each step allocates one block and frees one: from a short-lived set of
 * 256 slots (three steps in four: a block lives ~256 steps) or a long-lived
 * set of 16384 slots (one in four), the slot picked at random.  Sizes are
 * skewed small: 70% 8–64 B, 25% 65–512 B, 5% 513 B–4 KiB.  Every block gets
 * its first and last byte written and checked when freed.
 * Prints "ops_per_sec" (steps per second).  argv[1]: scale in percent.
 */
#include "bench.h"

#define SHORT 256
#define LONG 16384

struct blk {
	char *p;
	size_t sz;
};
static struct blk shortb[SHORT], longb[LONG];

static size_t pick_size(uint64_t *s)
{
	unsigned r = (unsigned)(bench_rand(s) % 100);
	if (r < 70)
		return bench_range(s, 8, 64);
	if (r < 95)
		return bench_range(s, 65, 512);
	return bench_range(s, 513, 4096);
}

static long bad;

static void replace(struct blk *b, uint64_t *s)
{
	if (b->p) {
		if (b->p[0] != 'S' || b->p[b->sz - 1] != 'T')
			bad++;
		free(b->p);
	}
	b->sz = pick_size(s);
	b->p = malloc(b->sz);
	b->p[0] = 'S';
	b->p[b->sz - 1] = 'T';
}

int main(int argc, char **argv)
{
	long steps = (long)(10000000 * bench_scale(argc, argv));
	uint64_t seed = 777;
	bench_print_allocator();
	for (int i = 0; i < LONG; i++)
		replace(&longb[i], &seed);
	double t0 = bench_now();
	for (long i = 0; i < steps; i++) {
		uint64_t r = bench_rand(&seed);
		if (r & 3)
			replace(&shortb[(r >> 8) & (SHORT - 1)], &seed);
		else
			replace(&longb[(r >> 8) & (LONG - 1)], &seed);
	}
	double t = bench_now() - t0;
	for (int i = 0; i < SHORT; i++)
		free(shortb[i].p);
	for (int i = 0; i < LONG; i++)
		free(longb[i].p);
	if (bad) {
		fprintf(stderr, "espresso: %ld blocks had a wrong tag\n", bad);
		return 1;
	}
	printf("ops_per_sec %.0f\n", (double)steps / t);
	return 0;
}
