/* alloc_idle_threads — thread caches are bounded by a total budget, not
 * only per thread: 200 threads each allocate and free ~24 MB of small
 * blocks, then sit idle (alive, holding nothing).  Under heapalloc the bytes
 * parked in all thread caches together must stay under 64 MiB (tcmalloc's
 * default overall budget is 32 MiB).  With any allocator, resident memory
 * falls once the threads are gone.  (Resident memory while they idle is not
 * judged: glibc's own arenas keep 400-580 MiB here.) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"
#include "heapalloc.h"

enum { NT = 200, N = 4000 };
static pthread_barrier_t idle;

static void *work(void *arg)
{
	void **v = malloc(N * sizeof *v);
	uint64_t r = 0x9E3779B97F4A7C15ull * ((uintptr_t)arg + 1);
	if (!v)
		return (void *)1;
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < N; i++) {
			r ^= r << 13; r ^= r >> 7; r ^= r << 17;
			size_t n = 8 + r % 4000;
			v[i] = malloc(n);
			if (!v[i])
				return (void *)1;
			memset(v[i], 1, n);
		}
		for (int i = 0; i < N; i++)
			free(v[i]);
	}
	free(v);
	pthread_barrier_wait(&idle); /* everything freed, thread alive */
	pthread_barrier_wait(&idle); /* main has looked */
	return NULL;
}

int main(void)
{
	void (*stats)(heapalloc_stats *) = (void (*)(heapalloc_stats *))dlsym(RTLD_DEFAULT,
									 "heapalloc_get_stats");
	pthread_t t[NT];
	pthread_barrier_init(&idle, NULL, NT + 1);
	for (long i = 0; i < NT; i++)
		if (pthread_create(&t[i], NULL, work, (void *)i))
			HARD_ERROR("pthread_create");
	pthread_barrier_wait(&idle);
	long idle_rss = rss_kib();
	heapalloc_stats s;
	memset(&s, 0, sizeof s);
	if (stats)
		stats(&s);
	pthread_barrier_wait(&idle);
	for (int i = 0; i < NT; i++) {
		void *res;
		pthread_join(t[i], &res);
		CHECK(res == NULL);
	}
	long end_rss = rss_kib();
	fprintf(stderr, "VmRSS with %d idle threads: %ld KiB; after they exit: %ld KiB\n", NT,
		idle_rss, end_rss);
	CHECK_LE(end_rss, idle_rss);
	if (stats) {
		fprintf(stderr, "heapalloc: %llu thread caches hold %llu bytes; spans %llu bytes\n",
			(unsigned long long)s.thread_caches, (unsigned long long)s.thread_cache_bytes,
			(unsigned long long)s.small_span_bytes);
		CHECK_LE(s.thread_cache_bytes, 64 << 20);
	}
	return CHECK_DONE();
}
