/* rel_thread_masks — the threads heapalloc starts (the purge thread of
 * HEAPALLOC_PURGE_THREAD=1, the profiler's helper under HEAPPROFILE) block
 * every signal (the purge thread from birth, the helper as its first act),
 * so a signal sent to the process runs the program's handler on the program's own thread, and the program's own
 * signal mask is never changed: main's mask reads empty before and after
 * both threads start.  The program re-runs itself, in a child, with both
 * set. */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include "tests/lib/rel_util.h"

/* A task's SigBlk, from /proc/self/task/TID/status; -1 if unreadable. */
static long long sigblk(long tid)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
	FILE *f = fopen(path, "r");
	long long m = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "SigBlk:", 7))
			m = (long long)strtoull(line + 7, NULL, 16);
	fclose(f);
	return m;
}

/* The tasks other than main, up to max; their count. */
static int others(long main_tid, long *tids, int max)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	struct dirent *e;
	if (!d)
		HARD_ERROR("opendir /proc/self/task");
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && atol(e->d_name) != main_tid && n < max)
			tids[n++] = atol(e->d_name);
	closedir(d);
	return n;
}

static volatile long handled_on, handled;

static void on_usr1(int sig)
{
	(void)sig;
	handled_on = syscall(SYS_gettid);
	handled++;
}

int main(int argc, char **argv)
{
	(void)argc;
	if (!getenv("REL_CHILD")) {
		char dir[4096], prof[4200];
		rel_mkdtemp(dir, sizeof dir, "masks");
		snprintf(prof, sizeof prof, "HEAPPROFILE=%s/p", dir);
		pid_t pid = fork();
		if (pid == 0)
			rel_reexec(argv, "HEAPALLOC_PURGE_THREAD=1", prof, (char *)NULL);
		int st;
		if (pid < 0 || waitpid(pid, &st, 0) != pid)
			HARD_ERROR("fork or waitpid");
		rel_rmtree(dir);
		return WIFEXITED(st) ? WEXITSTATUS(st) : EXIT_HARD;
	}
	long me = syscall(SYS_gettid);
	CHECK_EQ(sigblk(me), 0);
	/* the purge thread starts once a cache holds more than its floor */
	for (int round = 0; round < 4; round++) {
		void *v[256];
		for (int i = 0; i < 256; i++)
			memset(v[i] = malloc(64 << 10), 1, 64 << 10);
		for (int i = 0; i < 256; i++)
			free(v[i]);
	}
	long tids[16];
	int n = 0;
	for (int tries = 0; tries < 500 && (n = others(me, tids, 16)) < 2; tries++) {
		struct timespec ms10 = { 0, 10000000 };
		nanosleep(&ms10, NULL);
	}
	fprintf(stderr, "%d thread(s) besides main\n", n);
	CHECK_GE(n, 2);
	/* all but what the kernel never blocks (SIGKILL, SIGSTOP); under
	 * qemu-user /proc shows the host's masks, where the emulator keeps
	 * the synchronous signals for itself, and its own thread besides */
	long long want = 0x7fffffffull & ~((1ll << (SIGKILL - 1)) | (1ll << (SIGSTOP - 1)));
	for (int i = 0; i < n && !ck_emulated(); i++) {
		long long m = sigblk(tids[i]);
		fprintf(stderr, "task %ld: SigBlk %llx\n", tids[i], m);
		CHECK_EQ(m & 0x7fffffffll, want);
	}
	if (ck_emulated())
		fprintf(stderr, "%s: the host's masks are the emulator's; only delivery is "
			"checked\n", ck_emulated());
	CHECK_EQ(sigblk(me), 0);
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigaction(SIGUSR1, &sa, NULL);
	for (int i = 0; i < 100; i++) {
		handled_on = 0;
		kill(getpid(), SIGUSR1);
		for (int t = 0; t < 1000 && !handled_on; t++) {
			struct timespec us = { 0, 100000 };
			nanosleep(&us, NULL);
		}
		CHECK_EQ(handled_on, me);
	}
	CHECK_EQ(handled, 100);
	return CHECK_DONE();
}
