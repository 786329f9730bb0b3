/* prodcons — producer/consumer: 2 threads allocate, 2 others free.
 *
 * The xmalloc-test pattern: each producer fills a batch (itself a 32 KiB
 * malloc) with BATCH blocks whose sizes are drawn from a 1.5x series of
 * 8 B … 2 KiB, writes up to 128 B of each, and pushes the batch onto one
 * shared stack (mutex + condition variables, at most LIMIT batches in flight:
 * some 400 000 blocks, ~150 MiB).  Two consumers pop batches and free every
 * block and the batch.  Every free is remote, comes in bulk, and the memory
 * in flight is far more than any thread cache holds, so blocks travel the
 * allocator's whole cross-thread return path.
 * Prints "ops_per_sec <blocks allocated and freed per second>".
 * argv[1]: scale in percent.
 */
#include "bench.h"
#include <pthread.h>

#define PRODUCERS 2
#define CONSUMERS 2
#define BATCH 4096
#define LIMIT 100

struct batch { struct batch *next; char *p[BATCH]; };

static const size_t sizes[] = { 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256,
				384, 512, 768, 1024, 1536, 2048 };
#define NSIZES (sizeof sizes / sizeof sizes[0])

static struct batch *stack;
static int in_flight;
static int producers_left = PRODUCERS;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static long per_producer; /* batches */

static void *producer(void *arg)
{
	uint64_t seed = 0x9E3779B97F4A7C15ULL * ((uintptr_t)arg + 1);
	for (long k = 0; k < per_producer; k++) {
		struct batch *b = malloc(sizeof *b);
		for (int i = 0; i < BATCH; i++) {
			size_t sz = sizes[bench_rand(&seed) % NSIZES];
			b->p[i] = malloc(sz);
			memset(b->p[i], i & 255, sz < 128 ? sz : 128);
		}
		pthread_mutex_lock(&lock);
		while (in_flight >= LIMIT)
			pthread_cond_wait(&not_full, &lock);
		b->next = stack;
		stack = b;
		in_flight++;
		pthread_cond_signal(&not_empty);
		pthread_mutex_unlock(&lock);
	}
	pthread_mutex_lock(&lock);
	producers_left--;
	pthread_cond_broadcast(&not_empty);
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void *consumer(void *arg)
{
	long freed = 0, bad = 0;
	for (;;) {
		pthread_mutex_lock(&lock);
		while (!stack && producers_left > 0)
			pthread_cond_wait(&not_empty, &lock);
		struct batch *b = stack;
		if (!b) {
			pthread_mutex_unlock(&lock);
			break;
		}
		stack = b->next;
		in_flight--;
		pthread_cond_signal(&not_full);
		pthread_mutex_unlock(&lock);
		for (int i = 0; i < BATCH; i++) {
			bad += b->p[i][0] != (char)(i & 255);
			free(b->p[i]);
		}
		free(b);
		freed += BATCH;
	}
	*(long *)arg = bad ? -1 : freed;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t prod[PRODUCERS], cons[CONSUMERS];
	long freed[CONSUMERS] = { 0 }, total = 0;
	per_producer = (long)(400 * bench_scale(argc, argv));
	if (per_producer < 1)
		per_producer = 1;
	bench_print_allocator();
	double t0 = bench_now();
	for (int i = 0; i < CONSUMERS; i++)
		pthread_create(&cons[i], NULL, consumer, &freed[i]);
	for (long i = 0; i < PRODUCERS; i++)
		pthread_create(&prod[i], NULL, producer, (void *)i);
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(prod[i], NULL);
	for (int i = 0; i < CONSUMERS; i++) {
		pthread_join(cons[i], NULL);
		total = freed[i] < 0 || total < 0 ? -1 : total + freed[i];
	}
	double t = bench_now() - t0;
	if (total != per_producer * PRODUCERS * BATCH) {
		fprintf(stderr, "prodcons: freed %ld of %ld blocks (or a tag was wrong)\n",
			total, per_producer * PRODUCERS * BATCH);
		return 1;
	}
	printf("ops_per_sec %.0f\n", (double)total / t);
	return 0;
}
