/* tests/unit/prof_stack.c — unit tier for prof/capture/stack.c, compiled straight from
 * the source (tests/prof.am): a fresh thread's stacks come from the shared
 * rows or the frame rules learned from them, frame for frame what
 * libunwind's fast trace returns, without the fast trace's per-thread
 * table (its page faults); through a frame with a variable-length array
 * (CFA on RBP), through libc (qsort's comparator) and through signal
 * handlers, raised and asynchronous (where the rows hand over to the fast
 * trace); a long-lived thread never builds that table either; once an
 * object has been unloaded the rows and rules are left alone.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "prof/prof.h"
#include "prof/capture/frame_rules.h"   /* ha_trace_norm */
#include "tests/check.h"

/* stand-in for alloc/ (this program is not linked with the library) */
void ha_alloc_call_back_next(void)
{
}
HA_TLS unsigned ha_locks_held;
HA_TLS int ha_prof_busy;        /* hooks.c's re-entrancy guard (stack.c's calibration) */

#define N HA_STACK_RAW
#define THREADS 24

static long minflt(void)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_minflt;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int compared, differed, first_faults_max = -1, fast_faults_max;

/* Both unwinders from the same frame: entry 0 is this function's own call
 * site, so they must agree from entry 1 on.  first: the thread's first
 * stack, whose page faults are counted. */
__attribute__((noinline)) static void compare(int first)
{
	void *a[N], *b[N];
	long f0 = minflt();
	int na = ha_stack_unwind(a, N);
	long f1 = minflt();
	int nb = unw_backtrace(b, N);
	ha_trace_norm(b, nb);
	pthread_mutex_lock(&lock);
	compared++;
	if (na != nb || na < 4 || memcmp(a + 1, b + 1, (size_t)(na - 1) * sizeof *a) != 0) {
		if (++differed <= 3) {
			fprintf(stderr, "stack differs: %d frames against %d\n", na, nb);
			for (int i = 0; i < na || i < nb; i++)
				fprintf(stderr, "  %2d %p %p\n", i, i < na ? a[i] : NULL,
					i < nb ? b[i] : NULL);
		}
	}
	if (first && f1 - f0 > first_faults_max)
		first_faults_max = (int)(f1 - f0);
	pthread_mutex_unlock(&lock);
}

__attribute__((noinline)) static int with_vla(int n)
{
	volatile char v[n];
	v[0] = 1;
	compare(0);
	return v[0] + n;
}

static int cmp_calls;
static int by_value(const void *x, const void *y)
{
	if (__atomic_fetch_add(&cmp_calls, 1, __ATOMIC_RELAXED) == 0)
		compare(0);
	return *(const int *)x - *(const int *)y;
}

static void on_signal(int sig)
{
	(void)sig;
	compare(0);
}

__attribute__((noinline)) static int depth(int d)
{
	if (d > 0) {
		int r = depth(d - 1);
		__asm__ volatile("" ::: "memory");
		return r + 1;
	}
	compare(1);
	with_vla(40);
	int v[3] = { 3, 1, 2 };
	cmp_calls = 0;
	qsort(v, 3, sizeof *v, by_value);
	raise(SIGUSR1);
	return 0;
}

/* A thread interrupted anywhere in a loop of calls and stack moves: the
 * interrupted frame must be looked up at its exact IP. */
static volatile int spin_stop, handled;

static void on_async(int sig)
{
	(void)sig;
	compare(0);
	__atomic_fetch_add(&handled, 1, __ATOMIC_RELEASE);
}

__attribute__((noinline)) static int spin_leaf(volatile int *v, int n)
{
	volatile int a[8];
	for (int i = 0; i < 8; i++)
		a[i] = v[i % 2] + n;
	return a[n & 7];
}

static void *spinner(void *arg)
{
	volatile int v[2] = { 1, 2 };
	unsigned x = 0;             /* wraps: unsigned */
	(void)arg;
	while (!spin_stop)
		x += (unsigned)spin_leaf(v, (int)(x & 0xffff));
	return (void *)(long)x;
}

