/* alloc_handoff — producer/consumer: two threads allocate blocks that two
 * other threads free, through a bounded queue (at most 8192 blocks, ~8 MiB,
 * live at once), 1.5 GiB in all.  Blocks freed by the consumers must find
 * their way back to the producers: a cache that only ever grows shows up as
 * resident memory far beyond the live set.  Passes when VmRSS stays under
 * 128 MiB and every block arrives with its pattern intact. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

enum { QCAP = 8192, PER_PRODUCER = 800000, NPROD = 2, NCONS = 2 };

static void *q[QCAP];
static uint32_t qn[QCAP];
static size_t head, tail, count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER, not_empty = PTHREAD_COND_INITIALIZER;
static int producers_left = NPROD;
static atomic_long bad, peak_rss;
static long (*mem)(void) = rss_kib;   /* VmRSS; under qemu-user the heap's footprint */

static void put(void *p, uint32_t n)
{
	pthread_mutex_lock(&lock);
	while (count == QCAP)
		pthread_cond_wait(&not_full, &lock);
	q[tail] = p;
	qn[tail] = n;
	tail = (tail + 1) % QCAP;
	count++;
	pthread_cond_signal(&not_empty);
	pthread_mutex_unlock(&lock);
}

static int get(void **p, uint32_t *n)
{
	pthread_mutex_lock(&lock);
	while (count == 0 && producers_left)
		pthread_cond_wait(&not_empty, &lock);
	if (count == 0) {
		pthread_mutex_unlock(&lock);
		return 0;
	}
	*p = q[head];
	*n = qn[head];
	head = (head + 1) % QCAP;
	count--;
	pthread_cond_signal(&not_full);
	pthread_mutex_unlock(&lock);
	return 1;
}

static void *producer(void *arg)
{
	uint64_t r = 0x9E3779B97F4A7C15ull * ((uintptr_t)arg + 1);
	for (long i = 0; i < PER_PRODUCER; i++) {
		r ^= r << 13; r ^= r >> 7; r ^= r << 17;
		uint32_t n = 16 + (uint32_t)(r % 2000); /* ~1 KiB average, small classes */
		unsigned char *p = malloc(n);
		if (!p) {
			atomic_fetch_add(&bad, 1);
			continue;
		}
		p[0] = (unsigned char)n;
		p[n - 1] = (unsigned char)(n >> 3);
		put(p, n);
		if ((i & 65535) == 0) {
			long rss = mem();
			if (rss > atomic_load(&peak_rss))
				atomic_store(&peak_rss, rss);
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
	void *p;
	uint32_t n;
	(void)arg;
	while (get(&p, &n)) {
		unsigned char *c = p;
		if (c[0] != (unsigned char)n || c[n - 1] != (unsigned char)(n >> 3))
			atomic_fetch_add(&bad, 1);
		free(p);
	}
	return NULL;
}

int main(void)
{
	/* under qemu-user the heap's own footprint stands for VmRSS, which
	 * holds the emulator's memory too (alloc_util.h) */
	if (ck_emulated()) {
		if (heap_footprint_kib() < 0)
			EMU_SKIP("the process's RSS is qemu-user's too, and heapalloc_get_stats is not here");
		mem = heap_footprint_kib;
		fprintf(stderr, "%s: \"VmRSS\" below is the heap's own footprint "
			"(heapalloc_get_stats: spans, large blocks, metadata)\n", ck_emulated());
	}
	pthread_t pt[NPROD], ct[NCONS];
	for (long i = 0; i < NCONS; i++)
		if (pthread_create(&ct[i], NULL, consumer, (void *)i))
			HARD_ERROR("pthread_create");
	for (long i = 0; i < NPROD; i++)
		if (pthread_create(&pt[i], NULL, producer, (void *)i))
			HARD_ERROR("pthread_create");
	for (int i = 0; i < NPROD; i++)
		pthread_join(pt[i], NULL);
	for (int i = 0; i < NCONS; i++)
		pthread_join(ct[i], NULL);
	long end = mem();
	if (end > peak_rss)
		peak_rss = end;
	fprintf(stderr, "%d blocks handed over, peak VmRSS %ld KiB\n", NPROD * PER_PRODUCER,
		(long)peak_rss);
	CHECK_EQ(bad, 0);
	CHECK_LE(peak_rss, 128 * 1024);
	return CHECK_DONE();
}
