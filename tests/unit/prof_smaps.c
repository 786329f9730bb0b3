/* tests/unit/prof_smaps.c — unit tier for prof/output/stats.c's walk of
 * /proc/self/smaps: the walk that jumps from each mapping's header to its
 * Rss and past its VmFlags must find exactly what reading every line finds
 * (the largest resident mappings by path), whatever read boundaries split
 * the records, and a file without VmFlags lines must fall back to reading
 * every line.  The input: this process's own smaps with 120 mapped files
 * of long names, each with a known number of pages touched, saved to a
 * file and shifted by a padding line of varying length.
 * stats.c's test build is linked in (its statics: prof/unit.h); what it
 * would write through is stubbed (never called here).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "heapalloc.h"
#include "prof/unit.h"
#include "tests/lib/check.h"

/* stats.c's outputs, not used by the walk */
void heapalloc_get_stats_size(heapalloc_stats *s, size_t size) { abort(); }
void ha_huge_stats(uint64_t *b, uint64_t *bytes, uint64_t *cached) { abort(); }
uint64_t ha_arena_committed(void) { abort(); }
uint64_t ha_peak_bytes(void) { abort(); }
uint64_t ha_peak_high(void) { abort(); }
uint64_t ha_table_raw_bytes(void) { abort(); }
void ha_alloc_resident_read(ha_alloc_resident *r) { abort(); }
unsigned ha_alloc_arena_ranges(uintptr_t (*out)[2], unsigned cap) { return 0; }
int ha_write_file(const char *path, void (*fill)(ha_out *, void *), void *arg) { abort(); }
void ha_out_bytes(ha_out *o, const char *s, size_t n) { abort(); }
void ha_out_str(ha_out *o, const char *s) { abort(); }
void ha_out_u64(ha_out *o, uint64_t v, int width) { abort(); }
int ha_snprintf(char *buf, size_t cap, const char *fmt, ...) { abort(); }
void ha_alloc_view_read(ha_alloc_view *v) { abort(); }
void ha_books(uint64_t out[2], uint64_t req[2]) { abort(); }
int64_t ha_prof_r;   /* ha_prof_rate() is inline; never read here */
int ha_prof_compat(void) { abort(); }

#define FILES 120
#define PAGE 4096

static char dir[] = "/tmp/ha_smaps_XXXXXX";

/* The top regions of file `path`: walked fast, or line by line. */
static void top_of(const char *path, int fast, ha_proc_mem *m)
{
	memset(m, 0, sizeof *m);
	int fd = open(path, O_RDONLY);
	REQUIRE(fd >= 0);
	if (fast)
		smaps_walk(fd, m);
	else
		each_line(fd, smaps_line, m);
	close(fd);
	if (m->have_cur)
		keep_top(m, &m->cur);
}

static int same_top(const ha_proc_mem *a, const ha_proc_mem *b)
{
	for (int i = 0; i < HA_STATS_TOP; i++)
		if (a->top[i].rss != b->top[i].rss || strcmp(a->top[i].path, b->top[i].path))
			return 0;
	return 1;
}

/* Write text (n bytes) after a padding line of `pad` bytes to path; with
 * strip, leave out every VmFlags line. */
static void save(const char *path, const char *text, size_t n, int pad, int strip)
{
	FILE *f = fopen(path, "w");
	REQUIRE(f != NULL);
	if (pad) {
		/* a mapping of its own: header with a path of pad bytes, no Rss */
		fprintf(f, "7f0000000000-7f0000001000 r--p 00000000 00:00 0 ");
		for (int i = 0; i < pad; i++)
			fputc('p', f);
		fputc('\n', f);
		fprintf(f, "Size:                  4 kB\nRss:                   0 kB\n");
		if (!strip)
			fprintf(f, "VmFlags: rd mr mw me\n");
	}
	for (size_t i = 0; i < n;) {
		const char *nl = memchr(text + i, '\n', n - i);
		size_t len = nl ? (size_t)(nl - (text + i)) + 1 : n - i;
		if (!(strip && len > 8 && memcmp(text + i, "VmFlags:", 8) == 0))
			fwrite(text + i, 1, len, f);
		i += len;
	}
	REQUIRE(fclose(f) == 0);
}

int main(void)
{
	REQUIRE(mkdtemp(dir) != NULL);
	char path[400], big[512];
	/* files of long names, file i with i % 9 + 1 pages read; one of 600 */
	for (int i = 0; i < FILES; i++) {
		snprintf(path, sizeof path, "%s/mapped_file_with_a_rather_long_name_to_fill_the_"
			 "header_line_%03d_%0*d", dir, i, 20 + i % 50, i);
		int pages = i == 57 ? 600 : i % 9 + 1;
		int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		REQUIRE(fd >= 0);
		REQUIRE(ftruncate(fd, (off_t)pages * PAGE) == 0);
		volatile char *p = mmap(NULL, (size_t)pages * PAGE, PROT_READ, MAP_SHARED, fd, 0);
		REQUIRE(p != MAP_FAILED);
		for (int k = 0; k < pages; k++)
			(void)p[k * PAGE];
		close(fd);
		unlink(path);   /* the mapping keeps it; smaps names it "(deleted)" */
		if (i == 57)
			snprintf(big, sizeof big, "%s (deleted)", path);
	}

	/* this process's smaps, as the kernel gives it */
	static char text[4 << 20];
	size_t n = 0;
	int fd = open("/proc/self/smaps", O_RDONLY);
	REQUIRE(fd >= 0);
	for (ssize_t r; (r = read(fd, text + n, sizeof text - n)) > 0;)
		n += (size_t)r;
	close(fd);
	REQUIRE(n > 0 && n < sizeof text);
	CHECK(memmem(text, n, "\nVmFlags:", 9) != NULL);

	char file[600];
	snprintf(file, sizeof file, "%s/smaps", dir);
	ha_proc_mem fast, slow;
	int runs = 0, differ = 0;
	for (int strip = 0; strip < 2; strip++)
		for (int pad = 0; pad < 400; pad++) {
			save(file, text, n, pad, strip);
			top_of(file, 1, &fast);
			top_of(file, 0, &slow);
			if (!same_top(&fast, &slow)) {
				fprintf(stderr, "pad %d strip %d: the walks differ\n", pad, strip);
				for (int i = 0; i < HA_STATS_TOP; i++)
					fprintf(stderr, "  %10llu %-40.40s  %10llu %-40.40s\n",
						(unsigned long long)fast.top[i].rss, fast.top[i].path,
						(unsigned long long)slow.top[i].rss, slow.top[i].path);
				CHECK(0);
				differ++;
			}
			/* the 600-page file is among the largest, exactly */
			int found = 0;
			for (int i = 0; i < HA_STATS_TOP; i++)
				if (strncmp(fast.top[i].path, big, HA_STATS_PATH_CAP - 1) == 0) {
					found = 1;
					CHECK_EQ(fast.top[i].rss, (uint64_t)600 * PAGE);
				}
			CHECK(found);
			runs++;
		}
	unlink(file);
	rmdir(dir);
	printf("%d walks of %zu bytes of smaps, %d differ from reading every line\n", runs, n,
	       differ);
	return ck_failures ? 1 : 0;
}
