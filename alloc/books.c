/* alloc/books.c — the allocator's books and the profiling switch.
 *
 * The books count in the allocated unit (a small block's class size, a big
 * block's usable bytes) and only on slow paths:
 *   allocated   drawn - sample_left per thread: every allocation charges the
 *               countdown, so this is exact at no per-operation cost;
 *   in use      small: bytes taken from the central cache less bytes given
 *               back less bytes sitting in thread caches; big: usable bytes
 *               allocated less freed.
 * Freed is allocated - in use.  Each thread publishes its figures in its
 * registry record at its slow paths; readers sum the records and the sums
 * of threads that have exited.  Compatibility mode adds requested bytes
 * allocated and freed, counted at every allocation and free.
 */
#include "alloc/internal.h"

/* books of threads that have exited: allocated, net, big, req alloc, req free */
static uint64_t retired[5];
/* the profiler's own use of malloc (ha_books_own_begin/end): allocated, in
 * use, req alloc, req free; in use wraps when a section frees more than it
 * allocated, as two's complement */
static uint64_t own[4];

static inline void add_own(uint64_t *c, int64_t v)
{
	__atomic_store_n(c, *c + (uint64_t)v, __ATOMIC_RELAXED);
}

void ha_books_alloc(ha_tcache *tc, int64_t bytes)
{
	if (HA_LIKELY(tc->state == 1))
		tc->drawn += bytes;
	else
		__atomic_fetch_add(&retired[0], (uint64_t)bytes, __ATOMIC_RELAXED);
}

void ha_books_big(ha_tcache *tc, int64_t bytes)
{
	if (HA_LIKELY(tc->state == 1 && tc->node))
		add_own(&tc->node->big_bytes, bytes);
	else
		__atomic_fetch_add(&retired[2], (uint64_t)bytes, __ATOMIC_RELAXED);
}

void ha_books_net(ha_tcache *tc, int64_t bytes)
{
	if (HA_LIKELY(tc->state == 1 && tc->node))
		add_own(&tc->node->net_bytes, bytes);
	else
		__atomic_fetch_add(&retired[1], (uint64_t)bytes, __ATOMIC_RELAXED);
}

void ha_books_req(ha_tcache *tc, int is_free, uint64_t bytes)
{
	if (HA_LIKELY(tc->state == 1 && tc->node))
		add_own(is_free ? &tc->node->req_free_bytes : &tc->node->req_alloc_bytes,
			(int64_t)bytes);
	else
		__atomic_fetch_add(&retired[is_free ? 4 : 3], bytes, __ATOMIC_RELAXED);
}

uint64_t ha_tcache_cached(const ha_tcache *tc);

void ha_books_publish(ha_tcache *tc, int count_cache)
{
	ha_tnode *nd = tc->node;
	if (tc->state != 1 || !nd)
		return;
	__atomic_store_n(&nd->alloc_bytes, (uint64_t)(tc->drawn - tc->sample_left),
			 __ATOMIC_RELAXED);
	if (count_cache)
		__atomic_store_n(&nd->cached_bytes, ha_tcache_cached(tc), __ATOMIC_RELAXED);
}

