/* tools/leakscan.c — heapalloc-leakscan: which sampled live blocks of a
 * running process nothing points to (`heapalloc leaks PID`'s scan).
 *
 *     heapalloc-leakscan PID [--stop] < BLOCKS
 *
 * BLOCKS: one "ADDR SIZE" per line (hex address, decimal bytes), the
 * process's sampled live blocks as `heapalloc leaks` read them from its
 * live-sample map, and "skip LO HI" lines (hex): ranges never read, the
 * allocator's own records as its root lists them.  Prints "leak N" for each block (N: its line, from 0)
 * that no pointer reaches, then one line
 *     "scan BYTES NS MODE THREADS REGS"
 * (bytes read, the scan's time, running|stopped, threads stopped, register
 * values used as roots).  Exit 0; 1 after one stderr line.
 *
 * Owns the command line, the block list and stopping the process; the
 * mark itself (what counts as a pointer, where it is looked for) is
 * prof/output/leakscan.c's, which the at-exit check runs too.  Without --stop the
 * process runs on and a block held only in a register is reported; with
 * it, every thread is held (PTRACE_SEIZE + PTRACE_INTERRUPT) for the scan,
 * its registers count as roots and its stack is read from its stack
 * pointer up, and it is let go, the process's output unchanged.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "prof/leakscan.h"

static const char *prog = "heapalloc-leakscan";

static void die(const char *what)
{
	fprintf(stderr, "%s: %s\n", prog, what);
	exit(1);
}

/* ---- stopping the threads (--stop) ------------------------------------- */

#define MAX_THREADS HA_LEAK_THREADS
static pid_t tids[MAX_THREADS];
static uint64_t sps[MAX_THREADS];
static int ntids;
static uint64_t *regs;            /* every stopped thread's registers */
static size_t nregs;

static int stopped(pid_t t)
{
	for (int i = 0; i < ntids; i++)
		if (tids[i] == t)
			return 1;
	return 0;
}

/* Seize and interrupt every thread (again while new ones appear); their
 * registers become roots, their stack pointers bound the stacks' scan. */
static void stop_all(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	regs = malloc(MAX_THREADS * sizeof(struct user_regs_struct));
	if (!regs)
		die("out of memory");
	for (int round = 0, added = 1; added && round < 10; round++) {
		added = 0;
		DIR *d = opendir(path);
		if (!d)
			die("cannot list the process's threads");
		struct dirent *e;
		while ((e = readdir(d)) && ntids < MAX_THREADS) {
			pid_t t = (pid_t)atoi(e->d_name);
			if (t <= 0 || stopped(t))
				continue;
			if (ptrace(PTRACE_SEIZE, t, NULL, NULL) != 0)
				continue;      /* exited meanwhile */
			if (ptrace(PTRACE_INTERRUPT, t, NULL, NULL) != 0) {
				ptrace(PTRACE_DETACH, t, NULL, NULL);
				continue;
			}
			int st;
			if (waitpid(t, &st, __WALL) != t) {
				ptrace(PTRACE_DETACH, t, NULL, NULL);
				continue;
			}
			tids[ntids] = t;
			/* the general registers by regset: the same call on
			 * x86-64 and aarch64 (PTRACE_GETREGS is x86's) */
			struct user_regs_struct r;
			struct iovec io = { &r, sizeof r };
			if (ptrace(PTRACE_GETREGSET, t, (void *)(uintptr_t)NT_PRSTATUS, &io) == 0) {
				memcpy(regs + nregs, &r, io.iov_len);
				nregs += io.iov_len / 8;
#if defined(__x86_64__)
				sps[ntids] = r.rsp;
#elif defined(__aarch64__)
				sps[ntids] = r.sp;
#endif
			}
			ntids++;
			added = 1;
		}
		closedir(d);
	}
}

/* Room for one more of an array of *n of size bytes, doubling *cap. */
static void *room(void *v, size_t n, size_t *cap, size_t size)
{
	if (n < *cap)
		return v;
	v = realloc(v, (*cap *= 2) * size);
	if (!v)
		die("out of memory");
	return v;
}

static void let_go(void)
{
	for (int i = 0; i < ntids; i++)
		ptrace(PTRACE_DETACH, tids[i], NULL, NULL);
}

int main(int argc, char **argv)
{
	int stop = 0;
	pid_t pid = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--stop"))
			stop = 1;
		else if (!pid && atoi(argv[i]) > 0)
			pid = (pid_t)atoi(argv[i]);
		else
			die("usage: heapalloc-leakscan PID [--stop] < BLOCKS");
	}
	if (!pid)
		die("usage: heapalloc-leakscan PID [--stop] < BLOCKS");
	size_t cap = 1024, n = 0;
	ha_leak_block *b = malloc(cap * sizeof *b);
	char line[256];
	size_t scap = 64, nskips = 0;
	ha_leak_range *skips = malloc(scap * sizeof *skips);
	while (b && skips && fgets(line, sizeof line, stdin)) {
		uint64_t a, len;
		if (!strncmp(line, "skip ", 5)) {
			uint64_t lo, hi;
			if (sscanf(line + 5, "%" SCNx64 " %" SCNx64, &lo, &hi) != 2 || hi < lo)
				die("a skip line is not \"skip LO HI\"");
			skips = room(skips, nskips, &scap, sizeof *skips);
			skips[nskips++] = (ha_leak_range){ lo, hi };
			continue;
		}
		if (sscanf(line, "%" SCNx64 " %" SCNu64, &a, &len) != 2 || !len || a + len < a)
			die("a block line is not \"ADDR SIZE\"");
		b = room(b, n, &cap, sizeof *b);
		b[n] = (ha_leak_block){ a, a + len, (uint32_t)n, 0 };
		n++;
	}
	ha_leak_scan s = { b, n, malloc((n + 1) * sizeof(uint32_t)), malloc(HA_LEAK_CHUNK + 8),
			   NULL, 0, NULL, 0, 0, skips, nskips, 0 };
	if (!b || !skips || !s.work || !s.chunk)
		die("out of memory");
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
	int memfd = open(path, O_RDONLY | O_CLOEXEC);
	if (memfd < 0) {
		char msg[160];
		snprintf(msg, sizeof msg, "cannot read the memory of process %d: %s", (int)pid,
			 strerror(errno));
		die(msg);
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (stop && n) {
		stop_all(pid);
		s.roots = regs;
		s.nroots = nregs;
		s.sps = sps;
		s.nsps = ntids;
	} else {
		s.blocked = 1;        /* running: the SPs of threads blocked in a system call */
	}
	int err = ha_leak_run(&s, pid, memfd);
	if (stop)
		let_go();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (err) {
		errno = err;
		die("cannot read the process's maps");
	}
	for (size_t i = 0; i < n; i++)
		if (!b[i].marked)
			printf("leak %u\n", b[i].line);
	printf("scan %" PRIu64 " %" PRId64 " %s %d %zu\n", s.bytes,
	       (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec),
	       stop ? "stopped" : "running", stop ? ntids : 0, nregs);
	return fflush(stdout) == 0 ? 0 : 1;
}
