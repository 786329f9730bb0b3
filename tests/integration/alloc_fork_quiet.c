/* alloc_fork_quiet — heapalloc starts no thread of its own, so a
 * single-threaded program stays one: glibc's fork takes its atfork lock
 * only in a multi-threaded process, and a fork from a signal handler that
 * interrupted fork (glibc's tst-mallocfork2) waits on that lock forever if
 * the allocator made the process threaded behind the program's back.
 * Each run is a child that frees 64 MiB (size classes, large and huge
 * blocks: every cache passes its resident floor, where the purge thread
 * used to start), checks `Threads: 1` in /proc/self/status, then forks
 * FORKS times, allocating between forks, while a sender process makes its
 * SIGUSR1 handler fork too (a signal 200 us after the last was handled);
 * both kinds of child
 * exit at once.  It checks
 * `Threads: 1` again at the end.  RUNS runs; one that has not finished
 * within 30 s is killed and reported as hung.  Under qemu-user the count
 * holds the emulator's thread too: the child's own count before the free
 * is the one that must hold. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

#ifndef RUNS
#define RUNS 200
#endif
enum { FORKS = 20, MIB = 1 << 20, HUNG = 30, NOT_ONE = 40, BAD = 41 };

static volatile sig_atomic_t handler_forks;
static int ack[2];   /* handler -> sender: one byte a handled signal */

static void on_usr1(int sig)
{
	(void)sig;
	int e = errno;
	pid_t p = fork();
	if (p == 0)
		_exit(0);
	if (p > 0)
		handler_forks++;
	(void)!write(ack[1], "x", 1);   /* the sender may send the next one */
	errno = e;
}

/* 64 MiB in blocks of three tiers, every page written, freed. */
static int free_64mib(void)
{
	static const size_t sizes[] = { 2000, 20000, 100000, 2 * MIB };
	for (unsigned k = 0; k < sizeof sizes / sizeof *sizes; k++) {
		size_t n = 16 * (size_t)MIB / sizes[k];
		char **v = malloc(n * sizeof *v);
		if (!v)
			return BAD;
		for (size_t i = 0; i < n; i++) {
			v[i] = malloc(sizes[k]);
			if (!v[i])
				return BAD;
			for (size_t off = 0; off < sizes[k]; off += 4096)
				v[i][off] = (char)i;
		}
		for (size_t i = 0; i < n; i++)
			free(v[i]);
		free(v);
	}
	return 0;
}

/* The threads the process has of its own: 1, or under qemu-user the
 * emulator's too (it runs one beside the program's, invisible to the
 * program's libc, which decides fork's locking by its own threads). */
static long own_threads = 1;

static int worker(void)
{
	if (ck_emulated())
		own_threads = threads_now();
	int rc = free_64mib();
	if (rc)
		return rc;
	if (threads_now() != own_threads)
		return NOT_ONE;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	if (pipe(ack) != 0)
		return BAD;
	signal(SIGPIPE, SIG_IGN);   /* a handler that runs after the sender is gone */
	pid_t me = getpid(), sender = fork();
	if (sender < 0)
		return BAD;
	if (sender == 0) {
		/* the next signal only once the last was handled, then 200 us
		 * later: a fork slower than the interval (a loaded machine) must
		 * not starve the program of all progress, as it would under any
		 * allocator */
		struct timespec t = { 0, 200 * 1000 };
		char c;
		close(ack[1]);
		for (;;) {
			if (kill(me, SIGUSR1) != 0 || read(ack[0], &c, 1) != 1)
				_exit(0);
			nanosleep(&t, NULL);
		}
	}
	close(ack[0]);
	for (int i = 0; i < FORKS; i++) {
		void *p = malloc(100 + 1000 * (size_t)i);
		if (!p)
			return BAD;
		pid_t c = fork();
		if (c == 0)
			_exit(0);
		free(p);
		if (c < 0 && errno != EAGAIN)
			return BAD;
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
	/* the handler must have forked at least once (up to 1 s more) */
	for (int ms = 0; ms < 1000 && !handler_forks; ms++) {
		struct timespec t = { 0, 1000 * 1000 };
		nanosleep(&t, NULL);
	}
	kill(sender, SIGKILL);
	if (!handler_forks)
		return BAD;
	signal(SIGUSR1, SIG_IGN);
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
	return threads_now() == own_threads ? 0 : NOT_ONE;
}

int main(void)
{
	int hung = 0, not_one = 0, bad = 0;
	alarm(60 + RUNS * 10);   /* each run also has HUNG s of its own */
	for (int run = 0; run < RUNS; run++) {
		pid_t w = fork();
		REQUIRE(w >= 0);
		if (w == 0)
			_exit(worker());
		int st = 0;
		pid_t got = 0;
		for (int ms = 0; ms < HUNG * 1000 && (got = waitpid(w, &st, WNOHANG)) == 0; ms += 10) {
			struct timespec t = { 0, 10 * 1000 * 1000 };
			nanosleep(&t, NULL);
		}
		if (got == 0) {
			kill(w, SIGKILL);
			waitpid(w, &st, 0);
			hung++;
			continue;
		}
		REQUIRE(got == w);
		if (!WIFEXITED(st) || WEXITSTATUS(st) == BAD)
			bad++;
		else if (WEXITSTATUS(st) == NOT_ONE)
			not_one++;
		else if (WEXITSTATUS(st) != 0)
			bad++;
	}
	fprintf(stderr, "%d runs of a 64 MiB free and %d forks beside a forking SIGUSR1 handler: "
		"%d hung, %d not single-threaded, %d failed\n", RUNS, FORKS, hung, not_one, bad);
	CHECK_EQ(hung, 0);
	CHECK_EQ(not_one, 0);
	CHECK_EQ(bad, 0);
	return CHECK_DONE();
}
