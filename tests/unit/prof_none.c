/* tests/unit/prof_none.c — a profiler that does nothing: the other side of
 * alloc/hooks.h for the allocator linked alone (tests/unit), which proves
 * the allocator needs nothing of prof/ but that interface.  Profiling is
 * never switched on there, so these are reached only by the paths that run
 * whatever the mode (threshold checks, mappings, fork). */
#include "alloc/internal.h"

int64_t ha_prof_sample_distance(void)
{
	return HA_COUNTDOWN_OFF;
}

int ha_prof_sampled(void *p, size_t req, size_t size)
{
	return 0;
}

void ha_prof_on_free(void *p)
{
}

uint32_t ha_prof_sampled_kept(void *p, size_t req, size_t size)
{
	return 0;
}

void ha_prof_on_free_kept(void *p, uint32_t rec, size_t size, uint32_t session)
{
}

void ha_prof_poll(void)
{
}

void ha_prof_check(int64_t budget[2])
{
	budget[0] = budget[1] = INT64_MAX;
}

void ha_prof_turn(void)
{
}

int ha_prof_mmap_counts(void)
{
	return 0;
}

uint64_t ha_prof_unmapped(void *p, size_t len)
{
	return 0;
}

void ha_prof_mapped(void *p, size_t len, int sampled)
{
}

void ha_prof_prefork(void)
{
}

void ha_prof_postfork(int child)
{
}
