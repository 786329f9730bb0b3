/* tests/unit/prof_stack.c — unit tier for prof/capture/stack.c, compiled straight from
 * the source (tests/integration/prof.am): a fresh thread's stacks come from the shared
 * rows or the frame rules learned from them, frame for frame what
 * libunwind's fast trace returns, without the fast trace's per-thread
 * table (its page faults); through a frame with a variable-length array
 * (CFA on RBP), through libc (qsort's comparator) and through signal
 * handlers, raised and asynchronous (the signal frame and the frame it
 * interrupted stepped without the table); a long-lived thread never builds
 * that table either; once an object has been unloaded only its frames are
 * learned again (RULE_GONE), the others' stay; libunwind's set-up never
 * got its validation pipe; and the walk's checked reads fail, not fault,
 * off readable memory, by either of their two ways.
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
#include <sys/mman.h>
#include <sys/resource.h>

#include "prof/prof.h"
#include "prof/capture/frame_rules.h"   /* ha_trace_norm */
#include "prof/unit.h"          /* uncached, signal_steps, ha_unw_refused */
#include "tests/lib/check.h"

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
static int by_lr;               /* stacks libunwind's trace ended short of (aarch64) */
static uintptr_t async_lr;      /* on_async: the interrupted x30 (aarch64) */
static void *spin_trace[N];     /* the spinner's own trace, from spinner */
static int spin_n;

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
#if defined(__aarch64__)
	/* libunwind 1.6's aarch64 trace (and libgcc's backtrace(3) alike)
	 * ends at a leaf frame a signal interrupted, its return address
	 * still in x30: there the frames after it are judged by the
	 * kernel's record (x30) and the interrupted thread's own trace from
	 * spinner (spin_trace) */
	uintptr_t lr = __atomic_load_n(&async_lr, __ATOMIC_RELAXED);
	if (lr && nb >= 3 && na == nb + spin_n && a[nb] == (void *)lr &&
	    memcmp(a + 1, b + 1, (size_t)(nb - 1) * sizeof *a) == 0 &&
	    memcmp(a + nb + 1, spin_trace + 1, (size_t)(spin_n - 1) * sizeof *a) == 0) {
		memcpy(b + nb, a + nb, (size_t)spin_n * sizeof *a);
		nb = na;
		__atomic_fetch_add(&by_lr, 1, __ATOMIC_RELAXED);
	}
#endif
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

static void on_async(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)si;
#if defined(__aarch64__)
	__atomic_store_n(&async_lr, (uintptr_t)((ucontext_t *)ctx)->uc_mcontext.regs[30],
			 __ATOMIC_RELAXED);
#else
	(void)ctx;
#endif
	compare(0);
	__atomic_store_n(&async_lr, 0, __ATOMIC_RELAXED);
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
	if (!spin_n) {              /* one spinner at a time */
		int n = unw_backtrace(spin_trace, N);
		ha_trace_norm(spin_trace, n);
		spin_n = n;
	}
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

static int text_of(struct dl_phdr_info *info, size_t size, void *arg)
{
	uintptr_t *a = arg;
	(void)size;
	if ((uintptr_t)info->dlpi_addr != a[0])
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD && (info->dlpi_phdr[i].p_flags & PF_X)) {
			a[1] = a[0] + info->dlpi_phdr[i].p_vaddr;
			a[2] = info->dlpi_phdr[i].p_memsz;
			return 1;
		}
	return 0;
}

/* A frame learned inside the text of the object h (an IP there taken for
 * a return address, on a made-up stack): that IP, or 0. */
static uintptr_t learn_inside(void *h)
{
	static uintptr_t stack[512];
	struct link_map *lm;
	uintptr_t a[3] = { 0, 0, 0 };
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0)
		return 0;
	a[0] = lm->l_addr;
	dl_iterate_phdr(text_of, a);
	/* aarch64: most of libm is leaf functions (x30 never saved: no
	 * rule); a few that call others, past their prologue */
	static const char *const callers[] = { "jn", "lgamma", "tgamma", "yn" };
	for (size_t k = 0; k < sizeof callers / sizeof *callers; k++) {
		uintptr_t f = (uintptr_t)dlsym(h, callers[k]);
		for (uintptr_t off = 8; f - a[1] < a[2] && off < 256; off += 8)
			if (ha_frame_learn_at(f + off, (uintptr_t)&stack[64], (uintptr_t)&stack[256]))
				return f + off;
	}
	for (uintptr_t off = a[2] / 2 & ~(uintptr_t)15; a[2] && off < a[2]; off += 64)
		if (ha_frame_learn_at(a[1] + off, (uintptr_t)&stack[64], (uintptr_t)&stack[256]))
			return a[1] + off;
	return 0;
}

/* read_checked, the walk's reads that no unwind info vouches for: the
 * bytes where readable, 0 (no fault) on a page that is PROT_NONE or
 * unmapped or where the read crosses into one; through process_vm_readv
 * and through the futex check (qemu-user's ENOSYS), forced here. */
