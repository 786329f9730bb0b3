/* soakd — the service bench/soak keeps running for its whole duration while
 * everything reads it: request queues between thread pools, a cache that
 * fills and turns over, fork+exec of a helper, signals, and a thread that
 * times one malloc+free every 100 us (the stall any reader causes an
 * allocating thread).
 *
 *   soakd SECONDS
 *
 * PAIRS (2) acceptor threads allocate requests of 64 B–16 KiB and queue them
 * to their worker, which checks each, keeps one in 8 in a shared cache of
 * CACHE slots (replacing, and freeing, what was there: the cache turns over
 * and its size wanders), and answers with a response of 64 B–4 KiB that the
 * acceptor checks and frees.  Every block carries a pattern, checked before
 * it is freed; a wrong byte is reported and the status is 1.  Every 2 s a
 * thread forks and execs /bin/true (status checked); SIGUSR1 (the soak sends
 * it) is counted.  stdout: "soakd ok" (the same under any allocator);
 * stderr: one "stall END DURATION_US" line per malloc+free over 1 ms (END:
 * CLOCK_MONOTONIC seconds), then "messages N forks N signals N stall_max_us
 * X stall_over_1ms N".
 */
#include "bench.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#define PAIRS 2
#define QCAP 256
#define CACHE 16384

typedef struct queue {
	pthread_mutex_t m;
	pthread_cond_t nonempty, nonfull;
	void *slot[QCAP];
	unsigned head, n;
} queue;

static queue to_worker[PAIRS], to_acceptor[PAIRS];
static void *cache[CACHE];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int stop;
static volatile sig_atomic_t signals;
static long bad, messages, forks;

static void put(queue *q, void *p)
{
	pthread_mutex_lock(&q->m);
	while (q->n == QCAP)
		pthread_cond_wait(&q->nonfull, &q->m);
	q->slot[(q->head + q->n++) % QCAP] = p;
	pthread_cond_signal(&q->nonempty);
	pthread_mutex_unlock(&q->m);
}

static void *get(queue *q)
{
	pthread_mutex_lock(&q->m);
	while (!q->n)
		pthread_cond_wait(&q->nonempty, &q->m);
	void *p = q->slot[q->head];
	q->head = (q->head + 1) % QCAP;
	q->n--;
	pthread_cond_signal(&q->nonfull);
	pthread_mutex_unlock(&q->m);
	return p;
}

/* A block: its size in the first word, then a pattern of it every 64 B. */
static void *make(uint64_t *rng, size_t lo, size_t hi)
{
	size_t n = bench_range(rng, lo, hi);
	uint64_t *p = malloc(n);
	if (!p)
		return NULL;
	for (size_t i = 0; i < n / 8; i += 8)
		p[i] = i ? n ^ i : n;
	return p;
}

static void check_free(void *v)
{
	uint64_t *p = v;
	if (!p)
		return;
	size_t n = p[0];
	for (size_t i = 8; i < n / 8; i += 8)
		if (p[i] != (n ^ i)) {
			fprintf(stderr, "soakd: block %p of %zu bytes: word %zu is %#llx\n", v, n, i,
				(unsigned long long)p[i]);
			__atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
			break;
		}
	free(p);
}

static void *acceptor(void *arg)
{
	long k = (long)arg;
	uint64_t rng = 0x9E3779B97F4A7C15ull * (uint64_t)(k + 1);
	unsigned inflight = 0;
	while (!stop || inflight) {
		if (!stop && inflight < QCAP / 2) {
			void *r = make(&rng, 64, 16384);
			if (r) {
				put(&to_worker[k], r);
				inflight++;
				continue;
			}
		}
		check_free(get(&to_acceptor[k]));
		inflight--;
		__atomic_fetch_add(&messages, 1, __ATOMIC_RELAXED);
	}
	put(&to_worker[k], NULL);
	return NULL;
}

static void *worker(void *arg)
{
	long k = (long)arg;
	uint64_t rng = 0xC2B2AE3D27D4EB4Full * (uint64_t)(k + 1);
	for (void *r; (r = get(&to_worker[k]));) {
		if (bench_rand(&rng) % 8 == 0) {   /* kept: replaces a cache slot */
			size_t s = bench_rand(&rng) % CACHE;
			pthread_mutex_lock(&cache_lock);
			void *old = cache[s];
			cache[s] = r;
			pthread_mutex_unlock(&cache_lock);
			check_free(old);
		} else {
			check_free(r);
		}
		put(&to_acceptor[k], make(&rng, 64, 4096));
	}
	return NULL;
}

static double stall_max;
static long stall_over_1ms;
/* the stalls over 1 ms, each with when it ended (CLOCK_MONOTONIC), so that
 * the soak can leave out the ones its own SIGSTOP caused */
#define STALLS 65536
static struct { double end, dur; } stalls[STALLS];

static void *timer(void *arg)
{
	(void)arg;
	uint64_t rng = 7;
	struct timespec gap = { 0, 100000 };
	while (!stop) {
		double t0 = bench_now();
		char *p = malloc(bench_range(&rng, 16, 4096));
		if (p)
			p[0] = 1;
		free(p);
		double d = bench_now() - t0;
		if (d > stall_max)
			stall_max = d;
		if (d > 1e-3 && stall_over_1ms < STALLS) {
			stalls[stall_over_1ms].end = t0 + d;
			stalls[stall_over_1ms].dur = d;
		}
		stall_over_1ms += d > 1e-3;
		nanosleep(&gap, NULL);
	}
	return NULL;
}

static void *forker(void *arg)
{
	(void)arg;
	while (!stop) {
		sleep(2);
		pid_t c = fork();
		if (c == 0) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		int st;
		if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "soakd: fork+exec of /bin/true failed\n");
			__atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
		} else {
			forks++;
		}
	}
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;
	signals++;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 0;
	if (secs <= 0) {
		fprintf(stderr, "usage: soakd SECONDS\n");
		return 2;
	}
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_RESTART };
	sigaction(SIGUSR1, &sa, NULL);
	pthread_t a[PAIRS], w[PAIRS], t, f;
	for (long k = 0; k < PAIRS; k++) {
		queue *qs[2] = { &to_worker[k], &to_acceptor[k] };
		for (int i = 0; i < 2; i++) {
			pthread_mutex_init(&qs[i]->m, NULL);
			pthread_cond_init(&qs[i]->nonempty, NULL);
			pthread_cond_init(&qs[i]->nonfull, NULL);
		}
		pthread_create(&w[k], NULL, worker, (void *)k);
		pthread_create(&a[k], NULL, acceptor, (void *)k);
	}
	pthread_create(&t, NULL, timer, NULL);
	pthread_create(&f, NULL, forker, NULL);
	struct timespec end = { (time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9) };
	while (nanosleep(&end, &end) != 0 && errno == EINTR)
		;
	stop = 1;
	for (int k = 0; k < PAIRS; k++) {
		pthread_join(a[k], NULL);
		pthread_join(w[k], NULL);
	}
	pthread_join(t, NULL);
	pthread_join(f, NULL);
	for (int s = 0; s < CACHE; s++)
		check_free(cache[s]);
	for (long i = 0; i < stall_over_1ms && i < STALLS; i++)
		fprintf(stderr, "stall %.6f %.0f\n", stalls[i].end, stalls[i].dur * 1e6);
	fprintf(stderr, "messages %ld forks %ld signals %ld stall_max_us %.0f stall_over_1ms %ld\n",
		messages, forks, (long)signals, stall_max * 1e6, stall_over_1ms);
	if (bad)
		return 1;
	puts("soakd ok");
	return 0;
}
