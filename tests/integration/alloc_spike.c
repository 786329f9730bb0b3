/* alloc_spike — memory comes back after a spike, whether the program goes
 * on allocating or goes quiet, without malloc_trim: 300 MB in blocks of
 * SPIKE_BLOCK bytes (100,000: large blocks, alloc/arena.c's cache; 20,000:
 * a size class, the span pool; 2,000,000: huge blocks, alloc/huge.c), every
 * page written, checked and freed;
 * then either a steady churn of small blocks that stays within the thread
 * cache (SPIKE_BUSY 1) or sleep, no allocator call at all (SPIKE_BUSY 0).
 * Resident memory must come within 16 MiB of where it was before the
 * spike within 2.5 s (glibc's malloc: at once; heapalloc's promise: 2 s).
 * By default heapalloc starts no thread (what stays resident is decided at
 * the free), so the process stays single-threaded throughout.
 * Also, per build:
 *   SPIKE_WAKEUPS  HEAPALLOC_PURGE_THREAD=1: the opt-in purge thread
 *                  ("heapalloc-purge") gives the spike back, and once
 *                  everything has decayed it sleeps: no context switch of
 *                  it in a quiet second;
 *   SPIKE_PROFILED the same run re-executed with HEAPPROFILE set (profile
 *                  files in a temporary directory, removed after): memory
 *                  comes back the same way while the heap is profiled;
 *   SPIKE_FORK     a child forked after the spike (no purge thread in it)
 *                  gets the memory of its own spike back the same way;
 *   SPIKE_NOTHREAD HEAPALLOC_PURGE_THREAD=0: the process stays
 *                  single-threaded and malloc_trim(0) gives the spike back
 *                  at once instead;
 * and calloc over the blocks just freed, and over those given back, reads
 * zero in every byte. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

#ifndef SPIKE_BLOCK
#define SPIKE_BLOCK 100000
#endif
#ifndef SPIKE_BUSY
#define SPIKE_BUSY 0
#endif
#define MIB (1024L * 1024)
#define TOTAL (300L * 1000 * 1000)
#define N (TOTAL / SPIKE_BLOCK)

static char *v[N];
static void *live[64];
static uint64_t seed = 0x9E3779B97F4A7C15ull;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The start of a /proc file in buf (cap bytes, NUL-terminated), without
 * stdio (no malloc): 0, or -1 on error. */
static int slurp(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	ssize_t got = fd < 0 ? -1 : read(fd, buf, cap - 1);
	if (fd >= 0)
		close(fd);
	if (got <= 0)
		return -1;
	buf[got] = 0;
	return 0;
}

/* Under qemu-user the process's RSS holds the emulator's own memory too
 * (its translated code and tables: ~100 MB, which comes and goes with the
 * program's mappings), so there the measure is the spike's own pages:
 * those wholly inside a block of v[] that are resident (mincore), in KiB.
 * No page is counted twice; a block's two partial pages are left out (of
 * a 20,000-byte block, 3 of its 5 or 6 pages are counted).  Before any
 * spike v[] is empty: 0.  Pages unmapped count as not resident. */
static long spike_resident_kib(void)
{
	static unsigned char vec[SPIKE_BLOCK / 4096 + 2];
	long pages = 0;
	for (long i = 0; i < N; i++) {
		if (!v[i])
			continue;
		uintptr_t lo = ((uintptr_t)v[i] + 4095) & ~(uintptr_t)4095;
		uintptr_t hi = ((uintptr_t)v[i] + SPIKE_BLOCK) & ~(uintptr_t)4095;
		if (hi <= lo)
			continue;
		size_t n = (hi - lo) / 4096;
		if (mincore((void *)lo, hi - lo, vec) == 0) {
			for (size_t k = 0; k < n; k++)
				pages += vec[k] & 1;
			continue;
		}
		for (size_t k = 0; k < n; k++)   /* some of it unmapped: page by page */
			if (mincore((void *)(lo + k * 4096), 4096, vec) == 0)
				pages += vec[0] & 1;
	}
	return pages * 4;
}

/* RSS in KiB from /proc/self/statm (under qemu-user, the spike's resident
 * pages): -1 on error. */
