/* tests/integration/prof_restart.c — exact totals across stops and starts while other
 * threads allocate (docs/heap-profile-spec.md §5: exact whatever R is), in compatibility mode.
 * A running thread joins a new session at its next slow path (here a big
 * block; else a cache refill or flush, or 16 MiB of allocation): from then
 * on its allocations must be counted, every byte, and its blocks' frees too.  Four workers, twelve
 * sessions at R = 4096 (samples and threshold checks fall inside the
 * rounds) and at the default; in each, every worker allocates and frees
 * known amounts between barriers, and the totals heapalloc_get_stats
 * reports must move by exactly those amounts.  Workers also allocate while
 * the main thread stops and starts (not counted: the test only checks
 * that nothing breaks), and some exit and are replaced between sessions.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heapalloc.h"
#include "tests/lib/check.h"
#include "tests/lib/prof_util.h"

#define WORKERS 4
#define SESSIONS 12
#define KEEP 300

static pthread_barrier_t ready, go, done;
static volatile int busy_during_switch;
static int started, joined[WORKERS];   /* sessions started / seen by each worker */

static size_t size_of(int w, int s, int i)
{
	return 16 + (size_t)((w * 131 + s * 17 + i * 29) % 3000);
}

/* One worker's life from session `first`: traffic while the main thread
 * stops and starts the profiler, then KEEP blocks of known sizes allocated
 * (kept) and freed, each step between the main thread's barriers.  Worker
 * w leaves after the sessions s with s % 4 == w; the main thread starts a
 * new one in its place. */
static void *worker(void *arg)
{
	int w = (int)(intptr_t)arg & 0xff, first = (int)(intptr_t)arg >> 8;
	void *keep[KEEP];
	for (int s = first; s < SESSIONS; s++) {
		while (__atomic_load_n(&started, __ATOMIC_ACQUIRE) != s + 1)
			if (busy_during_switch)          /* traffic across the switch */
				free(malloc(64 + (size_t)w));
			else
				usleep(100);
		free(malloc(1 << 20));   /* a slow path: joins the session */
		__atomic_store_n(&joined[w], s + 1, __ATOMIC_RELEASE);
		pthread_barrier_wait(&ready);          /* quiet: main reads totals */
		pthread_barrier_wait(&go);
		for (int i = 0; i < KEEP; i++) {
			size_t n = size_of(w, s, i);
			keep[i] = malloc(n);
			if (!keep[i])
				abort();
			memset(keep[i], w, n);
		}
		pthread_barrier_wait(&done);           /* main reads the totals */
		pthread_barrier_wait(&go);
		for (int i = 0; i < KEEP; i++) {
			unsigned char *p = keep[i];
			if (p[0] != (unsigned char)w || p[size_of(w, s, i) - 1] != (unsigned char)w)
				abort();
			free(p);
		}
		pthread_barrier_wait(&done);
		if (s % 4 == w)
			return NULL;
	}
	return NULL;
}

static void run(const char *dir, const char *interval)
{
	char prefix[300];
	snprintf(prefix, sizeof prefix, "%s/r%s", dir, interval);
	pthread_barrier_init(&ready, NULL, WORKERS + 1);
	pthread_barrier_init(&go, NULL, WORKERS + 1);
	pthread_barrier_init(&done, NULL, WORKERS + 1);
	pthread_t t[WORKERS];
	busy_during_switch = 1;
	for (int w = 0; w < WORKERS; w++)
		REQUIRE(pthread_create(&t[w], NULL, worker, (void *)(intptr_t)w) == 0);
	for (int s = 0; s < SESSIONS; s++) {
		usleep(2000);
		REQUIRE(heapalloc_profile_start(prefix) == 0);
		__atomic_store_n(&started, s + 1, __ATOMIC_RELEASE);
		for (int w = 0; w < WORKERS; w++)
			while (__atomic_load_n(&joined[w], __ATOMIC_ACQUIRE) != s + 1)
				usleep(200);
		busy_during_switch = 0;
		pthread_barrier_wait(&ready);
		uint64_t want = 0;
		for (int w = 0; w < WORKERS; w++)
			for (int i = 0; i < KEEP; i++)
				want += size_of(w, s, i);
		heapalloc_stats a, b, c;
		heapalloc_get_stats(&a);
		pthread_barrier_wait(&go);
		pthread_barrier_wait(&done);
		heapalloc_get_stats(&b);
		pthread_barrier_wait(&go);
		pthread_barrier_wait(&done);
		heapalloc_get_stats(&c);
		if (b.prof_alloc_bytes - a.prof_alloc_bytes != want ||
		    c.prof_free_bytes - b.prof_free_bytes != want)
			fprintf(stderr, "interval %s, session %d: allocated +%llu, freed +%llu, "
				"want +%llu\n", interval, s,
				(unsigned long long)(b.prof_alloc_bytes - a.prof_alloc_bytes),
				(unsigned long long)(c.prof_free_bytes - b.prof_free_bytes),
				(unsigned long long)want);
		CHECK_EQ(b.prof_alloc_bytes - a.prof_alloc_bytes, want);
		CHECK_EQ(b.prof_free_bytes - a.prof_free_bytes, 0);
		CHECK_EQ(c.prof_free_bytes - b.prof_free_bytes, want);
		CHECK_EQ(c.prof_alloc_bytes - b.prof_alloc_bytes, 0);
		busy_during_switch = 1;                /* traffic across the stop */
		usleep(2000);
		heapalloc_profile_stop();
		for (int w = 0; w < WORKERS; w++)      /* replace those that left */
			if (s % 4 == w && s + 1 < SESSIONS) {
				REQUIRE(pthread_join(t[w], NULL) == 0);
				REQUIRE(pthread_create(&t[w], NULL, worker,
						       (void *)(intptr_t)(w | (s + 1) << 8)) == 0);
			}
	}
	busy_during_switch = 0;
	for (int w = 0; w < WORKERS; w++)
		REQUIRE(pthread_join(t[w], NULL) == 0);
	fprintf(stderr, "interval %s: %d sessions, %d workers, totals exact\n", interval,
		SESSIONS, WORKERS);
}

int main(int argc, char **argv)
{
	if (getenv("HEAPPROFILE"))
		SKIP("HEAPPROFILE is set");
	if (argc == 3) {                     /* one process: dir, interval */
		run(argv[1], argv[2]);
		return CHECK_DONE();
	}
	char dir[] = "/tmp/prof_restart.XXXXXX";
	REQUIRE(mkdtemp(dir));
	static const char *const intervals[] = { "4096", "524288" };
	for (int k = 0; k < 2; k++) {
		const char *env[] = { "HEAP_PROFILE_EXACT_TOTALS", "1",
				      "HEAP_PROFILE_ALLOCATION_INTERVAL", "1M",
				      "HEAP_PROFILE_INUSE_INTERVAL", "1M", NULL };
		CHECK(rerun_self(argv[0], dir, intervals[k], env));
	}
	CHECK(remove_dir(dir));
	return CHECK_DONE();
}
