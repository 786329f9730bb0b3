/* prof/capture/ages.c — how old live sampled memory is and how long freed sampled
 * memory lived.
 *
 * Owns the clock of both (one CLOCK_MONOTONIC read per sample and one per
 * sampled free, never on the fast path), the lifetime bins each bucket
 * counts freed bytes in, and a dump's copy of the live samples' times
 * (object_map.c keeps each with its slot).  pprof.c turns them into the
 * numeric labels `age` (seconds) and `lifetime` (nanoseconds) of the in-use
 * profile: docs/heap-profile-spec.md, "Ages and lifetimes".
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "prof/heapsort.h"
#include "prof/prof.h"

uint64_t ha_age_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Bin i >= 1 holds lifetimes in [1e(i+2), 1e(i+3)) ns: 1 us .. 1e14 ns
 * (27.8 h) in decades, with everything shorter in bin 0 and longer in the
 * last. */
static const uint64_t upper[HA_LIFE_BINS - 1] = {
	1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull, 100000000ull,
	1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
	10000000000000ull, 100000000000000ull,
};
static const char *const range[HA_LIFE_BINS] = {
	"<1us", "1us-10us", "10us-100us", "100us-1ms", "1ms-10ms", "10ms-100ms",
	"100ms-1s", "1s-10s", "10s-100s", "100s-1000s", "1000s-10000s",
	"10000s-100000s", ">=100000s",
};

/* The bin of the smallest lifetime of each bit length: a bit length spans
 * less than a decade, so the bin is this or the next (one compare, on the
 * sampled free's path). */
static const uint8_t by_bits[65] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 6, 6, 6,
	7, 7, 7, 7, 8, 8, 8, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 12, 12, 12, 12, 12, 12, 12, 12, 12,
	12, 12, 12, 12, 12, 12, 12, 12,
};

unsigned ha_life_bin(uint64_t ns)
{
	unsigned i = by_bits[ns ? 64 - __builtin_clzll(ns) : 0];
	return i + (i < HA_LIFE_BINS - 1 && ns >= upper[i]);
}

void ha_life_add(ha_bucket *b, uint64_t req, uint64_t t)
{
	uint64_t now = ha_age_now();
	__atomic_fetch_add(&b->life[ha_life_bin(now > t ? now - t : 0)], req, __ATOMIC_RELAXED);
}

/* The upper bound less 1 ns: `-tagfocus=lifetime=:1ms` and `=1ms:` then
 * split at a decade exactly. */
uint64_t ha_life_label(unsigned i)
{
	return i < HA_LIFE_BINS - 1 ? upper[i] - 1 : upper[HA_LIFE_BINS - 2];
}

const char *ha_life_range(unsigned i)
{
	return range[i < HA_LIFE_BINS ? i : HA_LIFE_BINS - 1];
}

uint64_t ha_age_seconds(uint64_t now, uint64_t t)
{
	uint64_t s = now > t ? (now - t) / 1000000000u : 0;
	if (s < 4096)
		return s;
	unsigned bits = 64 - (unsigned)__builtin_clzll(s);
	return s & ~(((uint64_t)1 << (bits - 12)) - 1);
}

uint64_t ha_split_part(uint64_t total, uint64_t cum, uint64_t part, uint64_t sum)
{
	if (!sum)
		return 0;
	unsigned __int128 a = (unsigned __int128)total * cum / sum;
	unsigned __int128 b = (unsigned __int128)total * (cum + part) / sum;
	return (uint64_t)(b - a);
}

/* By bucket, then by time (oldest first), for ha_heapsort (no
 * allocation: a dump runs under the profiler's locks). */
static int before(const void *xv, const void *yv)
{
	const ha_agent *x = xv, *y = yv;
	return x->idx != y->idx ? x->idx < y->idx : x->t < y->t;
}

int ha_ages_take(ha_ages *a)
{
	memset(a, 0, sizeof *a);
	uint64_t objs, mem;
	ha_objmap_stats(&objs, &mem);
	/* room for those plus what samples meanwhile add; a few more than
	 * that are left out (their sites' bytes stay without an age) */
	size_t cap = (size_t)objs + objs / 8 + 64;
	a->v = ha_dump_mem(cap * sizeof *a->v);
	if (!a->v)
		return ENOMEM;
	a->now = ha_age_now();
	size_t n = ha_objmap_ages(a->v, cap);
	a->n = n < cap ? n : cap;
	ha_heapsort(a->v, a->n, sizeof *a->v, before);
	return 0;
}

void ha_ages_free(ha_ages *a)
{
	if (a->v)
		ha_dump_mem_free(a->v);
	memset(a, 0, sizeof *a);
}

size_t ha_ages_of(const ha_ages *a, uint32_t idx, size_t *first)
{
	size_t lo = 0, hi = a->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (a->v[mid].idx < idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t e = lo;
	while (e < a->n && a->v[e].idx == idx)
		e++;
	*first = lo;
	return e - lo;
}
