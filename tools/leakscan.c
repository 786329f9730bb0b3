/* tools/leakscan.c — heapalloc-leakscan: which sampled live blocks of a
 * running process nothing points to (`heapalloc leaks PID`'s scan).
 *
 *     heapalloc-leakscan PID [--stop] < BLOCKS
 *
 * BLOCKS: one "ADDR SIZE" per line (hex address, decimal bytes), the
 * process's sampled live blocks as `heapalloc leaks` read them from its
 * live-sample map.  Prints "leak N" for each block (N: its line, from 0)
 * that no pointer reaches, then one line
 *     "scan BYTES NS MODE THREADS REGS"
 * (bytes read, the scan's time, running|stopped, threads stopped, register
 * values used as roots).  Exit 0; 1 after one stderr line.
 *
 * Owns the conservative mark: every readable and writable mapping of the
 * process (data and bss of every mapped object, heaps, thread stacks; with
 * --stop only the live part of each thread's stack, and every thread's
 * registers) is read through /proc/PID/mem as a debugger reads it, and
 * every 8 bytes at every byte offset (packed structs keep pointers
 * unaligned) that fall inside a block mark it: interior pointers count.
 * A thread's stack is read from its stack pointer up when that is known
 * (stopped, or blocked in a system call: /proc/PID/task/TID/syscall).
 * What is read inside a block counts only once that block is marked
 * (then its contents are scanned in turn), so a leaked cycle stays leaked.
 * Unsampled heap memory counts as reachable (its blocks are not known
 * from outside): a leak pointed to only by freed or leaked unsampled
 * memory is missed, never a reachable block reported.  Without --stop the
 * process runs on: a block held only in a register is reported; with it,
 * every thread is held (PTRACE_SEIZE + PTRACE_INTERRUPT) for the scan and
 * let go, the process's output unchanged.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
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

typedef struct block {
	uint64_t lo, hi;          /* [lo, hi) */
	uint32_t line;            /* its line on stdin */
	uint8_t marked, scanned;
} block;

static block *blocks;
static size_t nblocks;
static uint64_t gmin, gmax;   /* every block lies in [gmin, gmax) */
static uint32_t *work;        /* marked blocks not yet scanned */
static size_t nwork;
static int memfd = -1;
static uint64_t bytes_read;
static const char *prog = "heapalloc-leakscan";

static void die(const char *what)
{
	fprintf(stderr, "%s: %s\n", prog, what);
	exit(1);
}

static int by_lo(const void *a, const void *b)
{
	const block *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The block holding address v, or NULL. */
static block *find(uint64_t v)
{
	if (v < gmin || v >= gmax)
		return NULL;
	size_t lo = 0, hi = nblocks;
	while (lo < hi) {             /* the last block with lo <= v */
		size_t mid = lo + (hi - lo) / 2;
		if (blocks[mid].lo <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	block *b = &blocks[lo - 1];
	return v < b->hi ? b : NULL;
}

static void mark(block *b)
{
	if (b->marked)
		return;
	b->marked = 1;
	work[nwork++] = (uint32_t)(b - blocks);
}

/* Scan buf (the process's [at, at + n), plus up to 7 bytes after it for
 * the last offsets) for values inside a block; self: the block these
 * bytes belong to (its own pointers into itself do not count).  skip:
 * bytes inside any unmarked block are not roots. */
static void scan(const unsigned char *buf, size_t n, size_t avail, uint64_t at, const block *self,
		 int skip)
{
	/* the next block at or after `at`, for skip */
	size_t bi = 0;
	if (skip) {
		size_t lo = 0, hi = nblocks;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (blocks[mid].hi <= at)
				lo = mid + 1;
			else
				hi = mid;
		}
		bi = lo;
	}
	size_t end = avail >= 8 ? avail - 7 : 0;
	if (end > n)
		end = n;
	for (size_t i = 0; i < end; i++) {
		uint64_t v;
		memcpy(&v, buf + i, 8);
		if (v - gmin >= gmax - gmin)
			continue;
		if (skip) {
			uint64_t a = at + i;
			while (bi < nblocks && blocks[bi].hi <= a)
				bi++;
			if (bi < nblocks && blocks[bi].lo <= a)
				continue;      /* inside a block: counts when it is marked */
		}
		block *b = find(v);
		if (b && b != self)
			mark(b);
	}
}

/* Read [lo, hi) of the process and scan it. */
#define CHUNK ((size_t)4 << 20)
static unsigned char *chunk;

static void scan_range(uint64_t lo, uint64_t hi, const block *self, int skip)
{
	for (uint64_t a = lo; a < hi;) {
		size_t n = hi - a < CHUNK ? (size_t)(hi - a) : CHUNK;
		size_t want = n + 7 <= CHUNK + 7 ? n + (hi - a > n ? 7 : 0) : n;
		ssize_t got = pread(memfd, chunk, want, (off_t)a);
		if (got < 0 || (size_t)got < n) {
			/* an unreadable page inside: page by page */
			size_t page = 4096;
			for (uint64_t p = a; p < a + n; p += page) {
				size_t m = a + n - p < page ? (size_t)(a + n - p) : page;
				ssize_t g = pread(memfd, chunk, m, (off_t)p);
				if (g > 0) {
					bytes_read += (uint64_t)g;
					scan(chunk, (size_t)g, (size_t)g, p, self, skip);
				}
			}
		} else {
			bytes_read += (uint64_t)got;
			scan(chunk, n, (size_t)got, a, self, skip);
		}
		a += n;
	}
}

/* ---- stopping the threads (--stop) ------------------------------------- */

#define MAX_THREADS 4096
static pid_t tids[MAX_THREADS];
static uint64_t sps[MAX_THREADS];
static int ntids;
static uint64_t regs_seen;

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
			struct user_regs_struct r;
			sps[ntids] = 0;
			if (ptrace(PTRACE_GETREGS, t, NULL, &r) == 0) {
				uint64_t *w = (uint64_t *)&r;
				for (size_t k = 0; k < sizeof r / 8; k++) {
					block *b = find(w[k]);
					if (b)
						mark(b);
				}
				regs_seen += sizeof r / 8;
				sps[ntids] = r.rsp;
			}
			ntids++;
			added = 1;
		}
		closedir(d);
	}
}