static void async_signals(int threads, int signals)
{
	for (int t = 0; t < threads; t++) {
		pthread_t th;
		spin_stop = 0;
		REQUIRE(pthread_create(&th, NULL, spinner, NULL) == 0);
		for (int i = 0; i < signals; i++) {
			int before = __atomic_load_n(&handled, __ATOMIC_ACQUIRE);
			pthread_kill(th, SIGUSR2);
			while (__atomic_load_n(&handled, __ATOMIC_ACQUIRE) == before)
				sched_yield();
		}
		spin_stop = 1;
		pthread_join(th, NULL);
	}
}

static void *thread(void *arg)
{
	depth((int)(long)arg);
	return NULL;
}

/* A long-lived thread's stacks, once learned, are walked by the frame
 * rules: it never builds the fast trace's per-thread table. */
static void *long_lived(void *arg)
{
	(void)arg;
	void *a[N];
	for (int i = 0; i < 200; i++) {
		long f0 = minflt();
		ha_stack_unwind(a, N);
		long f = minflt() - f0;
		if (f > fast_faults_max)
			fast_faults_max = (int)f;
	}
	return NULL;
}

static int read_subs(struct dl_phdr_info *info, size_t size, void *arg)
{
	*(unsigned long long *)arg = info->dlpi_subs;
	return 1;
}

static unsigned long long unloads(void)
{
	unsigned long long subs = 0;
	dl_iterate_phdr(read_subs, &subs);
	return subs;
}

int main(void)
{
	ha_stack_init();
	signal(SIGUSR1, on_signal);
	/* the first thread teaches the rows its IPs; later ones find them */
	for (int i = 0; i < THREADS; i++) {
		pthread_t t;
		REQUIRE(pthread_create(&t, NULL, thread, (void *)(long)(i % 6)) == 0);
		pthread_join(t, NULL);
		if (i == 0)
			first_faults_max = -1;
	}
	CHECK_EQ(compared, THREADS * 4);
	CHECK_EQ(differed, 0);
	/* the fast trace's table is 256 KiB (64 pages); the rows fault in at
	 * most a page of stack.  Under qemu-user a thread's faults are the
	 * emulator's too (code it translates): page counts are not checked */
	const char *emu = ck_emulated();
	if (emu)
		fprintf(stderr, "page faults not checked: %s\n", emu);
	CHECK_GE(first_faults_max, 0);
	CHECK(emu || first_faults_max <= 8);

	signal(SIGUSR2, on_async);
	async_signals(20, 30);
	CHECK_EQ(compared, THREADS * 4 + 20 * 30);
	CHECK_EQ(differed, 0);

	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, long_lived, NULL) == 0);
	pthread_join(t, NULL);
	CHECK(emu || fast_faults_max <= 8);

	/* after a dlclose that unloads a glibc library this process has not
	 * loaded (a sanitizer runtime may map libm), a fresh thread's first
	 * stack is the fast trace's, table and all */
	static const char *const spare[] = { "libm.so.6", "libresolv.so.2", "libanl.so.1",
					     "libBrokenLocale.so.1", "libutil.so.1" };
	int unloaded = 0;
	for (size_t i = 0; i < sizeof spare / sizeof *spare && !unloaded; i++) {
		if (dlopen(spare[i], RTLD_NOW | RTLD_NOLOAD))
			continue;     /* loaded already (that handle is never closed) */
		unsigned long long before = unloads();
		void *h = dlopen(spare[i], RTLD_NOW | RTLD_LOCAL);
		if (h)
			dlclose(h);
		unloaded = h && unloads() > before;
	}
	if (!unloaded) {
		int r = CHECK_DONE();
		fprintf(stderr, "SKIP: none of libm, libresolv, libanl, libBrokenLocale, libutil "
			"could be loaded and unloaded: the dlclose case did not run\n");
		return r ? r : EXIT_SKIP;
	}
	first_faults_max = -1;
	REQUIRE(pthread_create(&t, NULL, thread, (void *)2L) == 0);
	pthread_join(t, NULL);
	CHECK(emu || first_faults_max >= 32);
	CHECK_EQ(differed, 0);
	return CHECK_DONE();
}
