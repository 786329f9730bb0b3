/* alloc_info — the introspection and tuning entry points: mallopt accepts
 * glibc's parameters (and ignores what means nothing here), with glibc's
 * return values at the edges; mallinfo2 and
 * mallinfo report numbers that follow live allocations; malloc_stats prints
 * sane text that accounts for a large live block; malloc_trim returns freed
 * memory to the OS (resident set size drops). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* mallinfo */
#endif

static void test_mallopt(void)
{
	/* glibc returns 1 on success for each of these */
	CHECK_EQ(mallopt(M_MXFAST, 64), 1);
	CHECK_EQ(mallopt(M_TRIM_THRESHOLD, 256 * 1024), 1);
	CHECK_EQ(mallopt(M_TOP_PAD, 64 * 1024), 1);
	CHECK_EQ(mallopt(M_MMAP_THRESHOLD, 256 * 1024), 1);
	CHECK_EQ(mallopt(M_MMAP_MAX, 65536), 1);
	CHECK_EQ(mallopt(M_ARENA_MAX, 8), 1);
	CHECK_EQ(mallopt(M_ARENA_TEST, 8), 1);
	CHECK_EQ(mallopt(M_PERTURB, 0), 1);
	CHECK_EQ(mallopt(M_CHECK_ACTION, 3), 1);
	/* glibc's edges: a parameter it does not know is accepted (1); M_MXFAST
	 * beyond its maximum (80 * sizeof(size_t) / 4) is refused (0) */
	CHECK_EQ(mallopt(99, 1), 1);
	CHECK_EQ(mallopt(-42, 1), 1);
	CHECK_EQ(mallopt(M_MXFAST, 1000), 0);
	CHECK_EQ(mallopt(M_MXFAST, 64), 1);
	/* and the allocator still works */
	void *p = malloc(1000), *q = malloc(1 << 20);
	CHECK(p != NULL && q != NULL);
	free(p);
	free(q);
}

/* glibc's meaning of the fields: uordblks = bytes in use in the heap proper,
 * hblkhd/hblks = bytes/number of big (mmapped) blocks, kept apart, so that
 * uordblks + hblkhd is the total in use (a common idiom) and
 * uordblks + fordblks == arena.  Small blocks must move uordblks, big ones
 * hblkhd, neither both. */
static void test_mallinfo(void)
{
	enum { N = 1000, SMALL = 10000, NBIG = 8, BIG = 8 << 20 };
	static void *v[N];
	void *big[NBIG];
	const long long slack = 1 << 20;

	struct mallinfo2 m0 = mallinfo2();
	struct mallinfo i0 = mallinfo();
	for (int i = 0; i < N; i++) {
		v[i] = malloc(SMALL);
		REQUIRE(v[i] != NULL);
		memset(v[i], 1, SMALL);
	}
	struct mallinfo2 m1 = mallinfo2();
	long long small = (long long)N * SMALL;
	long long du = (long long)m1.uordblks - (long long)m0.uordblks;
	long long dh = (long long)m1.hblkhd - (long long)m0.hblkhd;
	if (du < small || du > small + small / 4 + slack || dh > slack)
		fprintf(stderr, "after %lld bytes of 10000-byte blocks: uordblks %+lld, hblkhd %+lld\n",
			small, du, dh);
	CHECK_GE(du, small);
	CHECK_LE(du, small + small / 4 + slack);
	CHECK_LE(dh, slack);
	CHECK_LE(m1.uordblks, m1.arena); /* in use within the heap's system bytes */

	for (int i = 0; i < NBIG; i++) {
		big[i] = malloc(BIG);
		REQUIRE(big[i] != NULL);
		memset(big[i], 2, BIG);
	}
	struct mallinfo2 m2 = mallinfo2();
	struct mallinfo i2 = mallinfo();
	long long large = (long long)NBIG * BIG;
	du = (long long)m2.uordblks - (long long)m1.uordblks;
	dh = (long long)m2.hblkhd - (long long)m1.hblkhd;
	long long dsum = du + dh;
	if (dh < large || dsum > large + large / 4 + slack)
		fprintf(stderr, "after %lld bytes of 8 MiB blocks: uordblks %+lld, hblkhd %+lld "
			"(uordblks + hblkhd %+lld)\n", large, du, dh, dsum);
	CHECK_GE(dh, large);
	CHECK_LE(dsum, large + large / 4 + slack); /* counted once, not in both */
	CHECK_GE((long long)m2.hblks - (long long)m1.hblks, NBIG);
	CHECK_GE(m2.uordblks + m2.fordblks + m2.hblkhd, small + large);
	/* the int version moves the same way (values are < 2 GiB here) */
	CHECK_GE((long long)i2.hblkhd - i0.hblkhd, large);
	CHECK_GE((long long)i2.uordblks - i0.uordblks, small);

	for (int i = 0; i < N; i++)
		free(v[i]);
	for (int i = 0; i < NBIG; i++)
		free(big[i]);
	struct mallinfo2 m3 = mallinfo2();
	long long before = (long long)(m2.uordblks + m2.hblkhd), after = (long long)(m3.uordblks + m3.hblkhd);
	if (after > before - (small + large) / 2)
		fprintf(stderr, "mallinfo2 uordblks + hblkhd: %lld live, %lld after freeing %lld\n",
			before, after, small + large);
	CHECK_LE(after, before - (small + large) / 2);
}

