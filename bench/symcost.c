/* symcost — what naming a served profile costs: heapalloc_profile_pprof
 * on a profile of about N locations, the first call (loads the plugin
 * libheapalloc-sym.so and libdw, indexes the binary's units, names every
 * address) against the calls after it (the plugin's per-address cache),
 * and against HEAP_PROFILE_SYMBOLIZE=0 (addresses only).  Run under
 * heapalloc with HEAP_PROFILE_SAMPLE_INTERVAL=1 (make bench-symcost does):
 * 4096 noinline functions, each a call site of its own, and the first N of
 * them allocate once.  argv[1] = N.  Prints "key value" lines: calls' wall
 * times in microseconds and the profile's size.  The three calls go through
 * their own noinline functions (call_first, call_again, call_third), so a
 * callgrind run of this program gives each one's instructions.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void *volatile sink[4096];

#define F(p) __attribute__((noinline)) static void f_##p(void) { sink[0x##p] = malloc(8); }
#define A16(m, p) m(p##0) m(p##1) m(p##2) m(p##3) m(p##4) m(p##5) m(p##6) m(p##7) \
	m(p##8) m(p##9) m(p##a) m(p##b) m(p##c) m(p##d) m(p##e) m(p##f)
#define B16(m, p) A16(m, p##0) A16(m, p##1) A16(m, p##2) A16(m, p##3) A16(m, p##4) \
	A16(m, p##5) A16(m, p##6) A16(m, p##7) A16(m, p##8) A16(m, p##9) A16(m, p##a) \
	A16(m, p##b) A16(m, p##c) A16(m, p##d) A16(m, p##e) A16(m, p##f)
#define C16(m) B16(m, 0) B16(m, 1) B16(m, 2) B16(m, 3) B16(m, 4) B16(m, 5) B16(m, 6) \
	B16(m, 7) B16(m, 8) B16(m, 9) B16(m, a) B16(m, b) B16(m, c) B16(m, d) B16(m, e) B16(m, f)
C16(F)
#define P(p) f_##p,
static void (*const fns[4096])(void) = { C16(P) };

typedef int (*pprof_fn)(void **, size_t *);
static pprof_fn pprof;
static size_t bytes;

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static size_t sizes[3];

static double take(int k)
{
	void *buf = NULL;
	double t0 = now_us();
	int err = pprof(&buf, &bytes);
	double t = now_us() - t0;
	free(buf);
	sizes[k] = bytes;
	if (err) {
		fprintf(stderr, "symcost: heapalloc_profile_pprof: error %d\n", err);
		exit(1);
	}
	return t;
}

/* (different arguments: the compiler must not fold the three into one) */
__attribute__((noinline)) static double call_first(void) { return take(0); }
__attribute__((noinline)) static double call_again(void) { return take(1); }
__attribute__((noinline)) static double call_third(void) { return take(2); }

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4096;
	if (n < 1 || n > 4096) {
		fprintf(stderr, "usage: symcost N (1..4096 call sites)\n");
		return 2;
	}
	pprof = (pprof_fn)dlsym(RTLD_DEFAULT, "heapalloc_profile_pprof");
	if (!pprof) {
		fprintf(stderr, "symcost: run it under heapalloc (LD_PRELOAD)\n");
		return 1;
	}
	for (int i = 0; i < n; i++)
		fns[i]();
	double a = call_first(), b = call_again(), c = call_third();
	printf("sites %d\nfirst_us %.0f\nagain_us %.0f\nthird_us %.0f\nprofile_bytes %zu\n", n, a, b,
	       c, bytes);
	return 0;
}
