/* tests/unit/alloc_none.c — an allocator that keeps no books: the other side of
 * alloc/hooks.h for the profiler linked alone (tests/unit/prof_alone),
 * which proves the profiler needs nothing of alloc/ but that interface and
 * the shared helpers (lock.h's count, log.c).  Raw memory is libc's; the
 * books stay empty and nothing is ever sampled (the allocator's side never
 * calls the profiler here).  A check library: built by `make check` only. */
#include <stdlib.h>
#include <string.h>

#include "alloc/hooks.h"
#include "alloc/lock.h"

HA_TLS unsigned ha_locks_held;

void ha_alloc_init(void)
{
}

void *ha_raw_malloc(size_t n)
{
	return malloc(n);
}

void *ha_raw_calloc(size_t n, size_t m)
{
	return calloc(n, m);
}

void ha_raw_free(void *p)
{
	free(p);
}

void ha_alloc_stats(struct heapalloc_stats *out)
{
}

void ha_alloc_view_read(ha_alloc_view *v)
{
	memset(v, 0, sizeof *v);
}

void ha_alloc_resident_read(ha_alloc_resident *r)
{
	memset(r, 0, sizeof *r);
}

unsigned ha_alloc_arena_ranges(uintptr_t (*out)[2], unsigned cap)
{
	return 0;
}

void ha_alloc_free_ranges(ha_free_range_fn *add, void *ctx)
{
}

void ha_alloc_watch_frees(int on)
{
}

unsigned ha_alloc_threads(void)
{
	return 1;
}

static uint64_t no_books[5];

void ha_alloc_books_layout(ha_books_layout *out)
{
	memset(out, 0, sizeof *out);
	out->retired = (uint64_t)(uintptr_t)no_books;
	out->own = (uint64_t)(uintptr_t)no_books;
}

void ha_alloc_profiling(int mode, int record_all)
{
}

void ha_books(uint64_t out[2], uint64_t req[2])
{
	out[0] = out[1] = 0;
	if (req)
		req[0] = req[1] = 0;
}

void ha_books_own_begin(int64_t mark[5])
{
}

void ha_books_own_end(const int64_t mark[5])
{
}

void ha_alloc_mmap_profiling(int on)
{
}

void ha_alloc_call_back_next(void)
{
}

int ha_alloc_session_live(uint32_t session)
{
	return 0;
}

/* no records of its own: nothing for a leak scan to skip */
ha_meta_range ha_meta_ranges[HA_META_RANGES];
uint64_t ha_meta_nranges;
