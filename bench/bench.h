/* bench.h — helpers shared by the bench/ workloads.
 *
 * The workloads are plain C programs linked against nothing but libc and
 * pthread: the allocator under test is swapped in with LD_PRELOAD by
 * bench/run, so every allocator runs the very same binary.  Each workload
 * prints "key value" lines on stdout that bench/run parses; the first is
 * "allocator <file>", the object that really defines malloc in this process,
 * so a preload that did not take is caught instead of measured.
 *
 * Build with -fno-builtin-malloc (bench/Makefile.inc does) so the compiler
 * cannot elide a malloc/free pair.
 */
#ifndef HA_BENCH_H
#define HA_BENCH_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* xorshift64*: fast, good enough for picking sizes and slots. */
static inline uint64_t bench_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [lo, hi]. */
static inline size_t bench_range(uint64_t *s, size_t lo, size_t hi)
{
	return lo + (size_t)(bench_rand(s) % (uint64_t)(hi - lo + 1));
}

/* Resident set size now, in KiB (from /proc/self/statm). */
static inline long bench_rss_kib(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Which loaded object defines malloc?  (Through a volatile pointer so the
 * address is the one the dynamic linker bound, i.e. the preloaded one.) */
static inline void bench_print_allocator(void)
{
	void *(*volatile fn)(size_t) = malloc;
	Dl_info info;
	if (dladdr((void *)fn, &info) && info.dli_fname)
		printf("allocator %s\n", info.dli_fname);
	else
		printf("allocator unknown\n");
}

/* Scale factor from argv[1] (percent of the full workload; default 100). */
static inline double bench_scale(int argc, char **argv)
{
	double s = argc > 1 ? atof(argv[1]) : 100.0;
	return (s > 0 ? s : 100.0) / 100.0;
}

/* Keeps stores into blocks alive. */
static volatile uintptr_t bench_sink;

#endif
