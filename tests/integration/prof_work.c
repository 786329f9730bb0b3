/* tests/integration/prof_work.c — workloads for the heap-profiler shell drivers
 * (tests/integration/prof_*.sh).  Every call site is a noinline function with a unique
 * name, so `go tool pprof -top` attributes its bytes to exactly that name.
 * Modes (argv[1]):
 *   truth           known amounts per site: kept, 1-byte, freed, half freed,
 *                   4 threads, C++ new (prof_work_cxx.cc)
 *   sampled         large totals per site for the sampled-estimate test
 *   pattern N SIZE keep|free|keepfree   N allocations of SIZE bytes
 *   sleep MS [READY] allocate a little, (create file READY,) sleep MS
 *                   milliseconds
 *   bursts K N SIZE MS  K bursts of `pattern N SIZE free`, MS ms apart;
 *                   prints "bursts: the longest took T ms" to stderr
 *   signal K DIR    raise HEAPPROFILESIGNAL K times, waiting for each dump
 *   signalexit      raise SIGUSR2 and exit at once
 *   exit | _exit    allocate, then leave by exit() or _exit()
 *   restart         dump, stop, start again under HEAPPROFILE, dump, exit
 *   forkdumps K     dump K times, fork a child that dumps K times and
 *                   exits, list the root's files, dump once more and exit
 *   fork            fork a child and exec one, both allocate and exit
 *   forkthreads     print this process's threads, fork a child that
 *                   allocates (every allocation a sampling draw) and
 *                   prints its own; "parent N" and "child N" on stdout
 *   execchild PFX   (run by fork) check the environment, allocate, exit
 *   threads         threads allocate/free while the main thread dumps
 *   dlopen MODULE   a thread dlopens MODULE in a loop while others dump
 *   rss K MB MS     K times: touch MB more MiB of kept blocks, sleep MS ms
 *   grow MB MS [MAX] touch MB MiB more every MS ms until malloc fails or
 *                   MAX MiB are taken (default 4096), hold it 500 ms, free
 *                   it all, exit 0
 *   fill MS         take memory until malloc fails (1 MiB, then 4 KiB
 *                   blocks), hold it MS ms, free it all, exit 0
 *   status N        allocate, then exit(N)
 *   raise SIG       allocate, then die of signal SIG (default action)
 *   leak K N SIZE   K times: dump, then one "request" that leaks N blocks of
 *                   SIZE at leak_site and N of 100 bytes at small_leak
 *   midrun PFX      20 MB kept at site_before, then HeapProfilerStart(PFX):
 *                   24 MB kept at site_after_keep, 10 MB freed at
 *                   site_after_free, dump 1; free site_before's, dump 2
 * Exit 0 pass, 1 failure, 99 hard error.
 */
#include <dlfcn.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "heapalloc.h"
#include "tests/lib/check.h"
#include "tests/lib/prof_util.h"

extern char **environ;
void *volatile sink;
void *keep[200000];

void site_new(int n);          /* prof_work_cxx.cc: n x new char[5000], kept */

static void msleep(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&t, &t) != 0 && errno == EINTR)
		;
}

/* ---- truth ------------------------------------------------------------ */
__attribute__((noinline)) void site_keep(int n)
{
	for (int i = 0; i < n; i++) {
		keep[i] = malloc(1000);
		dumps_settle();
	}
}

__attribute__((noinline)) void site_tiny(int n)
{
	for (int i = 0; i < n; i++)
		keep[40000 + i] = malloc(1);
}

__attribute__((noinline)) void site_free(int n)
{
	for (int i = 0; i < n; i++) {
		sink = malloc(2000);
		free(sink);
	}
}

__attribute__((noinline)) void site_half(int n)
{
	void **v = keep + 10000;
	for (int i = 0; i < n; i++)
		v[i] = calloc(1, 3000);
	for (int i = 0; i < n; i += 2)
		free(v[i]);
}

__attribute__((noinline)) static void *site_thread(void *arg)
{
	void **v = arg;
	for (int i = 0; i < 250; i++)
		v[i] = malloc(4000);
	return NULL;
}

