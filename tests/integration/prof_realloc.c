/* tests/integration/prof_realloc.c — exact totals across realloc (docs/heap-profile-spec.md §5): a realloc
 * counts as freeing the old block and allocating the new size, whether the
 * block stays in place (grown or shrunk within its size class), moves to
 * another class, or goes large.  One process per sampling interval (every
 * allocation recorded, 4096, the default; options are read at start-up, so
 * the test runs itself again with each in the environment): the totals
 * heapalloc_get_stats reports must grow by exactly the requested bytes,
 * sampled or not, and every block keeps its bytes through each realloc.
 * (Those are compatibility mode, HEAP_PROFILE_EXACT_TOTALS=1.)  Two more
 * processes run in the default mode (R = 4096 and 65536), where a sampled
 * block is a big block: the blocks' bytes, and that a block with room
 * never moves, sampled or not.
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heapalloc.h"
#include "tests/lib/check.h"
#include "tests/lib/prof_util.h"

#define N 2000
static unsigned char *volatile keep[N];

static void fill(unsigned char *p, size_t n, int i)
{
	memset(p, (unsigned char)(i * 7 + 1), n);
}

static int intact(const unsigned char *p, size_t n, int i)
{
	for (size_t k = 0; k < n; k++)
		if (p[k] != (unsigned char)(i * 7 + 1))
			return 0;
	return 1;
}

/* Every block through the sizes in steps[], checking its bytes each time;
 * returns how many reallocs kept the pointer (in place). */
static long walk(const size_t *steps, int nsteps)
{
	long same = 0;
	for (int i = 0; i < N; i++) {
		keep[i] = malloc(steps[0]);
		REQUIRE(keep[i]);
		fill(keep[i], steps[0], i);
	}
	for (int s = 1; s < nsteps; s++)
		for (int i = 0; i < N; i++) {
			unsigned char *q = realloc(keep[i], steps[s]);
			REQUIRE(q);
			size_t kept = steps[s - 1] < steps[s] ? steps[s - 1] : steps[s];
			if (!intact(q, kept, i)) {
				CHECK(!"realloc kept the block's bytes");
				break;
			}
			same += q == keep[i];
			keep[i] = q;
			fill(q, steps[s], i);
		}
	return same;
}

/* Exact totals (else estimated: only the blocks' bytes are checked). */
static int exact_totals = 1;

/* One walk: every block through steps[], half of them freed, then the
 * rest; the exact totals must have grown by exactly the requested bytes. */
static void check_walk(const char *interval, const char *what, const size_t *steps, int ns,
		       long min_same)
{
	uint64_t sum = 0;
	for (int s = 0; s < ns; s++)
		sum += steps[s];
	heapalloc_stats a, b;
	heapalloc_get_stats(&a);
	long same = walk(steps, ns);
	for (int i = 0; i < N; i += 2)       /* free half */
		free(keep[i]);
	heapalloc_get_stats(&b);

	uint64_t want_alloc = (uint64_t)N * sum;
	uint64_t want_free = (uint64_t)N * (sum - steps[ns - 1]) + (uint64_t)(N / 2) * steps[ns - 1];
	fprintf(stderr, "interval %s, %s: %ld of %d reallocs in place, allocated +%llu, freed +%llu\n",
		interval, what, same, N * (ns - 1),
		(unsigned long long)(b.prof_alloc_bytes - a.prof_alloc_bytes),
		(unsigned long long)(b.prof_free_bytes - a.prof_free_bytes));
	if (exact_totals) {
		CHECK_EQ(b.prof_alloc_bytes - a.prof_alloc_bytes, want_alloc);
		CHECK_EQ(b.prof_free_bytes - a.prof_free_bytes, want_free);
	}
	CHECK_GE(same, min_same);
	for (int i = 1; i < N; i += 2) {
		if (!intact(keep[i], steps[ns - 1], i))
			CHECK(!"the last block's bytes are intact");
		free(keep[i]);
	}
	heapalloc_get_stats(&a);
	if (exact_totals)
		CHECK_EQ(a.prof_free_bytes - b.prof_free_bytes, (uint64_t)(N / 2) * steps[ns - 1]);
}

/* Aligned blocks (their header is not at the block's start: flagged in
 * the header's check word, with "sampled"): allocated, reallocated (they
 * move), freed; the totals must move by exactly the requested bytes. */
