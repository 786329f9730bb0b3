/* tests/stress/rel_threadchurn.c — 20000 short-lived threads (16 at a time) that
 * allocate and free, under HEAPPROFILE with a 4 KiB sampling interval so
 * every thread records samples and frees sampled objects.  Memory must
 * stay bounded: VmRSS at the end within 32 MiB of VmRSS after the first
 * 2000 threads, the profiler's own memory (heapalloc_get_stats().
 * prof_memory) at most double plus 1 MiB, thread caches of dead threads
 * retired.
 */
#include <stdint.h>

#include "tests/lib/rel_util.h"
#include "include/heapalloc.h"

#define NTHREADS 20000
#define WARMUP 2000
#define BATCH 16

static void *worker(void *arg)
{
	uintptr_t seed = (uintptr_t)arg;
	void *v[48];
	for (int i = 0; i < 48; i++) {
		size_t n = (size_t)((seed * 2654435761u + (unsigned)i * 40503u) % 4000) + 1;
		if (i == 47 && seed % 8 == 0)
			n = 40000 + seed % 1000;          /* a large block now and then */
		v[i] = malloc(n);
		if (v[i])
			memset(v[i], (int)i, n < 64 ? n : 64);
	}
	for (int i = 0; i < 48; i++)
		free(v[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	static char dir[512], env_p[600], env_d[600];
	if (!getenv("REL_CHILD")) {
		rel_mkdtemp(dir, sizeof dir, "relchurn");
		snprintf(env_p, sizeof env_p, "HEAPPROFILE=%s/p", dir);
		snprintf(env_d, sizeof env_d, "REL_DIR=%s", dir);
		rel_reexec(argv, env_p, env_d, "HEAP_PROFILE_SAMPLE_INTERVAL=4096",
			   (char *)NULL);
	}
	(void)argc;
	rel_watchdog(90, "rel_threadchurn");
	snprintf(dir, sizeof dir, "%s", getenv("REL_DIR"));
	REQUIRE(heapalloc_profile_running());

	long rss_warm = 0;
	heapalloc_stats warm, end;
	memset(&warm, 0, sizeof warm);
	int failed_create = 0;
	for (int i = 0; i < NTHREADS; i += BATCH) {
		pthread_t t[BATCH];
		int made[BATCH];
		for (int k = 0; k < BATCH; k++)
			made[k] = pthread_create(&t[k], NULL, worker,
						 (void *)(uintptr_t)(i + k)) == 0;
		for (int k = 0; k < BATCH; k++) {
			if (made[k])
				pthread_join(t[k], NULL);
			else
				failed_create++;
		}
		if (i + BATCH == WARMUP) {
			rss_warm = rel_rss_kib();
			heapalloc_get_stats(&warm);
		}
	}
	long rss_end = rel_rss_kib();
	heapalloc_get_stats(&end);
	fprintf(stderr, "info: VmRSS %ld KiB after %d threads, %ld KiB after %d; "
		"prof_memory %llu -> %llu; samples %llu; thread caches %llu\n",
		rss_warm, WARMUP, rss_end, NTHREADS, (unsigned long long)warm.prof_memory,
		(unsigned long long)end.prof_memory, (unsigned long long)end.prof_samples,
		(unsigned long long)end.thread_caches);
	heapalloc_profile_stop();

	CHECK_EQ(failed_create, 0);
	CHECK_LE(rss_end - rss_warm, 32 * 1024);
	CHECK_GE(end.prof_samples, 1000);   /* the profiler really was sampling */
	CHECK_LE(end.prof_memory, 2 * warm.prof_memory + (1 << 20));
	CHECK_LE(end.thread_caches, 4);      /* dead threads' caches retired */
	rel_rmtree(dir);
	return CHECK_DONE();
}
