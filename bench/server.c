/* server — a server-like mix: per-thread working sets, random replacements
 * with skewed sizes, some blocks handed to other threads.
 *
 * Each of T threads (argv[2], default 2) keeps SLOTS live blocks.  One op
 * replaces a random slot: the old block is freed, or — one time in 8 — handed
 * to the next thread, which frees it (a request buffer passed to a worker);
 * the new block gets a skewed size (60% 16–128 B, 30% 129 B–1 KiB,
 * 9% 1–8 KiB, 1% 8–64 KiB) and its first bytes are written.  Hand-offs go in
 * batches of 64 through a mutex-protected inbox that the owner drains every
 * 256 ops.  Prints "ops_per_sec <replacements per second, all threads>".
 * argv[1]: scale in percent.
 */
#include "bench.h"
#include <pthread.h>

#define SLOTS 8192
#define HANDOFF_BATCH 64
#define INBOX_CAP 65536
#define MAX_THREADS 64

struct inbox {
	pthread_mutex_t lock;
	long n;
	char *p[INBOX_CAP];
};

static struct inbox *inboxes;
static int nthreads;
static long ops_per_thread;

static size_t skewed_size(uint64_t *s)
{
	unsigned r = (unsigned)(bench_rand(s) % 100);
	if (r < 60)
		return bench_range(s, 16, 128);
	if (r < 90)
		return bench_range(s, 129, 1024);
	if (r < 99)
		return bench_range(s, 1025, 8192);
	return bench_range(s, 8193, 65536);
}

static void drain(struct inbox *in, char **tmp)
{
	long n;
	pthread_mutex_lock(&in->lock);
	n = in->n;
	memcpy(tmp, in->p, (size_t)n * sizeof *tmp);
	in->n = 0;
	pthread_mutex_unlock(&in->lock);
	for (long i = 0; i < n; i++)
		free(tmp[i]);
}

static void post(struct inbox *in, char **batch, int n)
{
	pthread_mutex_lock(&in->lock);
	if (in->n + n <= INBOX_CAP) {
		memcpy(in->p + in->n, batch, (size_t)n * sizeof *batch);
		in->n += n;
		n = 0;
	}
	pthread_mutex_unlock(&in->lock);
	for (int i = 0; i < n; i++) /* inbox full: free here rather than block */
		free(batch[i]);
}

static void *worker(void *arg)
{
	long id = (long)arg;
	uint64_t seed = 0xD1B54A32D192ED03ULL * (uint64_t)(id + 1);
	char **slot = calloc(SLOTS, sizeof *slot);
	char **tmp = malloc(INBOX_CAP * sizeof *tmp);
	char *out[HANDOFF_BATCH];
	int nout = 0;
	struct inbox *next = &inboxes[(id + 1) % nthreads];

	for (int i = 0; i < SLOTS; i++) {
		size_t sz = skewed_size(&seed);
		slot[i] = malloc(sz);
		memset(slot[i], (int)i, sz < 64 ? sz : 64);
	}
	for (long op = 0; op < ops_per_thread; op++) {
		uint64_t r = bench_rand(&seed);
		unsigned i = (unsigned)(r % SLOTS);
		if (nthreads > 1 && ((r >> 32) & 7) == 0) {
			out[nout++] = slot[i];
			if (nout == HANDOFF_BATCH) {
				post(next, out, nout);
				nout = 0;
			}
		} else {
			free(slot[i]);
		}
		size_t sz = skewed_size(&seed);
		slot[i] = malloc(sz);
		memset(slot[i], (int)op, sz < 64 ? sz : 64);
		if ((op & 255) == 0)
			drain(&inboxes[id], tmp);
	}
	if (nout)
		post(next, out, nout);
	for (int i = 0; i < SLOTS; i++)
		free(slot[i]);
	free(slot);
	free(tmp);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[MAX_THREADS];
	nthreads = argc > 2 ? atoi(argv[2]) : 2;
	if (nthreads < 1 || nthreads > MAX_THREADS)
		nthreads = 2;
	ops_per_thread = (long)(1000000 * bench_scale(argc, argv) / nthreads);
	inboxes = calloc((size_t)nthreads, sizeof *inboxes);
	for (int i = 0; i < nthreads; i++)
		pthread_mutex_init(&inboxes[i].lock, NULL);
	bench_print_allocator();
	double t0 = bench_now();
	for (long i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	double t = bench_now() - t0;
	char **tmp = malloc(INBOX_CAP * sizeof *tmp);
	for (int i = 0; i < nthreads; i++)
		drain(&inboxes[i], tmp);
	free(tmp);
	free(inboxes);
	printf("threads %d\n", nthreads);
	printf("ops_per_sec %.0f\n", (double)ops_per_thread * nthreads / t);
	return 0;
}
