/* alloc_profile_toggle — the malloc semantics hold while the heap profiler
 * is switched on and off at run time (heapalloc_profile_start/stop): blocks
 * allocated before, during and after a session, and in a second session,
 * are resized, measured and freed across those switches.  Every block's
 * malloc_usable_size is at least its request and every usable byte is the
 * caller's: filled with a pattern that must survive the next switch, a
 * realloc (prefix), and the neighbours' traffic.  Skips (77) when
 * heapalloc's profiler API is not there (e.g. against glibc). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

enum { N = 3000 };
static unsigned char *blk[N];
static size_t req[N], fill[N];
static uint32_t seed[N];
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(void)
{
	rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

static size_t pick(void)
{
	uint32_t k = rnd() % 100;
	return k < 80 ? rnd() % 1100 : k < 99 ? rnd() % 40000 : (1u << 20) + rnd() % (1u << 19);
}

/* (Re)fill block i over its whole usable size with a new pattern. */
static void refill(int i)
{
	size_t u = malloc_usable_size(blk[i]);
	if (u < req[i])
		fprintf(stderr, "block %d: usable %zu < request %zu\n", i, u, req[i]);
	CHECK_GE(u, req[i]);
	fill[i] = u;
	seed[i] = rnd();
	pat_fill(blk[i], fill[i], seed[i]);
}

static void verify_all(const char *when)
{
	size_t bad = 0;
	for (int i = 0; i < N; i++)
		if (blk[i] && pat_check(blk[i], fill[i], seed[i]) != (size_t)-1) {
			if (bad++ < 5)
				fprintf(stderr, "%s: block %d (request %zu, filled %zu) damaged at %zu\n",
					when, i, req[i], fill[i], pat_check(blk[i], fill[i], seed[i]));
		}
	CHECK_EQ(bad, 0);
}

/* A round of traffic: allocate into empty slots, realloc some, free some. */
static void traffic(const char *when)
{
	for (int i = 0; i < N; i++) {
		uint32_t k = rnd() % 4;
		if (!blk[i]) {
			req[i] = pick();
			blk[i] = k == 0 ? calloc(1, req[i]) : k == 1 ? memalign(64, req[i]) : malloc(req[i]);
			REQUIRE(blk[i] != NULL);
			if (k == 0)
				CHECK_EQ(zero_check(blk[i], req[i]), (size_t)-1);
			refill(i);
		} else if (k == 0) {
			size_t m = pick() + 1, keep = m < fill[i] ? m : fill[i]; /* not 0: that frees */
			unsigned char *q = realloc(blk[i], m);
			REQUIRE(q != NULL);
			size_t at = pat_check(q, keep, seed[i]);
			if (at != (size_t)-1)
				fprintf(stderr, "%s: realloc %zu -> %zu lost byte %zu\n", when, fill[i], m, at);
			CHECK_EQ(at, (size_t)-1);
			blk[i] = q;
			req[i] = m;
			refill(i);
		} else if (k == 1) {
			free(blk[i]);
			blk[i] = NULL;
		}
	}
	verify_all(when);
}

int main(void)
{
	int (*start)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "heapalloc_profile_start");
	void (*stop)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "heapalloc_profile_stop");
	if (!start || !stop)
		SKIP("heapalloc's profiler API not found");
	char dir[] = "/tmp/alloc_toggle_XXXXXX";
	if (!mkdtemp(dir))
		HARD_ERROR("mkdtemp");
	char prefix[64];
	snprintf(prefix, sizeof prefix, "%s/p", dir);

	traffic("before profiling");
	for (int session = 0; session < 3; session++) {
		int rc = start(prefix);
		if (rc)
			fprintf(stderr, "heapalloc_profile_start = %d\n", rc);
		CHECK_EQ(rc, 0);
		verify_all("just after start");
		traffic("profiling");
		traffic("profiling, again");
		stop();
		verify_all("just after stop");
		traffic("after stop");
	}
	for (int i = 0; i < N; i++)
		free(blk[i]);
	/* leave nothing behind */
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "note: could not remove %s\n", dir);
	return CHECK_DONE();
}