static void check_aligned(const char *interval)
{
	static const size_t aligns[] = { 32, 64, 256, 4096 };
	static const size_t sizes[] = { 1, 24, 100, 1000, 5000 };
	heapalloc_stats a, b;
	heapalloc_get_stats(&a);
	uint64_t want_alloc = 0, want_free = 0;
	for (int i = 0; i < N; i++) {
		size_t al = aligns[i % 4], n = sizes[(i / 4) % 5];
		void *v = NULL;
		if (i % 3 == 0)
			v = aligned_alloc(al, (n + al - 1) / al * al), n = (n + al - 1) / al * al;
		else
			REQUIRE(posix_memalign(&v, al, n) == 0);
		REQUIRE(v);
		CHECK_EQ((uintptr_t)v % al, 0);
		keep[i] = v;
		fill(keep[i], n, i);
		want_alloc += n;
		if (i % 2) {                  /* every other one: realloc, moved */
			unsigned char *q = realloc(keep[i], n + 40);
			REQUIRE(q);
			if (!intact(q, n, i))
				CHECK(!"realloc kept an aligned block's bytes");
			want_alloc += n + 40;
			want_free += n;
			n += 40;
			keep[i] = q;
			fill(q, n, i);
		}
		free(keep[i]);
		want_free += n;
	}
	heapalloc_get_stats(&b);
	fprintf(stderr, "interval %s, aligned: allocated +%llu, freed +%llu\n", interval,
		(unsigned long long)(b.prof_alloc_bytes - a.prof_alloc_bytes),
		(unsigned long long)(b.prof_free_bytes - a.prof_free_bytes));
	if (exact_totals) {
		CHECK_EQ(b.prof_alloc_bytes - a.prof_alloc_bytes, want_alloc);
		CHECK_EQ(b.prof_free_bytes - a.prof_free_bytes, want_free);
	}
}

/* A string grown a few bytes at a time (the naive append): a realloc to a
 * size the block already holds (malloc_usable_size) stays in place, in
 * every mode, sampled or not.  Counted over 64 strings grown to 12 000
 * bytes. */
static void check_append(const char *interval)
{
	long fitting_moves = 0, worst = 0, total = 0;
	for (int k = 0; k < 64; k++) {
		size_t len = 5;
		unsigned char *p = malloc(len);
		REQUIRE(p);
		memset(p, 'a' + k % 26, len);
		long moves = 0;
		while (len < 12000) {
			size_t n = len + 1 + (size_t)(len * 7 + k) % 13;   /* 1..13 more */
			int fits = n <= malloc_usable_size(p);
			unsigned char *q = realloc(p, n);
			REQUIRE(q);
			for (size_t j = 0; j < len; j++)
				if (q[j] != (unsigned char)('a' + k % 26)) {
					CHECK(!"an appended string kept its bytes");
					j = len;
				}
			memset(q + len, 'a' + k % 26, n - len);
			moves += fits && q != p;
			total++;
			p = q;
			len = n;
		}
		free(p);
		fitting_moves += moves;
		worst = moves > worst ? moves : worst;
	}
	fprintf(stderr, "interval %s, append: %ld of %ld reallocs moved a block that had room "
		"(worst block %ld)\n", interval, fitting_moves, total, worst);
	CHECK_LE(worst, 0);
}

static void session(const char *dir, const char *interval)
{
	char prefix[300];
	snprintf(prefix, sizeof prefix, "%s/r%s", dir, interval);
	const char *got = getenv("HEAP_PROFILE_SAMPLE_INTERVAL");
	REQUIRE(got && strcmp(got, interval) == 0);
	REQUIRE(heapalloc_profile_start(prefix) == 0);

	/* in place (100 -> 104 -> 108 share a class, also with a header),
	 * shrink to another class, grow to another class, go large, come back */
	static const size_t mixed[] = { 100, 104, 108, 40, 3000, 3010, 70000, 20 };
	/* default mode: totals in the allocated unit, checked elsewhere */
	check_walk(interval, "mixed", mixed, (int)(sizeof mixed / sizeof mixed[0]),
		   exact_totals ? N : 0);
	/* 17..32 bytes plus the header share the 48-byte class, whose blocks
	 * straddle pages: some pointers sit at a page's first byte, where the
	 * header may not be read before the block is found */
	static const size_t small[] = { 32, 20, 24, 17, 31 };
	check_walk(interval, "48-byte class", small, (int)(sizeof small / sizeof small[0]),
		   exact_totals ? N : 0);
	check_aligned(interval);
	check_append(interval);
	heapalloc_profile_stop();
}

int main(int argc, char **argv)
{
	if (getenv("HEAPPROFILE"))
		SKIP("HEAPPROFILE is set");
	if (argc == 3) {                     /* one session: dir, interval */
		const char *e = getenv("HEAP_PROFILE_EXACT_TOTALS");
		exact_totals = !(e && strcmp(e, "0") == 0);
		session(argv[1], argv[2]);
		return CHECK_DONE();
	}
	char dir[] = "/tmp/prof_realloc.XXXXXX";
	REQUIRE(mkdtemp(dir));
	/* compatibility mode's exact totals at three intervals; the default
	 * mode (blocks' bytes, no moves) at two */
	static const char *const intervals[] = { "1", "4096", "524288", "4096", "65536" };
	static const char *const exact[] = { "1", "1", "1", "0", "0" };
	for (int k = 0; k < 5; k++) {
		const char *env[] = { "HEAP_PROFILE_EXACT_TOTALS", exact[k],
				      "HEAP_PROFILE_ALLOCATION_INTERVAL", "0",
				      "HEAP_PROFILE_INUSE_INTERVAL", "0", NULL };
		CHECK(rerun_self(argv[0], dir, intervals[k], env));
	}
	CHECK(remove_dir(dir));
	return CHECK_DONE();
}
