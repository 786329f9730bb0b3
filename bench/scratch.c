/* scratch — mimalloc-bench's cache-scratch idea (passive false sharing):
 * blocks allocated by one thread are passed to others, which write them.
 *
 * The main thread allocates one 8-byte block per worker, back to back (so
 * they share cache lines), and hands one to each of THREADS workers
 * (argv[2], default 2).  Each worker frees the block it was given, then
 * ITERS times mallocs an 8-byte block, writes each of its bytes REPS times
 * and frees it.  An allocator that gives the worker back the block it was
 * handed (now sitting in its thread cache) keeps the workers writing to one
 * cache line; one that sends it home does not.
 * Prints "ops_per_sec" (malloc+write+free per second, all workers).
 * argv[1]: scale in percent.
 */
#include "bench.h"
#include <pthread.h>

#define OBJ 8
#define REPS 100
#define MAX_THREADS 16

static long iters;

static void *worker(void *arg)
{
	free(arg);
	for (long i = 0; i < iters; i++) {
		volatile char *p = malloc(OBJ);
		for (int r = 0; r < REPS; r++)
			for (int j = 0; j < OBJ; j++)
				p[j] = (char)(p[j] + r);
		free((void *)p);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[2]) : 2;
	if (n < 1 || n > MAX_THREADS)
		n = 2;
	iters = (long)(100000 * bench_scale(argc, argv));
	if (iters < 100)
		iters = 100;
	bench_print_allocator();
	pthread_t t[MAX_THREADS];
	void *obj[MAX_THREADS];
	for (int i = 0; i < n; i++)
		obj[i] = malloc(OBJ);
	double t0 = bench_now();
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, worker, obj[i]) != 0) {
			fprintf(stderr, "scratch: pthread_create failed\n");
			return 1;
		}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	double t1 = bench_now() - t0;
	printf("ops_per_sec %.0f\n", (double)iters * n / t1);
	return 0;
}
