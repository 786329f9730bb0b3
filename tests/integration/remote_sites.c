/* tests/integration/remote_sites.c — a program with known call sites, run with
 * libheapalloc preloaded and no profiling variable, for `heapalloc dump PID`
 * (tests/integration/remote_dump.sh).  Built by the test as a user builds a program
 * (-O2 -g, not linked with heapalloc), as C and as C++.
 *
 *   remote_sites READY MODE
 * keeps site_big's 2048 blocks of 64 KiB (128 MiB) and site_small's 131072
 * blocks of 512 bytes (64 MiB: each ~32 samples at the always-on 2 MiB),
 * allocates and frees 1000 blocks of 64 KiB
 * at site_gone, then writes to READY (created whole, by rename)
 *   "big BYTES small BYTES alloc BYTES free BYTES"
 * (the books as heapalloc_get_stats reads them, after the last allocation)
 * and, by MODE:
 *   hold   waits for stdin to close, allocating nothing;
 *   lock   first leaves a thread stopped inside the allocator with one
 *          of its locks held and another blocked on that lock (the
 *          process is deadlocked in the allocator), then the same;
 *   grow   (without site_big and site_small) site_grow adds 2 MiB every
 *          100 ms (up to 200 MiB) until stdin closes;
 *   churn  4 threads allocate and free until stdin closes, then it prints
 *          a checksum of their work (the same on every run).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
/* Built as C++ too (g++ -x c++): the sites then allocate with operator new. */
#ifdef __cplusplus
#include <new>
#define ALLOC(n) ::operator new(n)
#define FREE(p) ::operator delete(p)
#else
#define ALLOC(n) malloc(n)
#define FREE(p) free(p)
#endif

void *keep[2048 + 131072];
static size_t nkeep;

NOINLINE void site_big(void)
{
	for (int i = 0; i < 2048; i++)
		keep[nkeep++] = memset(ALLOC(65536), 1, 64);
}

NOINLINE void site_small(void)
{
	for (int i = 0; i < 131072; i++)
		keep[nkeep++] = memset(ALLOC(512), 2, 16);
}

NOINLINE void site_gone(void)
{
	for (int i = 0; i < 1000; i++)
		FREE(memset(ALLOC(65536), 3, 64));
}

static volatile int stop;
void *grown[100];   /* global: the compiler must keep the stores (and the mallocs) */

NOINLINE void site_grow(void)
{
	static int n;
	if (n < 100)
		grown[n++] = memset(malloc(2 << 20), 4, 64);
}

/* ---- lock: a thread held inside the allocator ------------------------- */
static volatile int held, release_held;
static volatile uint64_t spins;

static void on_usr1(int sig)
{
	(void)sig;
	held = 1;
	while (!release_held)
		;                 /* the interrupted malloc keeps what it holds */
	held = 0;
}

/* The allocator's statistics walk its structures under its locks (the
 * thread registry, the central caches, the large-block cache): most of a
 * call is spent holding one. */
static void *hammer(void *arg)
{
	(void)arg;
	for (;;) {
		struct mallinfo2 m = mallinfo2();
		spins += m.arena != 0;
	}
	return NULL;
}

static volatile int probe_done;
static void *probe(void *arg)
{
	(void)arg;
	struct mallinfo2 m = mallinfo2();
	probe_done = m.arena != 0 || 1;
	return NULL;
}

/* Interrupt the hammering thread until it is caught holding the lock: a
 * probe thread's malloc of the same size then stays blocked. */
static int deadlock(void)
{
	pthread_t h;
	if (pthread_create(&h, NULL, hammer, NULL))
		return -1;
	signal(SIGUSR1, on_usr1);
	for (int tries = 0; tries < 2000; tries++) {
		release_held = 0;
		pthread_kill(h, SIGUSR1);
		while (!held)
			;
		pthread_t p;
		probe_done = 0;
		if (pthread_create(&p, NULL, probe, NULL))
			return -1;
		struct timespec t = { 0, 20 * 1000000 };
		nanosleep(&t, NULL);
		if (!probe_done)
			return 0;     /* the probe waits on the held lock: deadlocked */
		pthread_join(p, NULL);
		release_held = 1;
		while (held)
			;
	}
	return -1;
}

/* ---- churn ------------------------------------------------------------- */
static uint64_t sums[4];
static void *churn(void *arg)
{
	int k = (int)(intptr_t)arg;
	void *slot[256] = { 0 };
	uint64_t x = (uint64_t)k + 1, s = 0;
	while (!stop) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		unsigned i = (unsigned)(x >> 56);
		free(slot[i]);
		size_t n = 16 + (size_t)((x >> 20) % 100000);
		slot[i] = malloc(n);
		memset(slot[i], (int)i, 8);
		s += ((unsigned char *)slot[i])[0];
	}
	for (int i = 0; i < 256; i++)
		free(slot[i]);
	sums[k] = s != 0;
	return NULL;
}

static void wait_stdin(void)
{
	char c;
	while (read(0, &c, 1) > 0)
		;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	typedef struct { uint64_t v[32]; } stats;
	void (*get)(stats *, size_t) = (void (*)(stats *, size_t))dlsym(RTLD_DEFAULT,
									"heapalloc_get_stats_size");
	if (!get) {
		fprintf(stderr, "heapalloc is not loaded\n");
		return 99;
	}
	const char *mode = argv[2];
	int grow = !strcmp(mode, "grow");   /* site_grow alone, to lead top within seconds */
	if (!grow) {
		site_big();
		site_small();
	}
	site_gone();
	pthread_t t[4];
	if (!strcmp(mode, "churn"))
		for (int i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, churn, (void *)(intptr_t)i);
	/* heapalloc_stats: prof_alloc_bytes and prof_free_bytes are fields
	 * 9 and 10 (include/heapalloc.h); read before the lock is caught (the
	 * statistics take it) */
	stats st;
	get(&st, 11 * sizeof(uint64_t));
	if (!strcmp(mode, "lock") && deadlock() != 0) {
		fprintf(stderr, "could not catch the allocator's lock\n");
		return 99;
	}
	char buf[256], tmp[4200];
	int n = snprintf(buf, sizeof buf, "big %llu small %llu alloc %llu free %llu\n",
			 grow ? 0 : 2048ull * 65536, grow ? 0 : 131072ull * 512, (unsigned long long)st.v[9],
			 (unsigned long long)st.v[10]);
	snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, buf, (size_t)n) != n || close(fd) || rename(tmp, argv[1]))
		return 99;
	if (grow) {
		int fl = fcntl(0, F_GETFL);
		fcntl(0, F_SETFL, fl | O_NONBLOCK);
		for (;;) {
			char c;
			ssize_t r = read(0, &c, 1);
			if (r == 0)
				break;
			site_grow();
			struct timespec d = { 0, 100 * 1000000 };
			nanosleep(&d, NULL);
		}
		return 0;
	}
	wait_stdin();
	if (!strcmp(mode, "lock"))
		_exit(0);             /* its threads are stuck: leave at once */
	if (!strcmp(mode, "churn")) {
		stop = 1;
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
		printf("churn %llu\n", (unsigned long long)(sums[0] + sums[1] + sums[2] + sums[3]));
	}
	return 0;
}
