/* bench/calib.c — a database-shaped heap for bench/calibration: several
 * top sites of different sizes and lifetimes, allocated interleaved as a
 * table is loaded (pages, cells, keys and row records kept, scratch buffers
 * and most rows freed, a few big blocks).  Every size is a heapalloc size
 * class (or over 32 KiB), so requested bytes are the bytes a sampled
 * profile counts, and the truth per site is known by construction: it is
 * printed on stdout, one line per site, "site inuse_bytes alloc_bytes".
 * Usage: calib [SCALE] (default 1: ~56 MB in use, ~318 MB allocated).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *keep[2000000];
static size_t nkeep;
static void *volatile sink;

struct site { const char *name; size_t size; unsigned long long n, kept; };
static struct site sites[] = {
	{ "cal_page", 1152, 0, 0 },     /* one per 25 rows, kept */
	{ "cal_cell", 96, 0, 0 },       /* one per 5 rows, kept */
	{ "cal_key", 48, 0, 0 },        /* one per 5 rows, every other freed */
	{ "cal_row", 160, 0, 0 },       /* one per row, one in 20 kept */
	{ "cal_scratch", 6144, 0, 0 },  /* one per 25 rows, freed */
	{ "cal_stmt", 2560, 0, 0 },     /* one per 250 rows, kept */
	{ "cal_big", 98304, 0, 0 },     /* one per 2500 rows, one in 8 kept */
};
enum { PAGE, CELL, KEY, ROW, SCRATCH, STMT, BIG, NSITES };

static void take(int s, void *p, int kept)
{
	if (!p) {
		fprintf(stderr, "calib: out of memory\n");
		exit(1);
	}
	memset(p, 1, 16);
	sites[s].n++;
	if (kept) {
		sites[s].kept++;
		keep[nkeep++] = p;
	} else {
		sink = p;
		free(p);
	}
}

/* each site a function of its own name: not inlined, not cloned for its
 * constant argument (a clone's name would not be the site's) */
#if defined(__clang__)
#define SITE_ATTR __attribute__((noinline))
#else
#define SITE_ATTR __attribute__((noinline, noipa))
#endif
#define SITE(fn, s) \
	SITE_ATTR static void fn(int kept) { take(s, malloc(sites[s].size), kept); }
SITE(cal_page, PAGE)
SITE(cal_cell, CELL)
SITE(cal_key, KEY)
SITE(cal_row, ROW)
SITE(cal_scratch, SCRATCH)
SITE(cal_stmt, STMT)
SITE(cal_big, BIG)

int main(int argc, char **argv)
{
	long scale = argc > 1 ? atol(argv[1]) : 1;
	long rows = 600000 * (scale > 0 ? scale : 1);
	if (rows / 20 + rows / 25 + rows / 5 * 2 + rows / 250 + rows / 2500 > (long)(sizeof keep / sizeof keep[0])) {
		fprintf(stderr, "calib: scale too large\n");
		return 2;
	}
	for (long r = 0; r < rows; r++) {
		cal_row(r % 20 == 0);
		if (r % 5 == 0) {
			cal_cell(1);
			cal_key(r % 10 == 0);
		}
		if (r % 25 == 0) {
			cal_scratch(0);
			cal_page(1);
		}
		if (r % 250 == 0)
			cal_stmt(1);
		if (r % 2500 == 0)
			cal_big(r % 20000 == 0);
	}
	for (int s = 0; s < NSITES; s++)
		printf("%s %llu %llu\n", sites[s].name, sites[s].kept * sites[s].size,
		       sites[s].n * sites[s].size);
	return 0;
}