static int mode_truth(void)
{
	site_keep(1000);
	site_tiny(1000);
	site_free(500);
	site_half(300);
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		REQUIRE(pthread_create(&t[i], NULL, site_thread, keep + 20000 + i * 250) == 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	site_new(200);
	return 0;
}

/* ---- sampled --------------------------------------------------------- */
__attribute__((noinline)) void site_small_many(int n)
{
	for (int i = 0; i < n; i++)
		keep[i] = malloc(64);       /* 200000 x 64 = 12.8 MB, kept */
}

__attribute__((noinline)) void site_big_freed(int n)
{
	for (int i = 0; i < n; i++) {   /* 100 x 200000 = 20 MB, freed */
		sink = malloc(200000);
		free(sink);
	}
}

__attribute__((noinline)) void site_mixed(int n)
{
	for (int i = 0; i < n; i++) {   /* 4000 x (4096 + 65536) = 278.5 MB, freed */
		sink = malloc(4096);
		free(sink);
		sink = malloc(65536);
		free(sink);
	}
}

/* ---- midrun: a session started by the API after the heap was built --- */
__attribute__((noinline)) void site_before(int n)
{
	for (int i = 0; i < n; i++)
		keep[100000 + i] = malloc(10240);    /* a size class: 2000 x = 20 MB */
}

__attribute__((noinline)) void site_after_keep(int n)
{
	for (int i = 0; i < n; i++)
		keep[i] = malloc(8192);              /* 3000 x = 24.6 MB, kept */
}

__attribute__((noinline)) void site_after_free(int n)
{
	for (int i = 0; i < n; i++) {
		sink = malloc(5120);                 /* 2000 x = 10.2 MB, freed */
		free(sink);
	}
}

static int mode_midrun(const char *pfx)
{
	site_before(2000);
	HeapProfilerStart(pfx);
	CHECK_EQ(IsHeapProfilerRunning(), 1);
	site_after_keep(3000);
	site_after_free(2000);
	HeapProfilerDump("after start");
	for (int i = 0; i < 2000; i++)           /* blocks older than the session */
		free(keep[100000 + i]);
	HeapProfilerDump("older blocks freed");
	HeapProfilerStop();
	return 0;
}

/* ---- pattern --------------------------------------------------------- */
__attribute__((noinline)) void site_pattern(long n, size_t size, int how)
{
	void **v = malloc((size_t)n * sizeof *v);
	for (long i = 0; i < n; i++) {
		v[i] = malloc(size);
		dumps_settle();
		if (how == 1) {
			free(v[i]);
			dumps_settle();
		}
	}
	if (how == 2)
		for (long i = 0; i < n; i++) {
			free(v[i]);
			dumps_settle();
		}
}

/* ---- signal ---------------------------------------------------------- */
static int count_heaps(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));) {
		size_t l = strlen(e->d_name);
		if (l > 5 && strcmp(e->d_name + l - 5, ".heap") == 0)
			n++;
	}
	closedir(d);
	return n;
}

static int mode_signal(int k, const char *dir)
{
	site_keep(100);
	int sig = SIGUSR2;
	for (int i = 0; i < k; i++) {
		int before = count_heaps(dir);
		REQUIRE(kill(getpid(), sig) == 0);
		for (int w = 0; w < 500 && count_heaps(dir) == before; w++)
			msleep(10);
		CHECK_EQ(count_heaps(dir), before + 1);
	}
	return 0;
}

/* ---- memory growth (prof_rss.sh, prof_oom.sh) -------------------------- */

/* MB MiB in 1 MiB blocks, every page written (resident); 0 when malloc
 * fails (what was taken stays in keep[]). */
static __attribute__((noinline)) int site_touch(int *k, long mb)
{
	for (long i = 0; i < mb; i++) {
		char *p = malloc(1 << 20);
		if (!p)
			return 0;
		memset(p, 0x5a, 1 << 20);
		keep[(*k)++] = p;
	}
	return 1;
}

static int mode_rss(int steps, long mb, long ms)
{
	int k = 0;
	for (int i = 0; i < steps; i++) {
		REQUIRE(site_touch(&k, mb));
		msleep(ms);
	}
	return 0;
}

static int mode_grow(long mb, long ms, long max)
{
	int k = 0;
	while (k + mb <= max && site_touch(&k, mb))
		msleep(ms);
	msleep(500);
	while (k > 0)
		free(keep[--k]);
	return 0;
}

/* Exhaust the heap, then wait: a dump meanwhile gets no memory from it. */
static int mode_fill(long ms)
{
	int k = 0;
	while (k < 4096 && site_touch(&k, 1))
		;
	while (k < (int)(sizeof keep / sizeof keep[0]) && (keep[k] = malloc(4096)))
		k++;
	msleep(ms);
	while (k > 0)
		free(keep[--k]);
	return 0;
}

/* ---- leak (heapalloc_cmd.sh: heapalloc growth) ------------------------ */
static int leaked = 100000;

__attribute__((noinline)) void leak_site(int n, size_t size)
{
	for (int i = 0; i < n; i++)
		keep[leaked++] = malloc(size);
}

__attribute__((noinline)) void small_leak(int n)
{
	for (int i = 0; i < n; i++)
		keep[leaked++] = malloc(100);
}

__attribute__((noinline)) void handle_request(int n, size_t size)
{
	leak_site(n, size);
	small_leak(n);
	sink = malloc(5000);            /* scratch, freed: no growth */
	free(sink);
}

