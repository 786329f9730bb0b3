/* prodcons — producer/consumer: 2 threads allocate, 2 others free.
 *
 * The xmalloc-test pattern: each producer mallocs small blocks (16–128 B,
 * around the 64 B objects that test is usually run with), tags them and
 * passes them on in batches of 64 through one bounded ring (mutex + condition
 * variables); two consumers take batches off the ring, check the tags and free
 * every block.  Every free is remote, and with two consumers the frees of one
 * producer's blocks come from two threads at once.
 * Prints "ops_per_sec <blocks allocated and freed per second>".
 * argv[1]: scale in percent.
 */
#include "bench.h"
#include <pthread.h>

#define PRODUCERS 2
#define CONSUMERS 2
#define BATCH 64
#define RING 64

struct batch { int n; char *p[BATCH]; };

static struct batch ring[RING];
static unsigned head, tail; /* tail - head = batches in the ring */
static int producers_left = PRODUCERS;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static long per_producer;

static void *producer(void *arg)
{
	uint64_t seed = 0x9E3779B97F4A7C15ULL * ((uintptr_t)arg + 1);
	struct batch b = { 0, { 0 } };
	for (long i = 0; i < per_producer; i++) {
		size_t sz = bench_range(&seed, 16, 128);
		char *p = malloc(sz);
		p[0] = 'p';
		p[sz - 1] = 'q';
		b.p[b.n++] = p;
		if (b.n == BATCH || i == per_producer - 1) {
			pthread_mutex_lock(&lock);
			while (tail - head == RING)
				pthread_cond_wait(&not_full, &lock);
			ring[tail % RING] = b;
			tail++;
			pthread_cond_signal(&not_empty);
			pthread_mutex_unlock(&lock);
			b.n = 0;
		}
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
		struct batch b;
		pthread_mutex_lock(&lock);
		while (tail == head && producers_left > 0)
			pthread_cond_wait(&not_empty, &lock);
		if (tail == head) {
			pthread_mutex_unlock(&lock);
			break;
		}
		b = ring[head % RING];
		head++;
		pthread_cond_signal(&not_full);
		pthread_mutex_unlock(&lock);
		for (int j = 0; j < b.n; j++) {
			bad += b.p[j][0] != 'p';
			free(b.p[j]);
		}
		freed += b.n;
	}
	*(long *)arg = bad ? -1 : freed;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t prod[PRODUCERS], cons[CONSUMERS];
	long freed[CONSUMERS] = { 0 }, total = 0;
	per_producer = (long)(1000000 * bench_scale(argc, argv));
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
	if (total != per_producer * PRODUCERS) {
		fprintf(stderr, "prodcons: freed %ld of %ld blocks (or a tag was wrong)\n",
			total, per_producer * PRODUCERS);
		return 1;
	}
	printf("ops_per_sec %.0f\n", (double)total / t);
	return 0;
}
