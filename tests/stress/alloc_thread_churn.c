/* alloc_thread_churn — 20000 short-lived threads, 4 at a time, each
 * allocating and freeing a spread of sizes and handing a few blocks to the
 * main thread to free.  Whatever a thread caches must be returned when it
 * exits: resident memory after all of them stays within 32 MiB of what it
 * was after the first 1000, and (under heapalloc) the live thread-cache
 * count falls back. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"
#include "heapalloc.h"

enum { TOTAL = 20000, WARM = 1000, BATCH = 4, KEEP = 4, NB = 120 };

struct job {
	unsigned id;
	void *kept[KEEP];
	size_t kept_n[KEEP];
	int bad;
};

static void *body(void *arg)
{
	struct job *j = arg;
	void *v[NB];
	size_t n[NB];
	uint64_t r = 0x9E3779B97F4A7C15ull * (j->id + 1);
	for (int i = 0; i < NB; i++) {
		r ^= r << 13; r ^= r >> 7; r ^= r << 17;
		n[i] = i == 0 ? 40000 : 8 + r % (i < 100 ? 512 : 8192);
		if (i == NB - 1)
			n[i] = 200000;
		v[i] = malloc(n[i]);
		if (!v[i]) {
			j->bad = 1;
			return NULL;
		}
		pat_fill(v[i], n[i] < 256 ? n[i] : 256, j->id + i); /* churn, not bandwidth */
	}
	for (int i = 0; i < NB; i++) {
		if (pat_check(v[i], n[i] < 256 ? n[i] : 256, j->id + i) != (size_t)-1)
			j->bad = 1;
		if (i < KEEP) {
			j->kept[i] = v[i];
			j->kept_n[i] = n[i];
		} else
			free(v[i]);
	}
	return NULL;
}

int main(void)
{
	typedef void (*stats_fn)(heapalloc_stats *);
	stats_fn stats = (stats_fn)dlsym(RTLD_DEFAULT, "heapalloc_get_stats");
	long warm_rss = -1;
	int bad = 0;
	for (unsigned done = 0; done < TOTAL; done += BATCH) {
		pthread_t t[BATCH];
		struct job j[BATCH];
		memset(j, 0, sizeof j);
		for (int k = 0; k < BATCH; k++) {
			j[k].id = done + k;
			if (pthread_create(&t[k], NULL, body, &j[k]))
				HARD_ERROR("pthread_create");
		}
		for (int k = 0; k < BATCH; k++) {
			pthread_join(t[k], NULL);
			bad += j[k].bad;
			for (int i = 0; i < KEEP; i++) { /* cross-thread frees */
				if (j[k].kept[i] && pat_check(j[k].kept[i], j[k].kept_n[i] < 256 ? j[k].kept_n[i] : 256, j[k].id + i) != (size_t)-1)
					bad++;
				free(j[k].kept[i]);
			}
		}
		if (done + BATCH == WARM)
			warm_rss = rss_kib();
	}
	long end_rss = rss_kib();
	if (warm_rss < 0 || end_rss < 0)
		HARD_ERROR("cannot read VmRSS");
	fprintf(stderr, "VmRSS after %d threads: %ld KiB, after %d: %ld KiB\n", WARM, warm_rss,
		TOTAL, end_rss);
	CHECK_EQ(bad, 0);
	CHECK_LE(end_rss, warm_rss + 32 * 1024);
	if (stats) {
		heapalloc_stats s;
		stats(&s);
		fprintf(stderr, "heapalloc: %llu live thread caches, %llu bytes in them\n",
			(unsigned long long)s.thread_caches, (unsigned long long)s.thread_cache_bytes);
		CHECK_LE(s.thread_caches, 2); /* main (and perhaps one not yet reaped) */
	}
	return CHECK_DONE();
}
