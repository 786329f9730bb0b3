/* tests/integration/remote_startstop.c — a program whose profiling stops and starts
 * while `heapalloc dump PID` reads it from outside (tests/integration/remote_startstop.sh).
 * Run with libheapalloc preloaded; built as a user builds a program (the
 * API found with dlsym, not linked).
 *
 *   remote_startstop READY PREFIX
 * Two threads churn allocations (sizes up to 100 KB, 256 kept each) while
 * the main thread, in a loop, starts a session with files under PREFIX
 * (heapalloc_profile_start), lets the churn run for 0-3 ms, and stops it
 * (heapalloc_profile_stop: the table is freed, and the always-on sampling
 * starts again unless HEAP_PROFILE_SAMPLE_INTERVAL=0), every 16th time
 * staying stopped for 300 ms (longer than a reader waits for a start),
 * touching READY once the loop runs; on stdin's end it prints "cycles N" (N > 0) and exits 0.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile int done;

static void *churn(void *arg)
{
	void *slot[256] = { 0 };
	uint64_t x = (uint64_t)(intptr_t)arg + 1;
	while (!done) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		unsigned i = (unsigned)(x >> 56);
		free(slot[i]);
		slot[i] = malloc(16 + (size_t)((x >> 20) % 100000));
		if (slot[i])
			memset(slot[i], (int)i, 8);
	}
	for (int i = 0; i < 256; i++)
		free(slot[i]);
	return NULL;
}

static void *watch_stdin(void *arg)
{
	(void)arg;
	char c;
	while (read(0, &c, 1) > 0)
		;
	done = 1;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	int (*start)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "heapalloc_profile_start");
	void (*stop)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "heapalloc_profile_stop");
	if (!start || !stop) {
		fprintf(stderr, "remote_startstop: libheapalloc is not preloaded\n");
		return 2;
	}
	pthread_t t[3];
	for (intptr_t k = 0; k < 2; k++)
		if (pthread_create(&t[k], NULL, churn, (void *)k))
			return 2;
	if (pthread_create(&t[2], NULL, watch_stdin, NULL))
		return 2;
	unsigned long cycles = 0;
	uint64_t x = 88172645463325252ull;
	while (!done) {
		int err = start(argv[2]);
		if (err) {
			fprintf(stderr, "remote_startstop: heapalloc_profile_start: %s\n", strerror(err));
			return 1;
		}
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		struct timespec d = { 0, (long)(x % 3000000) };
		nanosleep(&d, NULL);
		stop();
		if (cycles % 16 == 15)
			d.tv_nsec = 300 * 1000000;
		nanosleep(&d, NULL);
		if (++cycles == 1) {
			int fd = open(argv[1], O_WRONLY | O_CREAT, 0644);
			if (fd < 0 || close(fd))
				return 1;
		}
	}
	for (int k = 0; k < 3; k++)
		pthread_join(t[k], NULL);
	printf("cycles %s\n", cycles > 0 ? "N" : "0");
	return 0;
}
