/* alloc_fork_signal — fork() from a signal handler (async-signal-safe in
 * POSIX; crash handlers and watchdogs do it) must never hang, whatever the
 * interrupted thread was doing:
 *   fork     the main thread forks in a loop, so the handler's fork often
 *            lands between fork's prepare and parent handlers; both kinds of
 *            child allocate and check what they allocated before exiting;
 *   malloc   the main thread allocates and frees every size class, big
 *            blocks and huge ones, so the handler's fork lands inside the
 *            allocator's slow paths, holding its locks;
 *   threads  as malloc, with a second thread allocating too;
 *   prof     fork and malloc interleaved with profiling on, sampling every
 *            allocation and dumping often, so the handler lands in samples
 *            and dumps holding the profiler's locks; in the compatibility
 *            mode, whose threshold dumps the allocating thread writes: the
 *            default mode's helper thread, which writes them there, would
 *            make the process multi-threaded, and then glibc's fork holds a
 *            lock from prepare to parent (see profthreads);
 *   profthreads  the main thread forks while a second one samples every
 *            allocation; each child samples (unwinds) although the other
 *            thread may have been inside libunwind, which has locks of its
 *            own, at the fork.  No handler here: with two threads glibc's
 *            fork itself holds a lock from prepare to parent, so a handler's
 *            fork that interrupts a fork hangs in glibc, whatever malloc.
 * Each mode runs in a child watched from here: one that has not finished
 * within 30 s is killed and reported as hung. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

enum { HANDLER_CHILD = 42, LOOP_CHILD = 43, BAD_CHILD = 44 };

static volatile sig_atomic_t handler_forks, handler_bad;
static atomic_int stop;

/* What a child does before _exit: allocate a few sizes, check them. */
static int child_work(unsigned salt)
{
	static const size_t sizes[] = { 8, 100, 3000, 40000, 2 << 20 };
	for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
		void *p = malloc(sizes[i]);
		if (!p)
			return BAD_CHILD;
		pat_fill(p, sizes[i], salt + i);
		if (pat_check(p, sizes[i], salt + i) != (size_t)-1)
			return BAD_CHILD;
		free(p);
	}
	return 0;
}

static int child_allocates;  /* the handler's child may allocate (fork mode) */

static void on_alarm(int sig)
{
	(void)sig;
	int e = errno;
	pid_t pid = fork();
	if (pid == 0) {
		int rc = child_allocates ? child_work(7) : 0;
		_exit(rc ? rc : HANDLER_CHILD);
	}
	if (pid > 0) {
		int st;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != HANDLER_CHILD)
			handler_bad++;
		handler_forks++;
	} else {
		handler_bad++;
	}
	errno = e;
}

static void loop_fork(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		int rc = child_work(3);
		_exit(rc ? rc : LOOP_CHILD);
	}
	REQUIRE(pid > 0);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		REQUIRE(errno == EINTR);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == LOOP_CHILD);
}

/* One round of allocations across the small classes, big and huge blocks. */
static void loop_malloc(uint64_t *r)
{
	void *v[64];
	size_t n[64];
	for (int i = 0; i < 64; i++) {
		*r ^= *r << 13; *r ^= *r >> 7; *r ^= *r << 17;
		n[i] = i % 16 == 15 ? (i % 32 == 31 ? (1 << 20) + *r % (1 << 20) : 33000 + *r % 100000)
				    : 1 + *r % 4096;
		v[i] = malloc(n[i]);
		REQUIRE(v[i]);
		((unsigned char *)v[i])[0] = (unsigned char)i;
		((unsigned char *)v[i])[n[i] - 1] = (unsigned char)i;
	}
	for (int i = 0; i < 64; i++) {
		CHECK(((unsigned char *)v[i])[0] == (unsigned char)i);
		CHECK(((unsigned char *)v[i])[n[i] - 1] == (unsigned char)i);
		free(v[i]);
	}
}