static long rss_now(void)
{
	if (ck_emulated())
		return spike_resident_kib();
	char buf[128];
	long size = 0, res = 0;
	if (slurp("/proc/self/statm", buf, sizeof buf) != 0 ||
	    sscanf(buf, "%ld %ld", &size, &res) != 2)
		return -1;
	return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* The spike: allocate, write every page, check every page, free. */
static void spike(unsigned salt, long nblocks)
{
	for (long i = 0; i < nblocks; i++) {
		v[i] = malloc(SPIKE_BLOCK);
		REQUIRE(v[i] != NULL);
		for (long off = 0; off < SPIKE_BLOCK; off += 4096)
			v[i][off] = (char)(salt + i + off / 4096);
		v[i][SPIKE_BLOCK - 1] = (char)(salt ^ i);
	}
	long bad = 0;
	for (long i = 0; i < nblocks; i++) {
		for (long off = 0; off < SPIKE_BLOCK; off += 4096)
			bad += v[i][off] != (char)(salt + i + off / 4096);
		bad += v[i][SPIKE_BLOCK - 1] != (char)(salt ^ i);
		free(v[i]);
	}
	CHECK_EQ(bad, 0);
}

/* Busy: replace one of 64 small blocks, 1000 times (all from the cache). */
static void churn(void)
{
	for (int k = 0; k < 1000; k++) {
		seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
		unsigned i = (unsigned)(seed & 63);
		free(live[i]);
		live[i] = malloc(16 + (seed >> 8) % 241);
		REQUIRE(live[i] != NULL);
		*(char *)live[i] = 1;
	}
}

/* Milliseconds after the free until RSS <= limit, or -1 past 2.5 s.  Under
 * qemu-user 10 s, looked at every 100 ms: there the memory must come back,
 * but when is the emulator's and the machine's (a loaded machine starves
 * the purge thread's ticks, and each look is thousands of emulated mincore
 * calls that compete with it); the log says how long it took. */
static long wait_back(long limit, long *last)
{
	double t0 = now_s(), next = 0;
	double within = ck_emulated() ? 10 : 2.5, every = ck_emulated() ? 0.1 : 0.02;
	for (double t = 0; t < within; t = now_s() - t0) {
		if (t >= next) {
			*last = rss_now();
			if (*last <= limit)
				return (long)(t * 1000);
			next += every;
		}
		if (SPIKE_BUSY) {
			churn();
		} else {
			struct timespec s = { 0, 5 * 1000 * 1000 };
			nanosleep(&s, NULL);
		}
	}
	*last = rss_now();
	return *last <= limit ? (long)(within * 1000) : -1;
}

/* calloc over n blocks reads zero in every byte; they are freed again. */
static void calloc_zero(long n)
{
	long bad = 0;
	for (long i = 0; i < n; i++) {
		v[i] = calloc(1, SPIKE_BLOCK);
		REQUIRE(v[i] != NULL);
		bad += zero_check(v[i], SPIKE_BLOCK) != (size_t)-1;
		memset(v[i], 0x5a, SPIKE_BLOCK);
	}
	for (long i = 0; i < n; i++)
		free(v[i]);
	CHECK_EQ(bad, 0);
}

#ifdef SPIKE_WAKEUPS
/* Voluntary context switches of the thread named heapalloc-purge, or -1. */
static long purge_switches(void)
{
	char path[300], buf[4096];
	long sw = -1;
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	if (!d)
		return -1;
	while (sw < 0 && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
		if (slurp(path, buf, sizeof buf) != 0)
			continue;
		char *vc = strstr(buf, "\nvoluntary_ctxt_switches:");
		if (!strncmp(buf, "Name:\theapalloc-purge\n", 22) && vc)
			sw = atol(vc + 25);
	}
	closedir(d);
	return sw;
}
#endif

#ifdef SPIKE_PROFILED
/* Run this program again with HEAPPROFILE in a fresh directory; its exit
 * status is ours, the directory goes afterwards. */
static int run_profiled(void)
{
	char dir[] = "/tmp/alloc_spike_prof.XXXXXX", prefix[64], cmd[128];
	REQUIRE(mkdtemp(dir) != NULL);
	snprintf(prefix, sizeof prefix, "%s/p", dir);
	fflush(NULL);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		setenv("HEAPPROFILE", prefix, 1);
		execl("/proc/self/exe", "alloc_spike", (char *)NULL);
		_exit(99);
	}
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
#endif

/* The threads the process starts with: 1, or under qemu-user the
 * emulator's too (one beside the program's) */
static long own_threads = 1;

int main(void)
{
	if (ck_emulated()) {
		own_threads = threads_now();
		fprintf(stderr, "%s: \"RSS\" below is the spike's own resident pages, "
			"and %ld thread(s) the process's own\n", ck_emulated(), own_threads);
	}
#ifdef SPIKE_PROFILED
	if (!getenv("HEAPPROFILE"))
		return run_profiled();
#endif
#ifdef SPIKE_WAKEUPS
	setenv("HEAPALLOC_PURGE_THREAD", "1", 1);   /* read when a cache first passes its floor */
#endif
	long base = rss_now();
	if (base < 0)
		HARD_ERROR("cannot read /proc/self/statm");
	if (SPIKE_BUSY)
		churn();
#ifdef SPIKE_NOTHREAD
	setenv("HEAPALLOC_PURGE_THREAD", "0", 1);
	spike(1, N);
	struct timespec wait = { 1, 500 * 1000 * 1000 };
	nanosleep(&wait, NULL);
	long threads = threads_now(), kept = rss_now();
	malloc_trim(0);
	long trimmed = rss_now();
	fprintf(stderr, "no purge thread: %ld thread(s) 1.5 s after the spike, RSS %ld KiB before "
		"it, %ld KiB kept, %ld KiB after malloc_trim(0)\n", threads, base, kept, trimmed);
	CHECK_EQ(threads, own_threads);
	CHECK_LE(trimmed, base + 16 * 1024);
	calloc_zero(N / 10);
	return CHECK_DONE();
#endif
	spike(1, N);
	long freed = rss_now(), last = -1;
	long ms = wait_back(base + 16 * 1024, &last);
	fprintf(stderr, "%s, %d-byte blocks: RSS %ld KiB before the spike, %ld after the free, "
		"%ld KiB %ld ms later (limit %ld KiB)\n", SPIKE_BUSY ? "busy" : "idle",
		SPIKE_BLOCK, base, freed, last, ms, base + 16 * 1024);
	CHECK_GE(freed, 0);
	CHECK_GE(ms, 0);
	CHECK_LE(last, base + 16 * 1024);
#if !defined(SPIKE_WAKEUPS) && !defined(SPIKE_PROFILED)
	CHECK_EQ(threads_now(), own_threads);   /* no thread of heapalloc's did it */
#endif

#ifdef SPIKE_WAKEUPS
	/* by 2.5 s after the free every cached block has decayed (1 s idle,
	 * 250 ms ticks) and the thread has gone to sleep for good */
	struct timespec settle = { 2, 500 * 1000 * 1000 }, quiet = { 1, 0 };
	nanosleep(&settle, NULL);
	long sw0 = purge_switches();
	nanosleep(&quiet, NULL);
	long sw1 = purge_switches();
	fprintf(stderr, "purge thread's voluntary context switches: %ld, a quiet second later %ld\n",
		sw0, sw1);
	CHECK_GE(sw0, 0);            /* it ran: the spike started it */
	CHECK_EQ(sw1, sw0);
#endif
#ifdef SPIKE_FORK
	fflush(NULL);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		long cbase = rss_now(), clast = -1;
		spike(2, N / 3);
		long cms = wait_back(cbase + 16 * 1024, &clast);
		fprintf(stderr, "child: RSS %ld KiB before its 100 MB spike, %ld KiB %ld ms after\n",
			cbase, clast, cms);
		_exit(cms >= 0 ? 0 : 1);
	}
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
#endif
	/* blocks given back read zero; so do blocks freed a moment ago */
	calloc_zero(N / 10);
	calloc_zero(N / 10);
	return CHECK_DONE();
}
