/* alloc_exit_race — a process may exit while other threads are still inside
 * malloc and free: 100 times, a child starts 4 threads allocating and freeing
 * in a tight loop (small, large and aligned blocks, and C-library calls that
 * allocate), lets them run a few milliseconds, and calls exit(0) — running
 * atexit handlers and library destructors under their feet — or returns
 * from a thread-heavy main.  Every child must exit 0, not crash or hang
 * (each has 10 s, by its own alarm and the parent's for that round: the
 * rounds' total is the machine's, tens of seconds under qemu-user). */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "tests/lib/check.h"

enum { ROUNDS = 100, NT = 4 };

static void *spin(void *arg)
{
	uint64_t r = 0x9E3779B97F4A7C15ull * ((uintptr_t)arg + 1);
	void *keep[64] = { 0 };
	for (;;) {
		r ^= r << 13; r ^= r >> 7; r ^= r << 17;
		unsigned i = r % 64;
		free(keep[i]);
		size_t n = (r >> 8) % 16 == 0 ? 40000 + (r >> 20) % (2 << 20) : 1 + (r >> 20) % 1024;
		keep[i] = (r >> 40) % 8 == 0 ? aligned_alloc(256, (n + 255) & ~(size_t)255) : malloc(n);
		if (keep[i])
			((char *)keep[i])[0] = 1;
		if ((r >> 50) % 64 == 0) {
			char *s = NULL;
			if (asprintf(&s, "%lu", (unsigned long)r) > 0)
				free(s);
		}
	}
	return NULL;
}

static void atexit_alloc(void)
{
	free(malloc(1000)); /* allocate during exit too */
}

static int child(unsigned k)
{
	alarm(10);
	atexit(atexit_alloc);
	pthread_t t[NT];
	for (long i = 0; i < NT; i++)
		if (pthread_create(&t[i], NULL, spin, (void *)(i + k * NT)))
			return 3;
	struct timespec ts = { 0, (long)(1 + k % 5) * 1000000 };
	nanosleep(&ts, NULL);
	if (k % 2)
		exit(0);
	return 0; /* from main */
}

int main(void)
{
	int failures = 0;
	for (unsigned k = 0; k < ROUNDS; k++) {
		alarm(30);     /* the child's 10 s, its fork and its reaping */
		fflush(NULL);
		pid_t pid = fork();
		if (pid < 0)
			HARD_ERROR("fork");
		if (pid == 0)
			return child(k);
		int st;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (WIFSIGNALED(st)) {
			fprintf(stderr, "round %u: child killed by signal %d%s\n", k, WTERMSIG(st),
				WTERMSIG(st) == SIGALRM ? " (hung at exit)" : "");
			failures++;
		} else if (WEXITSTATUS(st)) {
			fprintf(stderr, "round %u: child exited %d\n", k, WEXITSTATUS(st));
			failures++;
		}
	}
	CHECK_EQ(failures, 0);
	return CHECK_DONE();
}
