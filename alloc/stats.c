/* alloc/stats.c — the statistics and tuning calls of the malloc family:
 * malloc_trim, mallopt, mallinfo, mallinfo2, malloc_stats, and the
 * allocator's half of heapalloc_get_stats, and the read-only views the
 * profiler takes (alloc/hooks.h).
 */
#include "config.h"
#include "alloc/internal.h"
#include "heapalloc.h"
#include <malloc.h>
#include <string.h>

HA_EXPORT int malloc_trim(size_t pad)
{
	(void)pad;
	ha_ensure_init();
	uint64_t before, after, x, y;
	ha_central_stats(&x, &before, &y);
	ha_tcache_flush_self();
	ha_central_trim();
	size_t huge = ha_huge_trim();
	ha_arena_trim();
	ha_central_stats(&x, &after, &y);
	return huge > 0 || after < before;
}

/* glibc's answers: 1 for every parameter, known or not, except M_MXFAST
 * beyond glibc's 160-byte limit; heapalloc has none of these knobs. */
HA_EXPORT int mallopt(int param, int value)
{
	if (param == M_MXFAST && (value < 0 || value > 160))
		return 0;
	return 1;
}

static void fill_info2(struct mallinfo2 *mi)
{
	uint64_t spans, span_bytes, span_free, lblocks, lbytes, tcb, hblocks, hbytes, hcached;
	ha_ensure_init();
	ha_central_stats(&spans, &span_bytes, &span_free);
	ha_arena_stats(&lblocks, &lbytes);
	ha_huge_stats(&hblocks, &hbytes, &hcached);
	ha_tcache_count(&tcb);
	memset(mi, 0, sizeof *mi);
	/* glibc's meaning: arena and uordblks for the heap proper (spans and
	 * mimalloc's large blocks), hblks/hblkhd for separately mapped blocks
	 * (huge), never both */
	mi->arena = span_bytes + lbytes + hcached;
	mi->ordblks = spans + lblocks;
	mi->hblks = hblocks;
	mi->hblkhd = hbytes;
	mi->fsmblks = tcb;
	mi->fordblks = span_free + tcb + hcached;
	mi->keepcost = hcached;
	mi->uordblks = span_bytes > span_free + tcb ? span_bytes - span_free - tcb + lbytes : lbytes;
}

void ha_alloc_stats(heapalloc_stats *out)
{
	uint64_t hb, hbytes, hcached, tcb;
	ha_ensure_init();
	ha_books_publish(&ha_tc, 1);   /* the caller's own cache, exact */
	out->mallocs = __atomic_load_n(&ha_slow_allocs.v, __ATOMIC_RELAXED);
	ha_central_stats(&out->small_spans, &out->small_span_bytes, &out->small_free_bytes);
	out->thread_caches = ha_tcache_count(&tcb);
	out->thread_cache_bytes = tcb;
	out->small_free_bytes += tcb;
	ha_arena_stats(&out->large_blocks, &out->large_bytes);
	ha_huge_stats(&hb, &hbytes, &hcached);
	out->large_blocks += hb;
	out->large_bytes += hbytes;
	out->metadata_bytes = ha_meta_bytes();
}

HA_EXPORT struct mallinfo2 mallinfo2(void)
{
	struct mallinfo2 mi;
	fill_info2(&mi);
	return mi;
}

static int clamp_int(size_t v)
{
	return v > (size_t)__INT_MAX__ ? __INT_MAX__ : (int)v;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
HA_EXPORT struct mallinfo mallinfo(void)
{
	struct mallinfo2 m2;
	struct mallinfo mi;
	fill_info2(&m2);
	memset(&mi, 0, sizeof mi);
	mi.arena = clamp_int(m2.arena);
	mi.ordblks = clamp_int(m2.ordblks);
	mi.hblks = clamp_int(m2.hblks);
	mi.hblkhd = clamp_int(m2.hblkhd);
	mi.fsmblks = clamp_int(m2.fsmblks);
	mi.uordblks = clamp_int(m2.uordblks);
	mi.fordblks = clamp_int(m2.fordblks);
	mi.keepcost = clamp_int(m2.keepcost);
	return mi;
}
#pragma GCC diagnostic pop

HA_EXPORT void malloc_stats(void)
{
	struct mallinfo2 mi;
	fill_info2(&mi);
	uint64_t tcb, n = ha_tcache_count(&tcb);
	ha_log("heapalloc %s\nsystem bytes     = %10zu\nin use bytes     = %10zu\n"
	       "large blocks     = %10zu (%zu bytes)\nthread caches    = %10llu (%llu bytes)\n"
	       "metadata bytes   = %10llu\n",
	       PACKAGE_VERSION, mi.arena + mi.hblkhd, mi.uordblks, mi.hblks, mi.hblkhd,
	       (unsigned long long)n, (unsigned long long)tcb,
	       (unsigned long long)ha_meta_bytes());
}

/* glibc's internal names, so that static links and libc itself find us. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#define HA_ALIAS(name, target) \
	HA_EXPORT __typeof__(target) name __attribute__((alias(#target), copy(target)))
HA_ALIAS(__libc_mallinfo, mallinfo);
HA_ALIAS(__libc_mallopt, mallopt);

void ha_alloc_view_read(ha_alloc_view *v)
{
	ha_huge_stats(&v->huge_blocks, &v->huge_bytes, &v->huge_cached);
	v->arena_committed = ha_arena_committed();
	ha_central_pool_bytes(&v->span_pool_hot, &v->span_pool_cold);
	ha_arena_cache_bytes(&v->large_cache_hot, &v->large_cache_cold);
}

void ha_alloc_resident_read(ha_alloc_resident *r)
{
	r->huge = ha_huge_resident();
	r->meta = ha_meta_resident();
	r->large_hot = ha_arena_cache_resident();
}

unsigned ha_alloc_threads(void)
{
	return ha_tcache_live();
}

void ha_alloc_free_ranges(ha_free_range_fn *add, void *ctx)
{
	if (ha_locks_held)   /* exit from a handler that interrupted us: wait for nothing */
		return;
	ha_tcache_free_ranges(add, ctx);
	ha_central_free_ranges(add, ctx);
	ha_arena_free_ranges(add, ctx);
}