void ha_books_retire(ha_tnode *nd)
{
	uint64_t *f[5] = { &nd->alloc_bytes, &nd->net_bytes, &nd->big_bytes,
			   &nd->req_alloc_bytes, &nd->req_free_bytes };
	for (int i = 0; i < 5; i++) {
		__atomic_fetch_add(&retired[i], __atomic_load_n(f[i], __ATOMIC_RELAXED),
				   __ATOMIC_RELAXED);
		__atomic_store_n(f[i], 0, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&nd->cached_bytes, 0, __ATOMIC_RELAXED);
}

void ha_books_totals(uint64_t out[2], uint64_t req[2])
{
	ha_tcache *tc = &ha_tc;
	ha_books_publish(tc, 1);
	uint64_t s[6], r[5], o[4];   /* s: allocated, net, big, cached, req alloc, req free */
	ha_tcache_sum(s);
	for (int i = 0; i < 5; i++)
		r[i] = __atomic_load_n(&retired[i], __ATOMIC_RELAXED);
	for (int i = 0; i < 4; i++)
		o[i] = __atomic_load_n(&own[i], __ATOMIC_RELAXED);
	ha_books_of(s, r, o, out, req);
}

void ha_alloc_books_layout(ha_books_layout *out)
{
	out->registry = (uint64_t)(uintptr_t)ha_tcache_registry();
	out->retired = (uint64_t)(uintptr_t)retired;
	out->own = (uint64_t)(uintptr_t)own;
	out->node_size = sizeof(ha_tnode);
	out->node_next = offsetof(ha_tnode, next);
	out->node_live = offsetof(ha_tnode, live);
	out->node_alloc = offsetof(ha_tnode, alloc_bytes);
	out->node_net = offsetof(ha_tnode, net_bytes);
	out->node_big = offsetof(ha_tnode, big_bytes);
	out->node_cached = offsetof(ha_tnode, cached_bytes);
	out->node_req_alloc = offsetof(ha_tnode, req_alloc_bytes);
	out->node_req_free = offsetof(ha_tnode, req_free_bytes);
}

/* This thread's own figures, exact: allocated, in use (what it took from
 * the central cache and big blocks, less what its cache holds), req. */
static int own_mark(int64_t m[4])
{
	ha_tcache *tc = &ha_tc;
	if (tc->state != 1 || !tc->node)
		return -1;
	ha_tnode *nd = tc->node;
	m[0] = tc->drawn - tc->sample_left;
	m[1] = (int64_t)(nd->net_bytes + nd->big_bytes - ha_tcache_cached(tc));
	m[2] = (int64_t)nd->req_alloc_bytes;
	m[3] = (int64_t)nd->req_free_bytes;
	return 0;
}

void ha_books_own_begin(int64_t mark[5])
{
	ha_ensure_init();
	mark[4] = own_mark(mark);
}

void ha_books_own_end(const int64_t mark[5])
{
	int64_t now[4];
	if (mark[4] != 0 || own_mark(now) != 0)
		return;
	for (int i = 0; i < 4; i++)
		__atomic_fetch_add(&own[i], (uint64_t)(now[i] - mark[i]), __ATOMIC_RELAXED);
}

void ha_books(uint64_t out[2], uint64_t req[2])
{
	ha_ensure_init();
	ha_books_totals(out, req);
}

/* ------------------------------------------------------------------ */
/* the profiling switch                                                */

void ha_books_sync_slow(ha_tcache *tc)
{
	if (tc->state != 1)
		return;           /* a thread that is not live keeps 0 */
	tc->epoch = __atomic_load_n(&ha_hot.epoch, __ATOMIC_ACQUIRE);
	int mode = __atomic_load_n(&ha_hot.prof_mode, __ATOMIC_RELAXED);
	ha_books_set_countdown(tc, mode == HA_PROF_OFF ? HA_COUNTDOWN_OFF : 0);
	tc->compat_left = 0;
	tc->compat = mode == HA_PROF_COMPAT;
	tc->free_check = mode == HA_PROF_OFF ? INT64_MAX : 0;
	tc->prof_fresh = mode != HA_PROF_OFF;
}

void ha_books_check(ha_tcache *tc)
{
	int64_t b[2];
	ha_prof_check(b);
	tc->alloc_check = b[0];
	tc->free_check = b[1];
}

/* The one path from an allocation to sampling: the countdown (sample_left,
 * or compat_left) held before (>= 0) when an allocation charged `charge`
 * bytes it did not cover; 1 when this allocation is sampled, *next the
 * countdown now.  It was armed to min(to_sample, alloc_check); what was
 * consumed since comes off both, so the samples stay the sampler's
 * exponential process while a thread's threshold checks still come at the
 * exact byte. */
static int due(ha_tcache *tc, int64_t before, size_t charge, int64_t *next)
{
	int64_t consumed = (int64_t)charge;
	if (HA_UNLIKELY(tc->prof_fresh)) {      /* this thread's first of the session */
		tc->prof_fresh = 0;
		tc->to_sample = ha_prof_sample_distance();
		ha_books_check(tc);
	} else if (tc->armed > before) {
		consumed += tc->armed - before;  /* charged since it was armed */
	}
	int sample = 0;
	if (consumed > tc->to_sample) {
		sample = 1;
		tc->to_sample = ha_prof_sample_distance();
	} else {
		tc->to_sample -= consumed;
	}
	if ((tc->alloc_check -= consumed) < 0)
		ha_books_check(tc);
	int64_t n = tc->to_sample < tc->alloc_check ? tc->to_sample : tc->alloc_check;
	if (n < 0)
		n = 0;
	tc->armed = n;
	*next = n;
	return sample;
}

int ha_books_charge_slow(ha_tcache *tc, size_t charge)
{
	if (HA_UNLIKELY(tc->state != 1)) {
		/* an exiting thread: its books go to the retired sums, its
		 * countdown stays 0, it is not sampled */
		ha_books_alloc(tc, (int64_t)charge);
		return 0;
	}
	/* a refill in this slow path may have taken a switch to compatibility
	 * mode, whose countdown stays 0 (every malloc reaches its counters) */
	int64_t before = tc->sample_left, next = tc->compat ? 0 : HA_COUNTDOWN_OFF;
	int sample = 0;
	tc->sample_left -= (int64_t)charge;   /* allocated first: totals see it */
	if (ha_hot.prof_mode == HA_PROF_OFF && !tc->compat)
		ha_prof_poll();   /* may switch sampling on: this thread is then fresh */
	if (ha_hot.prof_mode == HA_PROF_ON)
		sample = due(tc, before > 0 ? before : 0, charge, &next);
	ha_books_set_countdown(tc, next);
	return sample;
}

int ha_books_charge_req(ha_tcache *tc, size_t n)
{
	/* a 0-byte request is due when nothing is left, as gperftools' is */
	int64_t left = tc->compat_left - (int64_t)n;
	int sample = 0;
	if (HA_UNLIKELY(left < 0 || (n == 0 && tc->compat_left == 0)))
		sample = due(tc, tc->compat_left, n, &left);
	tc->compat_left = left;
	return sample;
}

void ha_alloc_profiling(int mode, int record_all)
{
	ha_ensure_init();
	if (mode != HA_PROF_OFF) {
		/* a new session: compat headers of an earlier one stop counting */
		uint32_t k = ha_prof_key + 1;
		k = k ? k : 1;
		__atomic_store_n(&ha_prof_key, k, __ATOMIC_RELAXED);
		__atomic_store_n(&ha_hdr_mask, ha_hdr_secret ^ (uint64_t)k << 32, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&ha_hot.record_all, mode == HA_PROF_ON && record_all, __ATOMIC_RELAXED);
	__atomic_store_n(&ha_hot.prof_mode, mode, __ATOMIC_RELEASE);
	/* 0 is the epoch of a thread that has seen no switch */
	if (__atomic_add_fetch(&ha_hot.epoch, 1, __ATOMIC_RELEASE) == 0)
		__atomic_fetch_add(&ha_hot.epoch, 1, __ATOMIC_RELEASE);
	ha_tcache *tc = &ha_tc;
	if (tc->state == 0)
		ha_tcache_attach();
	ha_books_sync_slow(tc);
}

void ha_alloc_watch_frees(int on)
{
	__atomic_store_n(&ha_hot.free_watch, on, __ATOMIC_RELEASE);
}

void ha_alloc_call_back_next(void)
{
	ha_tcache *tc = &ha_tc;
	if (tc->state == 1)
		ha_books_set_countdown(tc, 0);
	tc->compat_left = 0;
	tc->to_sample = -1;
	tc->armed = 0;
}