static int mode_leak(int k, int n, size_t size)
{
	REQUIRE(k * 2L * n <= 100000);
	for (int r = 0; r < k; r++) {
		CHECK_EQ(heapalloc_profile_dump("leak"), 0);
		handle_request(n, size);
	}
	return 0;
}

/* ---- fork / exec ------------------------------------------------------- */
static int mode_fork(const char *self)
{
	const char *pfx = getenv("HEAPPROFILE");
	REQUIRE(pfx);
	site_keep(100);
	pid_t c = fork();
	REQUIRE(c >= 0);
	if (c == 0) {
		site_free(10);
		site_keep(50);
		exit(0);                     /* exit dump: PREFIX_<pid>.0001.heap */
	}
	int st;
	REQUIRE(waitpid(c, &st, 0) == c);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("fork %d\n", (int)c);
	fflush(stdout);
	pid_t e = fork();
	REQUIRE(e >= 0);
	if (e == 0) {
		char *argv[] = { (char *)self, "execchild", (char *)pfx, NULL };
		execv(self, argv);
		_exit(99);
	}
	REQUIRE(waitpid(e, &st, 0) == e);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("exec %d\n", (int)e);
	fflush(stdout);
	/* this process' own variable is untouched */
	CHECK(strcmp(getenv("HEAPPROFILE"), pfx) == 0);
	return 0;
}

static int tasks(void)
{
	DIR *d = opendir("/proc/self/task");
	REQUIRE(d);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* A fork child that samples starts no thread (the helper is its
 * parent's): its threshold dump is written by the crossing thread. */
static int mode_forkthreads(void)
{
	site_keep(10);
	printf("parent %d\n", tasks());
	fflush(stdout);
	pid_t c = fork();
	REQUIRE(c >= 0);
	if (c == 0) {
		site_keep(2000);
		site_free(2000);
		printf("child %d\n", tasks());
		exit(CHECK_DONE());
	}
	int st;
	REQUIRE(waitpid(c, &st, 0) == c);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	printf("pid %d\n", (int)c);
	return 0;
}

static int mode_execchild(const char *pfx)
{
	const char *v = getenv("HEAPPROFILE");
	REQUIRE(v);
	CHECK(strcmp(v, pfx) == 0);                /* byte for byte */
	const char *u = getenv("HEAPPROFILE_USE_PID");
	CHECK(u && strcmp(u, "1") == 0);
	for (char **e = environ; *e; e++)          /* ASCII/UTF-8 only */
		for (const unsigned char *s = (const unsigned char *)*e; *s; s++)
			if (*s >= 0x80 && s == (const unsigned char *)*e)
				CHECK(!"environment entry starts with a high byte");
	site_keep(70);
	return 0;
}

/* ---- threads ----------------------------------------------------------- */
static volatile int stop_flag;

__attribute__((noinline)) static void *churn(void *arg)
{
	uintptr_t seed = (uintptr_t)arg * 2654435761u + 1;
	void *mine[256] = { 0 };
	while (!stop_flag) {
		for (int i = 0; i < 256; i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			free(mine[i]);
			mine[i] = malloc(16 + (seed >> 33) % 5000);
		}
	}
	for (int i = 0; i < 256; i++)
		free(mine[i]);
	return NULL;
}

static int mode_threads(void)
{
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		REQUIRE(pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1)) == 0);
	for (int i = 0; i < 20; i++) {
		HeapProfilerDump("threads");
		msleep(5);
	}
	stop_flag = 1;
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	return 0;
}

/* ---- dlopen ------------------------------------------------------------ */
static const char *module;

static void *loader(void *arg)
{
	for (int i = 0; i < 150 && !stop_flag; i++) {
		void *h = dlopen(module, RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			fprintf(stderr, "dlopen %s: %s\n", module, dlerror());
			exit(99);
		}
		int (*f)(void) = (int (*)(void))dlsym(h, "prof_dlmod_work");
		if (f)
			f();
		dlclose(h);
	}
	return NULL;
}