static void *other_thread(void *arg)
{
	uint64_t r = 0x9e3779b97f4a7c15ull;
	(void)arg;
	while (!atomic_load(&stop))
		loop_malloc(&r);
	return NULL;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* The subject: runs one mode for about a second; exits 0 or 1. */
static int subject(const char *mode)
{
	int prof = !strncmp(mode, "prof", 4);
	int threads = !strcmp(mode, "threads") || !strcmp(mode, "profthreads");
	int do_fork = !strcmp(mode, "fork") || prof;
	int do_malloc = strcmp(mode, "fork") != 0;
	int handler = strcmp(mode, "profthreads") != 0;
	child_allocates = !do_malloc;
	pthread_t th;
	if (threads)
		REQUIRE(pthread_create(&th, NULL, other_thread, NULL) == 0);

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	REQUIRE(sigaction(SIGALRM, &sa, NULL) == 0);
	/* a one-shot timer armed at a random point of each round, so the
	 * handler lands anywhere in it and the loop always makes progress */
	uint64_t r = 88172645463325252ull;
	double t0 = now();
	for (int i = 0; i < 20; i++) {
		if (do_fork)
			loop_fork();
		if (do_malloc)
			loop_malloc(&r);
	}
	long round_us = (long)((now() - t0) / 20 * 1e6) + 1;
	unsigned rounds = 0;
	double end = now() + 1.0;
	while (now() < end || (handler && handler_forks < 50)) {
		r ^= r << 13; r ^= r >> 7; r ^= r << 17;
		struct itimerval it = { { 0, 0 }, { 0, 1 + (long)(r % (uint64_t)(round_us + round_us / 4)) } };
		if (handler)
			REQUIRE(setitimer(ITIMER_REAL, &it, NULL) == 0);
		if (do_fork)
			loop_fork();
		if (do_malloc)
			loop_malloc(&r);
		rounds++;
	}
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	if (threads) {
		atomic_store(&stop, 1);
		pthread_join(th, NULL);
	}
	CHECK_EQ(handler_bad, 0);
	if (handler)
		CHECK_GE(handler_forks, 50);
	fprintf(stderr, "%s: %u rounds, %d forks from the handler\n", mode, rounds,
		(int)handler_forks);
	return CHECK_DONE();
}

/* Runs `self mode` in a child (with extra environment for prof); fails on a
 * hang (30 s) or a non-zero exit. */
static void watch(const char *self, const char *mode)
{
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		setpgid(0, 0);
		if (!strncmp(mode, "prof", 4)) {
			char prefix[64];
			snprintf(prefix, sizeof prefix, "/tmp/ha_forksig_%d", (int)getpid());
			setenv("HEAPPROFILE", prefix, 1);
			setenv("HEAP_PROFILE_SAMPLE_INTERVAL", "1", 1);
			setenv("HEAP_PROFILE_ALLOCATION_INTERVAL", "20000000", 1);
			if (!strcmp(mode, "prof"))
				setenv("HEAP_PROFILE_EXACT_TOTALS", "1", 1);
		}
		execl(self, self, mode, (char *)NULL);
		_exit(EXIT_HARD);
	}
	double end = now() + 30;
	int st = 0;
	pid_t got;
	while ((got = waitpid(pid, &st, WNOHANG)) == 0 && now() < end)
		usleep(10000);
	if (got == 0) {
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		fprintf(stderr, "FAIL: mode %s hung (killed after 30 s)\n", mode);
		CHECK(!"fork from a signal handler hung");
		return;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fprintf(stderr, "FAIL: mode %s: status %#x\n", mode, st);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		return subject(argv[1]);
	alarm(0);  /* the watchdog below replaces check.h's alarm */
	static const char *modes[] = { "fork", "malloc", "threads", "prof", "profthreads" };
	for (unsigned i = 0; i < sizeof modes / sizeof *modes; i++)
		watch("/proc/self/exe", modes[i]);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -f /tmp/ha_forksig_*");
	if (system(cmd) != 0)
		fprintf(stderr, "note: could not remove /tmp/ha_forksig_* files\n");
	return CHECK_DONE();
}
