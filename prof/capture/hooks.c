/* prof/capture/hooks.c — the allocator-facing hooks (alloc/hooks.h):
 * ha_prof_sample_distance, ha_prof_sampled(_kept), ha_prof_on_free(_kept),
 * ha_prof_check and ha_prof_turn (ha_prof_poll: usdt.c).  A recorded
 * sample and its free fire the otel_memory probes when a tracer is
 * attached (usdt.c).
 *
 * Countdown contract (alloc/hooks.h): the allocator keeps the countdown and
 * its two budgets; we only draw the distance to the next sample (sampler.c)
 * and, at a check, say how many bytes this thread may allocate and free
 * before the next one: with several threads, the remaining distance to a
 * threshold divided by the number of threads.
 *
 * The sampling path is the hot one: record_sample and sampled are inlined, so the
 * unwinder runs from the hook's own frame and nothing else is called.  Never
 * unwinds while holding a lock; never calls the public malloc while
 * holding one; a thread inside the profiler (ha_prof_busy) is never
 * sampled.  Lock order and fork rules: prof/prof.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include "prof/session/session.h"

/* The bucket this thread's last sample went to (its index + 1; 0 none)
 * and that sample's size: a program samples the same few stacks over and
 * over, and a match (checked frame by frame) needs no hash and no chain.
 * Tried for a sample of the same size only, as another size is most often
 * another bucket (one line per size key). */
static HA_TLS struct { uint32_t bucket; size_t req; } last;

/* Inlined into ha_prof_sampled and ha_prof_sampled_kept so that the
 * unwinder is called from the hook's own frame (prof/prof.h, stack
 * capture).  kept: the allocator keeps the record (the bucket's index + 1
 * goes there), else the object map; either way the map keeps p's time, and
 * for a kept one the bytes asked for (its extent for a leak scan: the
 * class size may run into the next block). */
static inline __attribute__((always_inline)) void record_sample(void *p, size_t req, size_t asked,
								int *sampled, uint32_t *kept)
{
	uintptr_t raw[HA_STACK_RAW];
	int want = ha_stack_want(), at;   /* unwind with no lock held */
	int depth = ha_stack_trim(raw, ha_stack_unwind((void **)raw, want), want,
				  HA_PROF_DEPTH, &at);
	if (HA_UNLIKELY(depth < 0))
		depth = ha_stack_trim(raw, ha_stack_unwind((void **)raw, HA_STACK_RAW),
				      HA_STACK_RAW, HA_PROF_DEPTH, &at);
	if (depth <= 0)
		return;
	const uintptr_t *pcs = raw + at;
	uint64_t t = ha_age_now();    /* the sample's one clock read: its age */
	/* the common case, a known stack: one stripe lock, no table lock */
	uint64_t h = 0;
	uint32_t idx = 0;
	uint32_t hint = req == last.req ? last.bucket : 0;
	int r = kept ? ha_objmap_count((uintptr_t)p, hint, &h, pcs, depth, req, asked, t, &idx)
		     : ha_objmap_record((uintptr_t)p, hint, &h, pcs, depth, req, t, &idx);
	if (HA_LIKELY(r >= 0)) {
		if (r) {
			last.bucket = idx + 1;
			last.req = req;
			*sampled = 1;
			if (kept)
				*kept = idx + 1;
			__atomic_fetch_add(&ha_session.samples, 1, __ATOMIC_RELAXED);
		}
		return;
	}
	ha_table_lock();
	ha_bucket *b = ha_table_record_hashed(h, pcs, depth, req);
	if (b) {
		last.bucket = b->idx + 1;
		last.req = req;
	}
	if (b && kept) {
		ha_objmap_keep((uintptr_t)p, b, asked, t);
		*sampled = 1;
		*kept = b->idx + 1;
		__atomic_fetch_add(&ha_session.samples, 1, __ATOMIC_RELAXED);
	} else if (b) {
		if (ha_objmap_insert((uintptr_t)p, b, req, t) == 0) {
			*sampled = 1;
			__atomic_fetch_add(&ha_session.samples, 1, __ATOMIC_RELAXED);
		} else {            /* no room to remember it: undo the count */
			__atomic_fetch_sub(&b->alloc_count, 1, __ATOMIC_RELAXED);
			__atomic_fetch_sub(&b->alloc_bytes, req, __ATOMIC_RELAXED);
			ha_peak_touch(b);
		}
	}
	ha_table_unlock();
}

