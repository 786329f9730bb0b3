/* tests/integration/prof_gperf.c — a fixed malloc/realloc/free pattern for
 * prof_gperf.sh, which runs it under gperftools' heap profiler and under
 * heapalloc's compatibility mode and compares their dump points.  Linked
 * with neither: each is preloaded.  No stdio, no other allocation: the two
 * must see the very same calls.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 64
#define STEPS 6000

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static unsigned next(unsigned mod)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % mod);
}

int main(void)
{
	void *slot[SLOTS] = { 0 };
	size_t len[SLOTS] = { 0 };
	for (int i = 0; i < STEPS; i++) {
		unsigned k = next(SLOTS), what = next(8);
		if (!slot[k]) {
			/* mostly small, now and then a big one */
			len[k] = what == 0 ? 20000 + next(60000) : 1 + next(3000);
			slot[k] = malloc(len[k]);
		} else if (what < 3) {
			/* grow or shrink: a free plus an allocation to both.  Far
			 * enough that the block moves in both (each decides "in
			 * place" by its own size classes, and in place reports the
			 * free first, a move the allocation first). */
			len[k] = what == 0 ? len[k] / 3 + 1 : 2 * len[k] + 1 + next(400);
			if (len[k] > 200000)
				len[k] = 1 + next(3000);
			slot[k] = realloc(slot[k], len[k]);
		} else {
			free(slot[k]);
			slot[k] = NULL;
			continue;
		}
		if (!slot[k])
			return 1;
		memset(slot[k], (int)i, len[k]);
	}
	for (int k = 0; k < SLOTS; k++)
		free(slot[k]);
	return 0;
}