/* Run malloc_stats() with stderr sent to a temporary file; return its text. */
static char *stats_text(void)
{
	char path[] = "/tmp/alloc_info_XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		HARD_ERROR("mkstemp");
	unlink(path);
	fflush(stderr);
	int saved = dup(2);
	dup2(fd, 2);
	malloc_stats();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	off_t n = lseek(fd, 0, SEEK_END);
	char *buf = calloc(1, (size_t)n + 1);
	REQUIRE(buf != NULL);
	if (n > 0 && pread(fd, buf, (size_t)n, 0) != n)
		HARD_ERROR("pread");
	close(fd);
	return buf;
}

static void test_malloc_stats(void)
{
	enum { BIG = 50 << 20 };
	char *big = malloc(BIG);
	REQUIRE(big != NULL);
	memset(big, 3, BIG);
	char *t = stats_text();
	size_t len = strlen(t);
	CHECK(len > 0);
	CHECK(len < 65536);
	int printable = 1;
	for (size_t i = 0; i < len; i++)
		if (!((t[i] >= 32 && t[i] < 127) || t[i] == '\n' || t[i] == '\t'))
			printable = 0;
	CHECK(printable);
	CHECK(len > 0 && t[len - 1] == '\n');
	/* some number in the report accounts for the 50 MiB block */
	unsigned long long biggest = 0;
	for (const char *s = t; *s; s++)
		if (*s >= '0' && *s <= '9' && (s == t || s[-1] < '0' || s[-1] > '9')) {
			unsigned long long v = strtoull(s, NULL, 10);
			if (v > biggest)
				biggest = v;
		}
	if (biggest < BIG)
		fprintf(stderr, "malloc_stats output (no number >= %d):\n%s\n", BIG, t);
	CHECK_GE(biggest, BIG);
	free(t);
	free(big);
}

static void test_malloc_trim(void)
{
	/* 96 MiB in 4 KiB blocks; keep one in 64 so the heap cannot just shrink
	 * from the top, free the rest: malloc_trim must give most pages back. */
	enum { N = 96 * 256, BS = 4096 };
	static void *v[N];
	for (int i = 0; i < N; i++) {
		v[i] = malloc(BS);
		REQUIRE(v[i] != NULL);
		memset(v[i], 0x5a, BS);
	}
	long full = rss_kib();
	for (int i = 0; i < N; i++)
		if (i % 64)
			free(v[i]);
	int rc = malloc_trim(0);
	CHECK(rc == 0 || rc == 1);
	long trimmed = rss_kib();
	if (full < 0 || trimmed < 0)
		HARD_ERROR("cannot read VmRSS");
	long freed_kib = (long)N * 63 / 64 * BS / 1024;
	if (full - trimmed < freed_kib / 2)
		fprintf(stderr, "RSS %ld KiB with 96 MiB live, %ld KiB after freeing %ld KiB and malloc_trim(0) = %d\n",
			full, trimmed, freed_kib, rc);
	CHECK_GE(full - trimmed, freed_kib / 2);
	for (int i = 0; i < N; i += 64)
		free(v[i]);
	/* the pad argument is accepted too */
	rc = malloc_trim(1 << 20);
	CHECK(rc == 0 || rc == 1);
}

int main(void)
{
	test_mallopt();
	test_mallinfo();
	test_malloc_stats();
	test_malloc_trim();
	return CHECK_DONE();
}