int64_t ha_prof_sample_distance(void)
{
	if (HA_UNLIKELY(ha_stack_calibrating()))
		return -1;        /* every probe allocation: ha_prof_sampled learns the frames */
	return ha_sampler_next(ha_prof_rate());
}

static inline __attribute__((always_inline)) int sampled(void *p, size_t req, size_t size,
							  uint32_t *kept)
{
	if (HA_UNLIKELY(ha_stack_calibrating())) {
		ha_stack_calibrate_frame();
		return 0;
	}
	if (ha_prof_busy)
		return 0;
	if (!ha_session.running)      /* sampling for the otel_memory probes alone */
		return ha_usdt_sampled(p, req, size, kept);
	int all = ha_prof_records_all();
	if (all)
		size = req;
	ha_prof_busy = 1;
	int done = 0;
	record_sample(p, size, req, &done, kept);
	if (all && done && !ha_session.compat) {
		__atomic_fetch_add(&ha_session.rec[0], size, __ATOMIC_RELAXED);
		/* the totals see this block only now, after ha_prof_check ran
		 * for it: check the thresholds and arm the peak's turn again
		 * here, so that they fire at the allocation that crosses them;
		 * the allocator's budgets run on to its own next check */
		(void)ha_prof_check_thresholds();
	}
	if (done && HA_UNLIKELY(ha_usdt_alloc_on()))
		ha_usdt_alloc(p, req, size, ha_prof_rate());
	ha_prof_busy = 0;
	return done;
}

/* A sampled block's line counts `size` (the allocated unit: pprof's
 * unsampling then stays unbiased, the chance of a sample following the
 * countdown's charge); recording every allocation needs no unsampling and
 * counts requested bytes, in the lines and in the totals (ha_session.rec,
 * counted here and at the free, where every such block comes back). */
int ha_prof_sampled(void *p, size_t req, size_t size)
{
	int e = errno;   /* a successful allocation leaves errno alone, sampled or not */
	int done = sampled(p, req, size, NULL);
	errno = e;
	return done;
}

uint32_t ha_prof_sampled_kept(void *p, size_t req, size_t size)
{
	uint32_t kept = 0;
	int e = errno;
	sampled(p, req, size, &kept);
	errno = e;
	return kept;
}

void ha_prof_on_free(void *p)
{
	/* forget the object even when this thread is inside the profiler
	 * (its address may come back, and a stale entry would stay "in use"
	 * forever); only the fork window, where we hold every lock, skips */
	if (HA_UNLIKELY(ha_prof_fork_window))
		return;
	uint64_t req;
	int removed = ha_objmap_remove_bytes((uintptr_t)p, &req);
	if (removed && ha_prof_records_all())
		__atomic_fetch_add(&ha_session.rec[1], req, __ATOMIC_RELAXED);
	/* a recorded block, or (no session) one the probes alone sampled */
	if ((removed || !ha_session.running) && HA_UNLIKELY(ha_usdt_free_on()))
		ha_usdt_fire_free(p);
}

void ha_prof_on_free_kept(void *p, uint32_t rec, size_t size, uint32_t session)
{
	if (HA_UNLIKELY(ha_prof_fork_window) || !rec)
		return;
	/* reported at alloc only if sampled in the sampling that still runs */
	if (HA_UNLIKELY(ha_usdt_free_on()) && ha_alloc_session_live(session))
		ha_usdt_fire_free(p);
	if (ha_session.running)       /* else the probes' own record (usdt.c) */
		ha_objmap_free_kept((uintptr_t)p, rec - 1, size, session);
}

void ha_prof_check(int64_t budget[2])
{
	budget[0] = budget[1] = INT64_MAX;
	if (!ha_session.running) {
		ha_usdt_check(budget);    /* sampling for the probes alone */
		return;
	}
	if (ha_prof_busy || ha_prof_fork_window) {
		budget[0] = budget[1] = 0;    /* our own allocation: again at the next */
		return;
	}
	ha_prof_busy = 1;
	ha_budgets b = ha_prof_check_thresholds();
	budget[0] = b.alloc;
	budget[1] = b.freed;      /* INT64_MAX without a deallocation interval */
	ha_prof_busy = 0;
}

/* The peak's turn (prof/session/peak.c): the heap is a step past the peak copy and
 * a free is about to lower it; its block is still in the table and the
 * books.  Any thread; the copy is a pass over the buckets. */
void ha_prof_turn(void)
{
	if (!ha_session.running || ha_prof_busy || ha_prof_fork_window)
		return;
	ha_prof_busy = 1;
	uint64_t t[2];
	ha_prof_totals(t);
	ha_peak_turn(t);
	ha_prof_busy = 0;
}