static int mode_dlopen(const char *mod)
{
	module = mod;
	pthread_t l, c;
	REQUIRE(pthread_create(&l, NULL, loader, NULL) == 0);
	REQUIRE(pthread_create(&c, NULL, churn, (void *)7) == 0);
	for (int i = 0; i < 30; i++) {
		HeapProfilerDump("dlopen");
		msleep(2);
	}
	pthread_join(l, NULL);
	stop_flag = 1;
	pthread_join(c, NULL);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		HARD_ERROR("usage: prof_work MODE ...");
	const char *m = argv[1];
	if (!strcmp(m, "truth"))
		mode_truth();
	else if (!strcmp(m, "midrun") && argc >= 3)
		mode_midrun(argv[2]);
	else if (!strcmp(m, "sampled")) {
		site_small_many(200000);
		site_big_freed(100);
		site_mixed(4000);
	} else if (!strcmp(m, "pattern") && argc >= 5)
		site_pattern(atol(argv[2]), (size_t)atol(argv[3]),
			     !strcmp(argv[4], "free") ? 1 : !strcmp(argv[4], "keepfree") ? 2 : 0);
	else if (!strcmp(m, "bursts") && argc >= 6) {
		long longest = 0;
		for (long k = atol(argv[2]); k > 0; k--) {
			struct timespec a, b;
			clock_gettime(CLOCK_MONOTONIC, &a);
			site_pattern(atol(argv[3]), (size_t)atol(argv[4]), 1);
			clock_gettime(CLOCK_MONOTONIC, &b);
			long ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
			longest = ms > longest ? ms : longest;
			if (k > 1)
				msleep(atol(argv[5]));
		}
		fprintf(stderr, "bursts: the longest took %ld ms\n", longest);
	} else if (!strcmp(m, "sleep") && argc >= 3) {
		site_keep(10);
		FILE *r = argc >= 4 ? fopen(argv[3], "w") : NULL;
		REQUIRE(argc < 4 || (r && fputs("ready\n", r) >= 0 && fclose(r) == 0));
		msleep(atol(argv[2]));
	} else if (!strcmp(m, "signal") && argc >= 4)
		mode_signal(atoi(argv[2]), argv[3]);
	else if (!strcmp(m, "signalexit")) {   /* the signal's dump, then exit's */
		site_keep(10);
		REQUIRE(kill(getpid(), SIGUSR2) == 0);
		exit(CHECK_DONE());
	} else if (!strcmp(m, "exit")) {
		site_keep(10);
		exit(CHECK_DONE());
	} else if (!strcmp(m, "restart")) {
		const char *pfx = getenv("HEAPPROFILE");
		REQUIRE(pfx);
		site_keep(10);
		CHECK_EQ(heapalloc_profile_dump("first session"), 0);
		heapalloc_profile_stop();
		CHECK_EQ(heapalloc_profile_start(pfx), 0);
		site_keep(10);
		CHECK_EQ(heapalloc_profile_dump("second session"), 0);
		exit(CHECK_DONE());
	} else if (!strcmp(m, "forkdumps") && argc >= 3) {
		int k = atoi(argv[2]);
		site_keep(10);
		for (int i = 0; i < k; i++)
			CHECK_EQ(heapalloc_profile_dump("root"), 0);
		fflush(NULL);
		pid_t c = fork();
		REQUIRE(c >= 0);
		if (c == 0) {
			for (int i = 0; i < k; i++)
				CHECK_EQ(heapalloc_profile_dump("child"), 0);
			exit(CHECK_DONE());
		}
		int st;
		REQUIRE(waitpid(c, &st, 0) == c);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		printf("child %d\nroot files after the child:", (int)c);
		for (int i = 1; i <= k; i++) {
			char f[4200];
			snprintf(f, sizeof f, "%s.%04d.heap", getenv("HEAPPROFILE"), i);
			if (access(f, F_OK) == 0)
				printf(" %d", i);
		}
		printf("\n");
		fflush(stdout);
		CHECK_EQ(heapalloc_profile_dump("root after"), 0);
		exit(CHECK_DONE());
	} else if (!strcmp(m, "_exit")) {
		site_keep(10);
		_exit(CHECK_DONE());
	} else if (!strcmp(m, "fork"))
		mode_fork(argv[0]);
	else if (!strcmp(m, "forkthreads"))
		mode_forkthreads();
	else if (!strcmp(m, "execchild") && argc >= 3)
		mode_execchild(argv[2]);
	else if (!strcmp(m, "threads"))
		mode_threads();
	else if (!strcmp(m, "rss") && argc >= 5)
		mode_rss(atoi(argv[2]), atol(argv[3]), atol(argv[4]));
	else if (!strcmp(m, "grow") && argc >= 4)
		mode_grow(atol(argv[2]), atol(argv[3]), argc >= 5 ? atol(argv[4]) : 4096);
	else if (!strcmp(m, "fill") && argc >= 3)
		mode_fill(atol(argv[2]));
	else if (!strcmp(m, "dlopen") && argc >= 3)
		mode_dlopen(argv[2]);
	else if (!strcmp(m, "status") && argc >= 3) {
		site_keep(10);
		exit(ck_failures ? 1 : atoi(argv[2]));
	} else if (!strcmp(m, "raise") && argc >= 3) {
		site_keep(10);
		signal(atoi(argv[2]), SIG_DFL);
		raise(atoi(argv[2]));
		HARD_ERROR("still alive after raise");
	} else if (!strcmp(m, "leak") && argc >= 5)
		mode_leak(atoi(argv[2]), atoi(argv[3]), (size_t)atol(argv[4]));
	else
		HARD_ERROR("unknown mode");
	return CHECK_DONE();
}