static void let_go(void)
{
	for (int i = 0; i < ntids; i++)
		if (tids[i])
			ptrace(PTRACE_DETACH, tids[i], NULL, NULL);
}

/* Running threads (no --stop): a thread blocked in a system call shows its
 * stack pointer in /proc/PID/task/TID/syscall, which bounds its stack's
 * scan as a stop would (the frames below it are dead and may hold stale
 * pointers); a thread on a CPU shows "running" and its stack is read
 * whole. */
static void blocked_sps(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) && ntids < MAX_THREADS) {
		if (atoi(e->d_name) <= 0)
			continue;
		char sp[320], buf[512];
		snprintf(sp, sizeof sp, "/proc/%d/task/%s/syscall", (int)pid, e->d_name);
		FILE *f = fopen(sp, "r");
		if (!f)
			continue;
		uint64_t v[9];
		int n = fgets(buf, sizeof buf, f) ?
			sscanf(buf, "%" SCNd64 " %" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64
			       " %" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64, &v[0], &v[1], &v[2],
			       &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]) : 0;
		fclose(f);
		if (n == 9 && (int64_t)v[0] >= 0)
			sps[ntids++] = v[7];       /* tids[] stays 0: nothing to let go */
	}
	closedir(d);
}

/* ---- the mappings --------------------------------------------------------- */

static void scan_mappings(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		die("cannot read the process's maps");
	char line[4096];
	while (fgets(line, sizeof line, f)) {
		uint64_t lo, hi;
		char perms[8] = "", name[4096] = "";
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %*s %*s %*s %4095[^\n]", &lo, &hi,
			   perms, name) < 3)
			continue;
		if (perms[0] != 'r' || perms[1] != 'w')
			continue;
		const char *nm = name;
		while (*nm == ' ')
			nm++;
		if (!strncmp(nm, "/dev/", 5) || !strcmp(nm, "[vvar]") || !strcmp(nm, "[vsyscall]"))
			continue;
		/* a stopped thread's stack: only from its stack pointer up (less
		 * the 128-byte red zone below it) */
		for (int i = 0; i < ntids; i++)
			if (sps[i] > lo && sps[i] < hi)
				lo = sps[i] - 128 > lo ? (sps[i] - 128) & ~(uint64_t)7 : lo;
		scan_range(lo, hi, NULL, 1);
	}
	fclose(f);
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
	size_t cap = 1024;
	blocks = malloc(cap * sizeof *blocks);
	char line[256];
	while (blocks && fgets(line, sizeof line, stdin)) {
		uint64_t a, n;
		if (sscanf(line, "%" SCNx64 " %" SCNu64, &a, &n) != 2 || !n || a + n < a)
			die("a block line is not \"ADDR SIZE\"");
		if (nblocks == cap)
			blocks = realloc(blocks, (cap *= 2) * sizeof *blocks);
		if (!blocks)
			break;
		blocks[nblocks] = (block){ a, a + n, (uint32_t)nblocks, 0, 0 };
		nblocks++;
	}
	work = malloc((nblocks + 1) * sizeof *work);
	chunk = malloc(CHUNK + 8);
	if (!blocks || !work || !chunk)
		die("out of memory");
	qsort(blocks, nblocks, sizeof *blocks, by_lo);
	gmin = nblocks ? blocks[0].lo : 0;
	gmax = 0;
	for (size_t i = 0; i < nblocks; i++)
		if (blocks[i].hi > gmax)
			gmax = blocks[i].hi;
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
	memfd = open(path, O_RDONLY | O_CLOEXEC);
	if (memfd < 0) {
		char msg[160];
		snprintf(msg, sizeof msg, "cannot read the memory of process %d: %s", (int)pid,
			 strerror(errno));
		die(msg);
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (stop && nblocks)
		stop_all(pid);
	else if (nblocks)
		blocked_sps(pid);
	if (nblocks) {
		scan_mappings(pid);
		while (nwork) {       /* what marked blocks point to */
			block *b = &blocks[work[--nwork]];
			if (b->scanned)
				continue;
			b->scanned = 1;
			scan_range(b->lo, b->hi, b, 0);
		}
	}
	if (stop)
		let_go();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	for (size_t i = 0; i < nblocks; i++)
		if (!blocks[i].marked)
			printf("leak %u\n", blocks[i].line);
	printf("scan %" PRIu64 " %" PRId64 " %s %d %" PRIu64 "\n", bytes_read,
	       (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec),
	       stop ? "stopped" : "running", stop ? ntids : 0, regs_seen);
	return fflush(stdout) == 0 ? 0 : 1;
}
