/* alloc_tsd_last_round — a thread whose very first allocation happens in the
 * last round of pthread key destructors (PTHREAD_DESTRUCTOR_ITERATIONS):
 * the allocator cannot count on a destructor of its own running after that,
 * yet the thread's cache must not outlive the thread.  800 such threads,
 * with mallinfo2 (which walks every live cache) between batches; a hang is
 * turned into a failure by an alarm, set again at each batch (a busy or
 * emulated machine may take tens of seconds over all 800).  Under heapalloc, the live thread-cache
 * count must fall back afterwards. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include "tests/lib/check.h"
#include "heapalloc.h"

static pthread_key_t key;
static int marker;
static __thread int rounds;
static volatile int phase;

static void dtor(void *v)
{
	(void)v;
	if (++rounds < PTHREAD_DESTRUCTOR_ITERATIONS) {
		pthread_setspecific(key, &marker); /* come back next round */
		return;
	}
	void *p = malloc(100), *q = malloc(5000); /* first allocations of this thread */
	free(p);
	free(q);
}

static void *body(void *a)
{
	(void)a;
	pthread_setspecific(key, &marker); /* no allocation here */
	return NULL;
}

static void on_alarm(int sig)
{
	static const char msg[] = "FAIL: hung (a batch of 4 threads took 10 s) in thread exit "
				  "or mallinfo2 after late-round thread allocations\n";
	(void)sig;
	if (write(2, msg, sizeof msg - 1) < 0)
		_exit(2);
	_exit(1);
}

int main(void)
{
	signal(SIGALRM, on_alarm);
	if (pthread_key_create(&key, dtor))
		HARD_ERROR("pthread_key_create");
	for (int i = 0; i < 200; i++) {
		alarm(10);
		pthread_t t[4];
		for (int k = 0; k < 4; k++)
			if (pthread_create(&t[k], NULL, body, NULL))
				HARD_ERROR("pthread_create");
		for (int k = 0; k < 4; k++)
			pthread_join(t[k], NULL);
		struct mallinfo2 m = mallinfo2();
		(void)m;
	}
	alarm(0);
	void (*stats)(heapalloc_stats *) = (void (*)(heapalloc_stats *))dlsym(RTLD_DEFAULT,
									 "heapalloc_get_stats");
	if (stats) {
		heapalloc_stats s;
		stats(&s);
		fprintf(stderr, "heapalloc: %llu live thread caches (%llu bytes)\n",
			(unsigned long long)s.thread_caches, (unsigned long long)s.thread_cache_bytes);
		CHECK_LE(s.thread_caches, 2);
	}
	return CHECK_DONE();
}
