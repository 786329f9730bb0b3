/* prof/capture/mmap_hook.c — the program's mappings while HEAP_PROFILE_MMAP is on:
 * the profiler's side of alloc/mmap.c.
 *
 * Owns the record of every counted mapping (start, length, sampled), kept
 * by start in one sorted array, so that an unmapped range finds the records
 * it ends.  The kernel caps a process at vm.max_map_count mappings (65530
 * by default), so the array stays small; its memory is raw (ha_raw_*).
 *
 * What a record's end is: the record whose start lies inside an unmapped
 * (or mapped-over, or mremap-moved) range is freed whole, its full length;
 * unmapping only a later part of a mapping (its tail or a hole) frees
 * nothing, and the record keeps its full length until its first page goes.
 * A sampled record is also in the object map under its start, so its free
 * is the profile's (ha_prof_on_free).
 *
 * Lock: map_lock, taken with no other profiler lock held, before the object
 * map's stripe locks (prof.h's order: table lock -> map_lock -> stripes).
 * Every start clears the record: a mapping of an earlier session is not
 * this one's (the books' baseline already holds it).  Never unwinds, never
 * calls the public malloc.
 */
#include <string.h>

#include "prof/prof.h"

typedef struct rec {
	uintptr_t start;
	uint64_t len;             /* bytes the books counted, bit 63: sampled */
} rec;
#define SAMPLED ((uint64_t)1 << 63)

static ha_plock map_lock = HA_PLOCK_INIT;
static rec *recs;
static size_t nrecs, caprecs;

int ha_prof_mmap_counts(void)
{
	if (HA_UNLIKELY(ha_stack_calibrating()))
		return 1;                 /* the probe's mmap teaches its frames */
	return !ha_prof_busy && ha_prof_running() && ha_prof_opt.mmap;
}

/* First record with start >= a. */
static size_t lower(uintptr_t a)
{
	size_t lo = 0, hi = nrecs;
	while (lo < hi) {
		size_t m = lo + (hi - lo) / 2;
		if (recs[m].start < a)
			lo = m + 1;
		else
			hi = m;
	}
	return lo;
}

uint64_t ha_prof_unmapped(void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p, end = a + len < a ? UINTPTR_MAX : a + len;
	uint64_t bytes = 0;
	ha_plock_lock(&map_lock);
	size_t i = lower(a), j = i;
	while (j < nrecs && recs[j].start < end) {
		bytes += recs[j].len & ~SAMPLED;
		if (recs[j].len & SAMPLED)
			ha_prof_on_free((void *)recs[j].start);   /* stripe lock, inside map_lock */
		j++;
	}
	if (j > i) {
		memmove(recs + i, recs + j, (nrecs - j) * sizeof *recs);
		nrecs -= j - i;
	}
	ha_plock_unlock(&map_lock);
	return bytes;
}

void ha_prof_mapped(void *p, size_t len, int sampled)
{
	uintptr_t a = (uintptr_t)p;
	ha_plock_lock(&map_lock);
	if (nrecs == caprecs) {
		size_t cap = caprecs ? caprecs * 2 : 256;
		rec *n = ha_raw_malloc(cap * sizeof *n);
		if (!n) {
			/* no room to remember it: it stays counted allocated and
			 * in use, and a sample stays in the profile */
			ha_plock_unlock(&map_lock);
			return;
		}
		if (recs) {
			memcpy(n, recs, nrecs * sizeof *n);
			ha_raw_free(recs);
		}
		recs = n;
		caprecs = cap;
	}
	size_t i = lower(a);
	memmove(recs + i + 1, recs + i, (nrecs - i) * sizeof *recs);
	recs[i].start = a;
	recs[i].len = (uint64_t)len | (sampled ? SAMPLED : 0);
	nrecs++;
	ha_plock_unlock(&map_lock);
}

void ha_mmaps_reset(void)
{
	ha_plock_lock(&map_lock);
	nrecs = 0;
	ha_plock_unlock(&map_lock);
}

void ha_mmaps_lock(void)
{
	ha_plock_lock(&map_lock);
}

void ha_mmaps_unlock(void)
{
	ha_plock_unlock(&map_lock);
}

void ha_mmaps_postfork_child(void)
{
	ha_plock_init(&map_lock);
}