static void checked_reads(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, (size_t)pg * 3, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(m != MAP_FAILED);
	REQUIRE(mprotect(m + pg, (size_t)pg, PROT_NONE) == 0);
	REQUIRE(munmap(m + 2 * pg, (size_t)pg) == 0);
	for (int i = 0; i < 16; i++)
		m[pg - 32 + i] = (char)(0xa0 + i);
	int natural = -1;             /* no_vm_readv after the first pass */
	for (int futex = 0; futex < 2; futex++) {
		if (futex) {
			natural = no_vm_readv;
			no_vm_readv = 1;
		}
		char got[16] = { 0 };
		CHECK_EQ(read_checked((uintptr_t)(m + pg - 32), got, 16), 1);
		CHECK(memcmp(got, m + pg - 32, 16) == 0);
		CHECK_EQ(read_checked((uintptr_t)(m + pg - 8), got, 16), 0);    /* into PROT_NONE */
		CHECK_EQ(read_checked((uintptr_t)(m + pg + 64), got, 16), 0);
		CHECK_EQ(read_checked((uintptr_t)(m + 2 * pg), got, 16), 0);    /* unmapped */
		CHECK_EQ(read_checked(16, got, 8), 0);
	}
	no_vm_readv = natural;
	munmap(m, (size_t)pg * 2);
	if (no_vm_readv)
		fprintf(stderr, "process_vm_readv: ENOSYS here, the futex check reads\n");
}

int main(void)
{
	ha_stack_init();
	checked_reads();
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
	/* the first walk started libunwind, its pipe2 refused (the test's own
	 * unw_backtrace opens one later, as a program's own call may) */
	CHECK_EQ(ha_unw_refused, 1);
	/* the fast trace's table is 256 KiB (64 pages); the rows fault in at
	 * most a page of stack.  Under qemu-user a thread's faults are the
	 * emulator's too (code it translates): page counts are not checked */
	const char *emu = ck_emulated();
	if (emu)
		fprintf(stderr, "page faults not checked: %s\n", emu);
	CHECK_GE(first_faults_max, 0);
	CHECK(emu || first_faults_max <= 8);

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_async;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGUSR2, &sa, NULL);
	unsigned u0 = uncached, s0 = signal_steps;
	async_signals(20, 30);
	/* each signal frame stepped by the kernel's record (x86-64), or with
	 * the frame it stopped through the rows without the table */
	CHECK_GE((signal_steps - s0) + (uncached - u0) / 2, 20 * 30);
	CHECK_EQ(compared, THREADS * 4 + 20 * 30);
	CHECK_EQ(differed, 0);
	if (by_lr)
		fprintf(stderr, "%d stacks judged by x30 and the spinner's trace: unw_backtrace "
			"ended at the interrupted leaf\n", by_lr);

	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, long_lived, NULL) == 0);
	pthread_join(t, NULL);
	CHECK(emu || fast_faults_max <= 8);

	/* a dlclose that unloads a glibc library this process has not loaded
	 * (a sanitizer runtime may map libm): a frame learned inside it is
	 * set RULE_GONE, and a fresh thread's stacks, whose objects all stay
	 * loaded, are still walked by what was learned: no frame stepped
	 * afresh, no table built */
	static const char *const spare[] = { "libm.so.6", "libresolv.so.2", "libanl.so.1",
					     "libBrokenLocale.so.1", "libutil.so.1" };
	int unloaded = 0;
	uintptr_t gone_ip = 0;
	for (size_t i = 0; i < sizeof spare / sizeof *spare && !unloaded; i++) {
		if (dlopen(spare[i], RTLD_NOW | RTLD_NOLOAD))
			continue;     /* loaded already (that handle is never closed) */
		unsigned long long before = unloads();
		void *h = dlopen(spare[i], RTLD_NOW | RTLD_LOCAL);
		if (!h)
			continue;
		gone_ip = learn_inside(h);
		dlclose(h);
		unloaded = unloads() > before;
	}
	if (!unloaded) {
		int r = CHECK_DONE();
		fprintf(stderr, "SKIP: none of libm, libresolv, libanl, libBrokenLocale, libutil "
			"could be loaded and unloaded: the dlclose case did not run\n");
		return r ? r : EXIT_SKIP;
	}
	unsigned gen0 = ha_frame_gen;
	ha_frame_check_unloads();
	CHECK_EQ(ha_frame_gen, gen0 + 1);
	CHECK(gone_ip != 0);
	const struct slot *gone = gone_ip ? ha_frame_slot_at(gone_ip) : NULL;
	CHECK(gone && slot_rule(gone).kind == RULE_GONE);
	first_faults_max = -1;
	u0 = uncached;
	int c0 = compared;
	REQUIRE(pthread_create(&t, NULL, thread, (void *)2L) == 0);
	pthread_join(t, NULL);
	CHECK_EQ(compared, c0 + 4);
	CHECK_EQ(uncached - u0, 0);
	CHECK(emu || first_faults_max <= 8);
	CHECK_EQ(differed, 0);
	return CHECK_DONE();
}
