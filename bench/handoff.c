/* handoff — a thread-handoff stress in the spirit of mimalloc's mstress:
 * many short-lived threads hand blocks to each other through shared slots.
 *
 *   handoff [SCALE [THREADS]] [--large]
 *
 * ROUNDS rounds; in each, THREADS threads (default 32) are created, work and
 * exit.  A thread's work grows its own set of live blocks: per op it
 * allocates one, frees a random one of its own one time in two, and one
 * time in four swaps a random one of its blocks with one of TRANSFER shared
 * slots, taking in a block of another thread (often of one that has exited).
 * Threads do 1/4 to 2 times OPS ops (by thread number), so they end at
 * different times; on exit a thread frees all it holds, and between rounds
 * the main thread frees half of the shared slots.  Sizes: 1 in 64 of
 * 4–32 KiB, else 7 in 8 of 16–512 B and the rest 513 B–4 KiB; with --large,
 * one allocation in 16384 is 64 KiB–5 MiB.  Every block is filled with a
 * pattern when allocated and checked when freed.
 *
 * Memory swings as threads end and start, so an allocator that hands free
 * spans back to the kernel at once faults them in again: the figures that
 * show it come from getrusage(RUSAGE_SELF) at the end: "user_s", "sys_s",
 * "minflt" (minor page faults), "maxrss_kib", with "ops_per_sec".
 * Scaled so that a run takes 1–1.5 s under glibc on 2 cores.
 */
#include "bench.h"
#include <pthread.h>
#include <sys/resource.h>

#define ROUNDS 5
#define TRANSFER 1000
#define MAX_THREADS 256

struct block {
	uint64_t cookie;
	size_t size;
	uint64_t word[];
};

static struct block *transfer[TRANSFER];
static long ops_per_thread;
static int large;
static long bad_blocks;

static size_t pick_size(uint64_t *s)
{
	uint64_t r = bench_rand(s);
	if (large && (r & 16383) == 0)
		return bench_range(s, (size_t)64 << 10, (size_t)5 << 20);
	if (((r >> 8) & 63) == 0)
		return bench_range(s, 4097, 32768);
	if (((r >> 16) & 7) != 0)
		return bench_range(s, 16, 512);
	return bench_range(s, 513, 4096);
}

static struct block *make(uint64_t *s)
{
	size_t size = pick_size(s);
	struct block *b = malloc(size);
	if (!b) {
		fprintf(stderr, "handoff: malloc(%zu) failed\n", size);
		exit(1);
	}
	b->cookie = bench_rand(s) | 1;
	b->size = size;
	size_t n = (size - sizeof *b) / sizeof b->word[0];
	for (size_t k = 0; k < n; k++)
		b->word[k] = b->cookie ^ k;
	return b;
}

static void check_free(struct block *b)
{
	if (!b)
		return;
	size_t n = (b->size - sizeof *b) / sizeof b->word[0];
	for (size_t k = 0; k < n; k++) {
		if (b->word[k] != (b->cookie ^ k)) {
			__atomic_fetch_add(&bad_blocks, 1, __ATOMIC_RELAXED);
			break;
		}
	}
	free(b);
}

static struct block *exchange(unsigned i, struct block *b)
{
	return __atomic_exchange_n(&transfer[i % TRANSFER], b, __ATOMIC_ACQ_REL);
}

static void *worker(void *arg)
{
	long id = (long)(intptr_t)arg;
	uint64_t seed = 0x94D049BB133111EBULL * (uint64_t)(id + 1);
	long ops = ops_per_thread * (id % 8 + 1) / 4; /* some threads do more */
	size_t n = 0, cap = 1024;
	struct block **live = malloc(cap * sizeof *live);
	if (!live) {
		fprintf(stderr, "handoff: malloc failed\n");
		exit(1);
	}
	for (long op = 0; op < ops; op++) {
		uint64_t r = bench_rand(&seed);
		if (n == cap) {
			cap *= 2;
			live = realloc(live, cap * sizeof *live);
			if (!live) {
				fprintf(stderr, "handoff: realloc failed\n");
				exit(1);
			}
		}
		live[n++] = make(&seed);
		if (r & 1) { /* one in two: free one of ours */
			size_t i = (size_t)(bench_rand(&seed) % n);
			check_free(live[i]);
			live[i] = live[--n];
		}
		if (((r >> 8) & 3) == 0 && n > 0) { /* one in four: swap one out */
			size_t i = (size_t)(bench_rand(&seed) % n);
			live[i] = exchange((unsigned)(r >> 32), live[i]);
			if (!live[i])
				live[i] = live[--n];
		}
	}
	for (size_t i = 0; i < n; i++)
		check_free(live[i]);
	free(live);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[MAX_THREADS];
	double scale = 1.0;
	int nthreads = 32, pos = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--large") == 0)
			large = 1;
		else if (pos++ == 0)
			scale = atof(argv[i]) > 0 ? atof(argv[i]) / 100.0 : 1.0;
		else
			nthreads = atoi(argv[i]);
	}
	if (nthreads < 1 || nthreads > MAX_THREADS)
		nthreads = 32;
	ops_per_thread = (long)(7000 * scale);
	if (ops_per_thread < 10)
		ops_per_thread = 10;
	bench_print_allocator();
	double t0 = bench_now();
	for (int round = 0; round < ROUNDS; round++) {
		for (long i = 0; i < nthreads; i++) {
			if (pthread_create(&th[i], NULL, worker,
					   (void *)(i + (long)round * nthreads)) != 0) {
				fprintf(stderr, "handoff: pthread_create failed\n");
				return 1;
			}
		}
		for (int i = 0; i < nthreads; i++)
			pthread_join(th[i], NULL);
		for (int i = round & 1; i < TRANSFER; i += 2)
			check_free(exchange((unsigned)i, NULL));
	}
	for (int i = 0; i < TRANSFER; i++)
		check_free(exchange((unsigned)i, NULL));
	double t = bench_now() - t0;
	if (bad_blocks) {
		fprintf(stderr, "handoff: %ld blocks had a broken pattern\n", bad_blocks);
		return 1;
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("threads %d\n", nthreads);
	printf("large %d\n", large);
	printf("ops_per_sec %.0f\n", (double)ops_per_thread * nthreads * ROUNDS / t);
	printf("user_s %.3f\n", (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6);
	printf("sys_s %.3f\n", (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6);
	printf("minflt %ld\n", ru.ru_minflt);
	printf("maxrss_kib %ld\n", ru.ru_maxrss);
	return 0;
}
