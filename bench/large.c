/* large — "malloc-large": free and re-allocate big blocks of several MiB.
 *
 * SLOTS slots each hold one block of 5–25 MiB.  Each step frees a random slot
 * and allocates a new block of a random size, writing one byte per 4 KiB page
 * (a program uses the buffer it asked for).  An allocator that unmaps every
 * freed big block and maps a fresh one pays page faults and zeroing on every
 * step; one that reuses the address space does not.  (Debian's mimalloc 2.0.9
 * is known to be slow here.)
 * Prints "allocs_per_sec <big allocations per second>".
 * argv[1]: scale in percent.
 */
#include "bench.h"

#define SLOTS 20
#define MiB ((size_t)1 << 20)

int main(int argc, char **argv)
{
	long steps = (long)(500 * bench_scale(argc, argv));
	uint64_t seed = 99;
	char *slot[SLOTS] = { 0 };
	size_t len[SLOTS] = { 0 };

	bench_print_allocator();
	double t0 = bench_now();
	for (long k = 0; k < steps; k++) {
		int i = (int)(bench_rand(&seed) % SLOTS);
		free(slot[i]);
		len[i] = bench_range(&seed, 5 * MiB, 25 * MiB);
		slot[i] = malloc(len[i]);
		if (!slot[i]) {
			fprintf(stderr, "large: malloc(%zu) failed\n", len[i]);
			return 1;
		}
		for (size_t off = 0; off < len[i]; off += 4096)
			slot[i][off] = (char)k;
		slot[i][len[i] - 1] = (char)k;
	}
	double t = bench_now() - t0;
	for (int i = 0; i < SLOTS; i++)
		free(slot[i]);
	printf("allocs_per_sec %.0f\n", (double)steps / t);
	return 0;
}
