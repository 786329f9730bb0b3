/* tests/stress/names_fds.c — the program of tests/stress/names_fds.sh: profiles named in
 * the process (heapalloc_profile_pprof, preloaded, every allocation
 * recorded) while the descriptors run out, and after.
 *   names_fds OUTDIR LIBA LIBB
 * OUTDIR/p1.pb.gz  every descriptor taken before the first named profile:
 *                  neither zlib nor the symboliser can be loaded
 * OUTDIR/p2.pb.gz  descriptors back: gzip, fdt_main_site named
 * OUTDIR/p3.pb.gz  one descriptor left (the profile reads /proc/self/maps
 *                  with it), then fdt_site_a and fdt_site_b (LIBA, LIBB,
 *                  loaded before) allocate: the first new file the symboliser
 *                  opens takes it, the others cannot be opened
 * OUTDIR/p4.pb.gz  descriptors back: both named
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

void *volatile keep[32];

__attribute__((noinline)) void fdt_main_site(void)
{
	for (int i = 0; i < 8; i++)
		keep[i] = malloc(3000);
}

static int (*take)(void **, size_t *);
static void *buf[4];
static size_t len[4];
static int fill[512], nfill;

/* Every descriptor under the soft limit taken (/dev/null), but `leave`. */
static void exhaust(int leave)
{
	int fd;
	while (nfill < 512 && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		fill[nfill++] = fd;
	while (leave-- > 0 && nfill)
		close(fill[--nfill]);
}

static void restore(void)
{
	while (nfill)
		close(fill[--nfill]);
}

static void *site_of(const char *lib, const char *name)
{
	void *h = dlopen(lib, RTLD_NOW);
	void *f = h ? dlsym(h, name) : NULL;
	if (!f) {
		fprintf(stderr, "names_fds: %s: %s\n", lib, dlerror());
		exit(99);
	}
	return f;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 99;
	take = (int (*)(void **, size_t *))dlsym(RTLD_DEFAULT, "heapalloc_profile_pprof");
	struct rlimit rl = { 256, 256 };
	if (!take || setrlimit(RLIMIT_NOFILE, &rl) != 0) {
		fprintf(stderr, "names_fds: no heapalloc_profile_pprof, or no limit of 256 descriptors\n");
		return 99;
	}
	fdt_main_site();
	exhaust(0);
	int e1 = take(&buf[0], &len[0]);
	restore();
	int e2 = take(&buf[1], &len[1]);
	void *(*site_a)(size_t) = (void *(*)(size_t))site_of(argv[2], "fdt_site_a");
	void *(*site_b)(size_t) = (void *(*)(size_t))site_of(argv[3], "fdt_site_b");
	exhaust(1);
	for (int i = 0; i < 8; i++) {
		keep[8 + i] = site_a(5000);
		keep[16 + i] = site_b(7000);
	}
	int e3 = take(&buf[2], &len[2]);
	restore();
	int e4 = take(&buf[3], &len[3]);
	int errs[4] = { e1, e2, e3, e4 };
	for (int k = 0; k < 4; k++) {
		char p[4096];
		snprintf(p, sizeof p, "%s/p%d.pb.gz", argv[1], k + 1);
		FILE *f = errs[k] ? NULL : fopen(p, "wb");
		if (!f || fwrite(buf[k], 1, len[k], f) != len[k] || fclose(f) != 0) {
			fprintf(stderr, "names_fds: profile %d: error %d, or %s not written\n", k + 1,
				errs[k], p);
			return 99;
		}
		free(buf[k]);
	}
	return 0;
}
