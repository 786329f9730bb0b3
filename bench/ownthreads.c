/* ownthreads — many threads, each allocating and freeing its own blocks.
 *
 * THREADS threads (argv[2], default 8: more threads than the 2 cores a CI
 * box has, as in glibc's bench-malloc-thread) each keep LIVE blocks and
 * replace a random one per op: free it, malloc a new one whose size is drawn
 * with a skew to the small end (half 16–64 B, a quarter 65–256 B, the rest
 * 257–1024 B), write its first byte.  No block crosses threads: this is the
 * thread cache's own fast path under preemption and cache contention.
 * Prints "ops_per_sec <replacements per second, all threads>".
 * argv[1]: scale in percent.
 */
#include "bench.h"
#include <pthread.h>

#define LIVE 64
#define MAX_THREADS 64

static long ops_per_thread;

static size_t small_size(uint64_t *s)
{
	unsigned r = (unsigned)(bench_rand(s) & 3);
	if (r < 2)
		return bench_range(s, 16, 64);
	if (r == 2)
		return bench_range(s, 65, 256);
	return bench_range(s, 257, 1024);
}

static void *worker(void *arg)
{
	uint64_t seed = 0xBF58476D1CE4E5B9ULL * ((uintptr_t)arg + 1);
	char *live[LIVE];
	long bad = 0;
	for (int i = 0; i < LIVE; i++) {
		live[i] = malloc(small_size(&seed));
		live[i][0] = (char)i;
	}
	for (long op = 0; op < ops_per_thread; op++) {
		unsigned i = (unsigned)(bench_rand(&seed) % LIVE);
		bad += live[i][0] != (char)i;
		free(live[i]);
		live[i] = malloc(small_size(&seed));
		live[i][0] = (char)i;
	}
	for (int i = 0; i < LIVE; i++)
		free(live[i]);
	return (void *)bad;
}

int main(int argc, char **argv)
{
	pthread_t th[MAX_THREADS];
	int n = argc > 2 ? atoi(argv[2]) : 8;
	if (n < 1 || n > MAX_THREADS)
		n = 8;
	ops_per_thread = (long)(6000000 * bench_scale(argc, argv) / n);
	if (ops_per_thread < 1)
		ops_per_thread = 1;
	bench_print_allocator();
	double t0 = bench_now();
	for (long i = 0; i < n; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	long bad = 0;
	for (int i = 0; i < n; i++) {
		void *r;
		pthread_join(th[i], &r);
		bad += (long)(intptr_t)r;
	}
	double t = bench_now() - t0;
	if (bad) {
		fprintf(stderr, "ownthreads: %ld blocks had a wrong tag\n", bad);
		return 1;
	}
	printf("threads %d\n", n);
	printf("ops_per_sec %.0f\n", (double)ops_per_thread * n / t);
	return 0;
}
