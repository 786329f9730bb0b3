/* spike — memory that comes back after a spike: resident memory 1 s and 2 s
 * after a program frees a burst of blocks.
 *
 *   spike [BLOCK_KIB [busy|idle [TOTAL_MIB]]]     (default 100 busy 300)
 *
 * Allocates TOTAL_MIB MiB in blocks of BLOCK_KIB KiB (1000-byte KiB, as a
 * program asking for "100 KB" would: 100 -> 100,000 bytes), writes every
 * page, frees them all, then for 2 s either keeps allocating (busy: a
 * steady churn of 64 live 16-256 B blocks, replaced one at a time, that
 * stays within any thread cache) or sleeps (idle: no allocator call).
 * Prints "key value" lines: RSS in KiB before the burst (base_kib), with
 * the burst live (peak_kib), at once after the free (freed_kib), 1 s and
 * 2 s after it (rss_1s_kib, rss_2s_kib), and, sampled every 50 ms, how
 * long after the free RSS first came within 16 MiB of the base
 * (back_ms; -1: not within 2 s).
 */
#include "bench.h"
#include <fcntl.h>

#define MIB ((size_t)1 << 20)

/* RSS in KiB, read without stdio: an idle run makes no allocator call. */
static long rss_kib(void)
{
	char buf[128];
	long pages = 0, resident = 0;
	int fd = open("/proc/self/statm", O_RDONLY);
	ssize_t got = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
	if (fd >= 0)
		close(fd);
	if (got <= 0)
		return -1;
	buf[got] = 0;
	if (sscanf(buf, "%ld %ld", &pages, &resident) != 2)
		return -1;
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static volatile uint64_t sink;

int main(int argc, char **argv)
{
	size_t block = (size_t)(argc > 1 ? atof(argv[1]) : 100) * 1000;
	int busy = !(argc > 2 && strcmp(argv[2], "idle") == 0);
	size_t total = (size_t)(argc > 3 ? atof(argv[3]) : 300) * MIB;
	if (block < 16 || total < block) {
		fprintf(stderr, "usage: spike [BLOCK_KIB [busy|idle [TOTAL_MIB]]]\n");
		return 2;
	}
	size_t n = total / block;
	char **v = malloc(n * sizeof *v);
	void *live[64] = { 0 };
	uint64_t seed = 0x9E3779B97F4A7C15ull;
	if (!v) {
		fprintf(stderr, "spike: malloc failed\n");
		return 1;
	}
	bench_print_allocator();
	long base = rss_kib();
	for (size_t i = 0; i < n; i++) {
		v[i] = malloc(block);
		if (!v[i]) {
			fprintf(stderr, "spike: malloc(%zu) failed\n", block);
			return 1;
		}
		for (size_t off = 0; off < block; off += 4096)
			v[i][off] = (char)i;
		v[i][block - 1] = 1;
	}
	long peak = rss_kib();
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	double t0 = bench_now(), next = 0;
	long freed = rss_kib(), at1 = -1, at2 = -1, back_ms = -1;
	for (double t = 0; t < 2.0; t = bench_now() - t0) {
		if (t >= next) {
			long r = rss_kib();
			if (back_ms < 0 && r <= base + 16 * 1024)
				back_ms = (long)(t * 1000);
			if (at1 < 0 && t >= 1.0)
				at1 = r;
			next += 0.05;
		}
		if (busy) {
			for (int k = 0; k < 1000; k++) {
				unsigned i = (unsigned)(bench_rand(&seed) & 63);
				free(live[i]);
				live[i] = malloc(bench_range(&seed, 16, 256));
				sink += (uintptr_t)live[i];
			}
		} else {
			struct timespec ts = { 0, 10 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
	at2 = rss_kib();
	if (back_ms < 0 && at2 <= base + 16 * 1024)
		back_ms = 2000;
	for (int i = 0; i < 64; i++)
		free(live[i]);
	free(v);
	printf("block_bytes %zu\n", block);
	printf("mode %s\n", busy ? "busy" : "idle");
	printf("base_kib %ld\n", base);
	printf("peak_kib %ld\n", peak);
	printf("freed_kib %ld\n", freed);
	printf("rss_1s_kib %ld\n", at1);
	printf("rss_2s_kib %ld\n", at2);
	printf("back_ms %ld\n", back_ms);
	return 0;
}
