/* frag — fragmentation: waves of mixed sizes, most of each wave freed.
 *
 * Each wave allocates BLOCKS blocks and fills them; even waves are mostly
 * small (16–256 B, some 1–4 KiB), odd waves mostly medium (256 B–32 KiB).
 * Then 90% of the wave is freed in random order and 10% survives, scattered
 * through the memory the wave used; the oldest survivors are freed once more
 * than SURVIVORS are alive.  An allocator that cannot reuse the holes, or
 * that keeps freed spans to itself, shows it in peak and final RSS.
 * Prints "live_peak_kib", "live_final_kib" (bytes the program holds) and
 * "final_rss_kib" (resident size at the end, survivors still live); bench/run
 * measures the peak RSS.
 * argv[1]: scale in percent.
 */
#include "bench.h"

#define BLOCKS 40000
#define SURVIVORS 20000

struct blk { char *p; size_t n; };

int main(int argc, char **argv)
{
	double scale = bench_scale(argc, argv);
	int waves = (int)(16 * scale);
	uint64_t seed = 7;
	static struct blk wave[BLOCKS], surv[SURVIVORS];
	long nsurv = 0, oldest = 0; /* surv is a ring: [oldest, oldest+nsurv) */
	size_t live = 0, live_peak = 0;

	/* Small scales (quick mode, smoke runs) also shrink the waves. */
	int nblocks = scale >= 0.25 ? BLOCKS : (int)(BLOCKS * scale * 4);
	if (waves < 2)
		waves = 2;
	if (nblocks < 1000)
		nblocks = 1000;
	bench_print_allocator();
	for (int w = 0; w < waves; w++) {
		for (int i = 0; i < nblocks; i++) {
			unsigned r = (unsigned)(bench_rand(&seed) % 100);
			size_t n;
			if (w % 2 == 0)
				n = r < 90 ? bench_range(&seed, 16, 256) : bench_range(&seed, 1024, 4096);
			else
				n = r < 70 ? bench_range(&seed, 256, 4096) : bench_range(&seed, 4097, 32768);
			wave[i].p = malloc(n);
			wave[i].n = n;
			memset(wave[i].p, w, n);
			live += n;
		}
		if (live > live_peak)
			live_peak = live;
		/* Shuffle, keep the first 10%, free the rest. */
		for (int i = nblocks - 1; i > 0; i--) {
			int j = (int)(bench_rand(&seed) % (uint64_t)(i + 1));
			struct blk t = wave[i];
			wave[i] = wave[j];
			wave[j] = t;
		}
		for (int i = nblocks / 10; i < nblocks; i++) {
			free(wave[i].p);
			live -= wave[i].n;
		}
		for (int i = 0; i < nblocks / 10; i++) {
			if (nsurv == SURVIVORS) {
				struct blk *o = &surv[oldest];
				if (o->p[0] != (char)o->p[o->n - 1]) {
					fprintf(stderr, "frag: a surviving block changed\n");
					return 1;
				}
				free(o->p);
				live -= o->n;
				oldest = (oldest + 1) % SURVIVORS;
				nsurv--;
			}
			surv[(oldest + nsurv) % SURVIVORS] = wave[i];
			nsurv++;
		}
	}
	printf("live_peak_kib %zu\n", live_peak / 1024);
	printf("live_final_kib %zu\n", live / 1024);
	printf("final_rss_kib %ld\n", bench_rss_kib());
	for (long i = 0; i < nsurv; i++)
		free(surv[(oldest + i) % SURVIVORS].p);
	return 0;
}
