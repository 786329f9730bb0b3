/* prof_usdt.c — the program tests/integration/prof_usdt.sh runs with libheapalloc
 * preloaded while bpftrace holds the otel_memory probes, no variable set.
 * Built without heapalloc: it reads the statistics through dlsym, so it runs
 * against whichever copy of the library is preloaded.
 *
 *   prof_usdt DIR [session]
 * 1. main thread: 1 MiB blocks until sampling for the probe is on (must be
 *    within 17 MiB: the off-profiling poll comes every 16 MiB);
 * 2. a thread named ha_usdt_meas allocates MEAS_BYTES in sizes that are
 *    exactly what the countdown charges (size classes, big blocks) and frees
 *    every block; prints the bytes, the standard deviation of the weights'
 *    sum and the allocations the library sampled meanwhile;
 * 3. writes DIR/measured, waits for DIR/detached (bpftrace is gone), then
 *    allocates until sampling is off (within 17 MiB) and 256 MiB more, and
 *    checks that no allocation was sampled since.
 * With `session` (HEAPPROFILE set) only step 2, and the samples printed are
 * the ones the session recorded.
 * Exit 0 pass, 1 fail, 99 hard error.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "heapalloc.h"

#define MIB ((size_t)1 << 20)
#define MEAS_BYTES ((uint64_t)768 << 20)
#define R 2097152.0       /* the default HEAP_PROFILE_SAMPLE_INTERVAL */

static void (*get_stats)(heapalloc_stats *, size_t);

static heapalloc_stats stats(void)
{
	heapalloc_stats s;
	get_stats(&s, sizeof s);
	return s;
}

/* sizes the countdown charges exactly: small size classes and big blocks */
static const size_t sizes[] = { 16, 48, 96, 160, 256, 640, 1024, 2560, 4096,
				12288, 32768, 40000, 100000, 1 << 20, 3000000 };
#define NSIZES (sizeof sizes / sizeof sizes[0])

static uint64_t total;
static double var;

static void *measure(void *arg)
{
	pthread_setname_np(pthread_self(), "ha_usdt_meas");
	uint64_t x = 0x2545f4914f6cdd1dull;
	enum { BATCH = 4096 };
	static void *keep[BATCH];
	size_t k = 0;
	while (total < MEAS_BYTES) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		/* small sizes most often, as programs do */
		size_t n = sizes[(x >> 8) % 64 < 56 ? (x >> 16) % 11 : 11 + (x >> 16) % 4];
		char *p = malloc(n);
		if (!p) {
			fprintf(stderr, "HARD ERROR: malloc(%zu) failed\n", n);
			exit(99);
		}
		p[0] = 1;
		p[n - 1] = 2;
		keep[k++] = p;
		total += n;
		double q = 1 - exp(-(double)n / R);    /* P(sampled) */
		var += (double)n * n * (1 - q) / q;     /* Var of n/q * Bernoulli(q) */
		if (k == BATCH) {
			while (k)
				free(keep[--k]);
		}
	}
	while (k)
		free(keep[--k]);
	return arg;
}

static void wait_file(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	struct stat st;
	for (int i = 0; i < 18000 && stat(path, &st) != 0; i++)
		usleep(10000);
	if (stat(path, &st) != 0) {
		fprintf(stderr, "HARD ERROR: %s never appeared\n", path);
		exit(99);
	}
}

int main(int argc, char **argv)
{
	int session = argc == 3 && strcmp(argv[2], "session") == 0;
	if (argc != 2 && !session) {
		fprintf(stderr, "usage: prof_usdt DIR [session]\n");
		return 99;
	}
	get_stats = (void (*)(heapalloc_stats *, size_t))dlsym(RTLD_DEFAULT,
							       "heapalloc_get_stats_size");
	if (!get_stats) {
		fprintf(stderr, "HARD ERROR: heapalloc is not preloaded\n");
		return 99;
	}
	setvbuf(stdout, NULL, _IONBF, 0);

	if (session) {
		/* HEAPPROFILE is set: its session samples, the probes report
		 * exactly what it records */
		int (*running)(void) = (int (*)(void))dlsym(RTLD_DEFAULT,
							   "heapalloc_profile_running");
		if (!running || !running()) {
			printf("FAIL: HEAPPROFILE is set but no session runs\n");
			return 1;
		}
		uint64_t base = stats().prof_samples;
		pthread_t t;
		if (pthread_create(&t, NULL, measure, NULL) != 0) {
			fprintf(stderr, "HARD ERROR: pthread_create\n");
			return 99;
		}
		pthread_join(t, NULL);
		heapalloc_stats st = stats();
		printf("measured %llu bytes, sd %.0f\n", (unsigned long long)total, sqrt(var));
		printf("probe samples %llu\n", (unsigned long long)(st.prof_samples - base));
		/* (allocations before the session's constructor may have been
		 * sampled for the probe alone: it was attached) */
		if (st.prof_probe_sampling) {
			printf("FAIL: probe-only sampling runs beside the session\n");
			return 1;
		}
		return 0;
	}

	/* 1. the probe was attached before we started: sampling comes on at
	 * the main thread's first poll */
	size_t mib = 0;
	while (!stats().prof_probe_sampling && mib < 64) {
		free(malloc(MIB));
		mib++;
	}
	printf("sampling on after %zu MiB\n", mib);
	if (!stats().prof_probe_sampling || mib > 17) {
		printf("FAIL: sampling for the attached probe did not start within 17 MiB\n");
		return 1;
	}

	/* 2. the measured allocations, in a thread the bpftrace script tells
	 * by its name (a new thread starts with the switch already taken) */
	uint64_t base = stats().prof_probe_samples;
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	if (pthread_create(&t, &a, measure, NULL) != 0) {
		fprintf(stderr, "HARD ERROR: pthread_create\n");
		return 99;
	}
	pthread_join(t, NULL);
	printf("measured %llu bytes, sd %.0f\n", (unsigned long long)total, sqrt(var));
	/* the main thread waited in join: these are the thread's samples */
	printf("probe samples %llu\n",
	       (unsigned long long)(stats().prof_probe_samples - base));

	/* 3. detach: sampling stops within 16 MiB and no allocation is
	 * sampled afterwards */
	char path[4096];
	snprintf(path, sizeof path, "%s/measured", argv[1]);
	FILE *f = fopen(path, "w");
	if (!f || fclose(f) != 0) {
		fprintf(stderr, "HARD ERROR: cannot write %s\n", path);
		return 99;
	}
	wait_file(argv[1], "detached");
	mib = 0;
	while (stats().prof_probe_sampling && mib < 64) {
		free(malloc(MIB));
		mib++;
	}
	printf("sampling off after %zu MiB\n", mib);
	if (stats().prof_probe_sampling || mib > 17) {
		printf("FAIL: sampling went on more than 17 MiB after the probe was detached\n");
		return 1;
	}
	uint64_t before = stats().prof_probe_samples;
	for (int i = 0; i < 256; i++)
		free(malloc(MIB));
	for (int i = 0; i < 65536; i++)
		free(malloc(4096));
	uint64_t after = stats().prof_probe_samples;
	if (after != before) {
		printf("FAIL: %llu allocations sampled after the probe was detached\n",
		       (unsigned long long)(after - before));
		return 1;
	}
	printf("ok: no sample in 512 MiB after the probe was detached\n");
	return 0;
}
