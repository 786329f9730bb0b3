/* alloc/entry.c — the malloc family: the only file defining libc's names.
 *
 * Fast paths first.  malloc(n), n <= 32 KiB, profiling off:
 *   one load of ha_prof_active, a table lookup for the class, and a pop
 *   from this thread's list (load head, load next, store head, inc room):
 *   about 12 instructions, no lock, no atomic, no call.
 * free(p), p small, profiling off:
 *   page-map walk (2 dependent loads) to the span, a multiply to check that
 *   p is an object start, a compare against the list head (a block freed
 *   twice in a row), a push.
 * The fast paths rely on: tables built before the first span exists (a
 * class-0 lookup means "not initialised" and goes slow), the TLS struct
 * being zero in a new thread (an empty list goes slow and attaches the
 * thread), and spans being page-aligned so p's page names its span.
 *
 * With profiling on and exact totals, malloc(n <= 32 KiB) takes
 * malloc_prof_small (10 instructions more: the countdown's subtract-and-
 * branch, one counter, the block's 16-byte header) and free takes
 * free_prof_small (one compare of the header's check word instead of the
 * object-start check, one counter, the push: 4 more).  The class comes
 * from the span, not from the header's size: a push whose list depends on
 * a load of the freed block stalls what follows (tried in eea27ba: 8
 * instructions a pair fewer, server 10% slower).  With estimated
 * totals malloc adds only the countdown and free is unchanged.  What that
 * costs and why the sizes must be kept at all (exact dump totals): README.
 *
 * Everything else — large blocks, alignment, samples, errors — tail-calls
 * a noinline slow path.
 */
#include "alloc/internal.h"
#include "heapalloc.h"
#include <errno.h>
#include <malloc.h>
#include <string.h>
#include <unistd.h>

ha_hot_t ha_hot;
ha_counter ha_slow_allocs;
/* defined in operators.cc: pulls the operators into static links */
extern const char ha_operators_anchor;
__attribute__((used)) static const char *const ha_keep_operators = &ha_operators_anchor;

/* ------------------------------------------------------------------ */
/* small-object primitives                                             */

static inline void *small_pop(unsigned cls, size_t n)
{
	ha_tlist *l = &ha_tc.list[cls];
	void *p = l->head;
	if (HA_LIKELY(p)) {
		l->head = *(void **)p;
		l->room++;
		return p;
	}
	return ha_tcache_refill(cls, n);
}

static inline void push_checked(unsigned cls, void *p)
{
	ha_tlist *l = &ha_tc.list[cls];
	if (HA_UNLIKELY(l->head == p))
		ha_fatal("free(): double free detected", p);
	*(void **)p = l->head;
	l->head = p;
	if (HA_UNLIKELY(--l->room < 0))
		ha_tcache_overflow(l, cls);
}

static HA_NOINLINE void free_small_odd(ha_span *s, void *p);

/* Is p the start of one of span s's blocks (a plain block)? */
static inline int plain_start(const ha_span *s, const void *p)
{
	uintptr_t off = (uintptr_t)p - s->base;
	uint32_t idx = (uint32_t)(((uint64_t)off * s->recip) >> 32);
	return (uintptr_t)idx * s->size == off && idx < s->nobj;
}

/* free of p in span s with profiling off: p must be a block's start, else
 * it is a profiled block (or an invalid pointer) for free_small_odd(). */
static inline void small_push(ha_span *s, void *p)
{
	if (HA_UNLIKELY(!plain_start(s, p))) {
		free_small_odd(s, p);
		return;
	}
	push_checked(s->cls, p);
}

/* Smallest class >= n whose size is a multiple of align (align <= 4096,
 * power of two); 0 if none fits in a size class. */
static unsigned aligned_class(size_t n, size_t align)
{
	size_t want = n > align ? n : align;
	if (want > HA_SMALL_MAX || align > HA_PAGE_SIZE)
		return 0;
	for (unsigned c = ha_size_to_class(want); c && c < HA_NCLASSES; c++)
		if ((ha_class_size[c] & (align - 1)) == 0)
			return c;
	return 0;
}

/* Out of memory: give back everything cached (huge mappings, empty spans,
 * mimalloc's free pages) so that one retry can succeed under a limit. */
void ha_release_cached(void)
{
	ha_huge_trim();
	ha_central_release_all();
	ha_arena_trim();
}

static void *alloc_plain_once(size_t n, size_t align, int zero, int big);

/* Allocation without profiling. align: 0 or a power of two.  big: never
 * from a size class (the block gets a large or huge header). */
static void *alloc_plain_big(size_t n, size_t align, int zero, int big)
{
	int e = errno;   /* a success leaves the program's errno alone */
	void *p = alloc_plain_once(n, align, zero, big);
	if (HA_UNLIKELY(!p) && n <= ((size_t)1 << 46)) {
		ha_release_cached();
		p = alloc_plain_once(n, align, zero, big);
		if (!p)
			errno = ENOMEM;
	}
	if (p)
		errno = e;
	return p;
}

static void *alloc_plain(size_t n, size_t align, int zero)
{
	return alloc_plain_big(n, align, zero, 0);
}

static void *alloc_plain_once(size_t n, size_t align, int zero, int big)
{
	ha_ensure_init();
	unsigned cls = 0;
	if (align <= HA_MIN_ALIGN) {
		if (n <= HA_SMALL_MAX && !big)
			cls = ha_size_to_class(n);
	} else if (!big) {
		cls = aligned_class(n, align);
	}
	if (cls) {
		void *p = small_pop(cls, n);
		if (HA_UNLIKELY(!p)) {
			errno = ENOMEM;
			return NULL;
		}
		if (zero)
			memset(p, 0, n);
		return p;
	}
	__atomic_fetch_add(&ha_slow_allocs.v, 1, __ATOMIC_RELAXED);
	if (align <= HA_MIN_ALIGN && n >= HA_HUGE_MIN)
		return ha_huge_alloc(n, zero);
	return ha_arena_large_alloc(n, align, zero);
}

/* Header word of a block that is neither small nor invalid. */
static inline uint64_t *big_req(void *p)
{
	return ha_huge_is(p) ? ha_huge_req(p) : ha_arena_large_req(p);
}

/* ------------------------------------------------------------------ */
/* profiling path (ha_prof_active): exact totals, countdown, marks     */

/* *c -= n; is *c still > 0?  On x86-64 one read-modify-write instruction
 * whose flags the branch uses (the compiler otherwise loads, copies,
 * subtracts, stores and tests: 4 instructions more on every malloc). */
static inline int countdown_take(int64_t *c, int64_t n)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
	int more;
	__asm__("subq %2, %0" : "+m"(*c), "=@ccg"(more) : "er"(n));
	return more;
#else
	return (*c -= n) > 0;
#endif
}

/* Owner-only counters, read racily by ha_tcache_prof_totals(): the owner
 * adds with one read-modify-write instruction (no lock prefix: nobody else
 * writes the counter, and a reader sees the old or the new value of an
 * aligned 8-byte word), elsewhere with a relaxed atomic store of the sum
 * (a plain load, add and move: the compiler will not fuse an atomic store
 * with its load). */
static inline void counter_add(uint64_t *c, uint64_t v)
{
#if defined(__x86_64__)
	__asm__("addq %1, %0" : "+m"(*c) : "er"(v));
#else
	__atomic_store_n(c, *c + v, __ATOMIC_RELAXED);
#endif
}
#define BUMP(field, v) counter_add(&(field), (v))

static inline void prof_count(ha_tcache *tc, int is_free, uint64_t bytes)
{
	if (HA_UNLIKELY(tc->state == 0))
		ha_tcache_attach();   /* a thread that only frees: attach it, or
				       * all its frees take the global counters */
	if (HA_LIKELY(tc->state == 1)) {
		ha_tnode *nd = tc->node;
		if (is_free)
			BUMP(nd->prof_free_bytes, bytes);
		else
			BUMP(nd->prof_alloc_bytes, bytes);
	} else if (is_free) {
		ha_tcache_retire_prof(0, bytes);
	} else {
		ha_tcache_retire_prof(bytes, 0);
	}
}

/* A small block allocated while profiling starts with a 16-byte header and
 * the program gets block + 16 (block + align for an aligned request; the
 * header is always the 16 bytes before the program's pointer):
 *     word 0   requested size
 *     word 1   ha_hdr_secret ^ session << 32 ^ flags (session:
 *              ha_prof_key, never 0; flags HA_HDR_SAMPLED, HA_HDR_ALIGNED
 *              in the low bits), i.e. ha_hdr_mask for an ordinary block of
 *              the current session: one compare checks that the header is
 *              real, that the block counts and that free has nothing
 *              else to do (a sampled or aligned block goes the slow way).
 *              (It named the header's address too, at 3 instructions a
 *              pair; nothing copies a header elsewhere — realloc copies
 *              from the program's pointer, free clears word 1 — so the
 *              address added no check.)
 * The header shares a cache line with the bytes the program touches first,
 * so free reads no line the program did not (a trailer at the block's end
 * cost the server bench a cache miss per operation on blocks > 64 B).
 * Blocks are told apart by the pointer's offset in its block: 0 is a block
 * from outside profiling, anything else must carry a header whose word 1
 * checks out — else the pointer is invalid and free aborts as before.
 * Word 1 is cleared on free, so a second free of the same pointer aborts.
 * Only blocks of the current session count in the totals. */
#define HA_HDR 16
#define HA_HDR_SAMPLED ((uint64_t)1)
/* the header is not the block's start (an aligned request: the program's
 * pointer is block + align), so free must find the block the long way */
#define HA_HDR_ALIGNED ((uint64_t)2)
#define HA_HDR_FLAGS (HA_HDR_SAMPLED | HA_HDR_ALIGNED)
/* Big blocks (large and huge) keep the size in their header word:
 *     HA_BIG_TRACKED | (session & 0x7fff) << 47 | requested size
 * (| HA_LARGE_SAMPLED), so a free in a later session does not count. */
#define HA_BIG_TRACKED ((uint64_t)1 << 62)
#define HA_BIG_SESSION_SHIFT 47

static inline uint64_t big_session(void)
{
	return (uint64_t)(__atomic_load_n(&ha_prof_key, __ATOMIC_RELAXED) & 0x7fff) << HA_BIG_SESSION_SHIFT;
}

/* Check word of a header of the current session. */
static inline uint64_t hdr_check(void)
{
	return __atomic_load_n(&ha_hdr_mask, __ATOMIC_RELAXED);
}

/* May p - 16 be read as a header before anything else is known of p?  Yes
 * when p is not in the first 16 bytes of its page: the header then lies in
 * p's page, and spans are whole pages, all mapped.  (A pointer we handed
 * out is 16-aligned; any other is read through hdr_word, which never makes
 * a misaligned access, and fails the check word.)  One test: 2 instructions. */
static inline int hdr_readable(const void *p)
{
	return ((uintptr_t)p & (HA_PAGE_SIZE - HA_HDR)) != 0;
}

/* Word i of the header before p, p of any alignment (hdr_readable). */
static inline uint64_t hdr_word(const void *p, int i)
{
	uint64_t w;
	memcpy(&w, (const char *)p - HA_HDR + 8 * i, sizeof w);
	return w;
}

/* The session of a real header, or 0 if h holds none. */
static inline uint32_t hdr_session(const uint64_t *h)
{
	uint64_t x = h[1] ^ __atomic_load_n(&ha_hdr_secret, __ATOMIC_RELAXED);
	return ((uint32_t)x & ~(uint32_t)HA_HDR_FLAGS) == 0 ? (uint32_t)(x >> 32) : 0;
}

/* The flags of a real header (HA_HDR_SAMPLED, HA_HDR_ALIGNED). */
static inline uint64_t hdr_flags(const uint64_t *h)
{
	return (h[1] ^ __atomic_load_n(&ha_hdr_secret, __ATOMIC_RELAXED)) & HA_HDR_FLAGS;
}

/* Class for a request of n bytes plus the header, or 0 (goes large).  A
 * 0-byte request gets 1 byte: its pointer must lie inside its block
 * (ha_class_hdr_lo has that built in). */
static inline unsigned hdr_class(size_t n)
{
	if (HA_LIKELY(n <= HA_HDR_LO_MAX))
		return ha_class_hdr_lo[(n + 7) >> 3];
	if (HA_LIKELY(n <= HA_SMALL_MAX - HA_HDR))
		return ha_size_to_class(n + HA_HDR);
	return n <= HA_SMALL_MAX ? HA_CLASS_HDR_MAX : 0;
}

/* Where p sits in its span: *bp the block's start; returns p's offset in
 * it.  Aborts if p is outside the span's blocks. */
static inline uintptr_t block_of(const ha_span *s, const void *p, char **bp)
{
	uintptr_t off = (uintptr_t)p - s->base;
	unsigned cls = s->cls;
	uint32_t idx = (uint32_t)(((uint64_t)off * ha_class_recip[cls]) >> 32);
	if (HA_UNLIKELY(idx >= s->nobj))
		ha_fatal("free(): invalid pointer (not the start of a block)", p);
	uintptr_t rem = off - (uintptr_t)idx * ha_class_size[cls];
	*bp = (char *)p - rem;
	return rem;
}

/* The header of p, which sits rem bytes into its block, or NULL when p is
 * a plain block (rem == 0).  Aborts on a pointer that is neither; a header
 * whose check word free cleared means the block was freed already. */
static uint64_t *hdr_of(void *p, uintptr_t rem, const char *what)
{
	if (rem == 0)
		return NULL;
	uint64_t *h = (uint64_t *)p - 2;
	if (HA_UNLIKELY(rem < HA_HDR || (rem & (HA_MIN_ALIGN - 1)) || !hdr_session(h))) {
		if (rem >= HA_HDR && !(rem & (HA_MIN_ALIGN - 1)) && h[1] == 0)
			ha_fatal("double free or corruption (a profiled block freed twice?)", p);
		ha_fatal(what, p);
	}
	return h;
}

/* This thread, attached, with the current countdown taken. */
static inline ha_tcache *prof_sync(void)
{
	ha_tcache *tc = &ha_tc;
	if (tc->state == 0)
		ha_tcache_attach();
	unsigned epoch = __atomic_load_n(&ha_countdown_epoch, __ATOMIC_ACQUIRE);
	if (HA_UNLIKELY(tc->epoch != epoch) && tc->state == 1) {
		tc->epoch = epoch;   /* only a live thread takes the fast path */
		tc->sample_left = tc->armed = __atomic_load_n(&ha_countdown_value, __ATOMIC_RELAXED);
	}
	return tc;
}

/* Record a new block of n requested bytes at p: exact totals, its size in
 * the header (small: already placed by the caller) or big-block header,
 * the countdown, and a sample when one is due.  Always inlined: a sample
 * then unwinds one frame of ours fewer (~70 instructions). */
static inline __attribute__((always_inline)) void prof_note_alloc(void *p, size_t n, uint64_t *h)
{
	ha_tcache *tc = prof_sync();
	int exact = ha_prof_exact;
	if (exact)
		prof_count(tc, 0, n);
	uint64_t *lreq = NULL;
	if (h) {
		h[0] = n;
		h[1] = hdr_check();
	} else {
		lreq = big_req(p);
		*lreq = HA_BIG_TRACKED | big_session() | n;
	}
	int64_t left = tc->sample_left - (int64_t)n;
	/* 0 means "the next byte is marked": a 0-byte request then is sampled
	 * too (R = 1 records every allocation) */
	if (HA_UNLIKELY(left < 0 || (n == 0 && tc->sample_left == 0))) {
		if (!exact) {   /* estimate mode: bytes since the last callback */
			int64_t since = tc->armed - tc->sample_left + (int64_t)n;
			prof_count(tc, 0, (uint64_t)(since > (int64_t)n ? since : (int64_t)n));
		}
		int sampled = 0;
		left = ha_prof_on_alloc(p, n, &sampled);
		if (sampled) {
			if (h)
				h[1] ^= HA_HDR_SAMPLED;
			else
				*lreq |= HA_LARGE_SAMPLED;
		}
		tc->armed = left;
	}
	/* a positive countdown opens the fast paths, which need a live thread
	 * (its registry record): a thread that is not live calls back each time */
	if (HA_UNLIKELY(tc->state != 1) && left > 0)
		left = 0;
	tc->sample_left = left;
}

/* Estimate mode: would an allocation of n bytes now reach the countdown's
 * marked byte (or a threshold check)?  Only such blocks carry a header. */
static inline int prof_due(ha_tcache *tc, size_t n)
{
	if (HA_UNLIKELY(n > ((size_t)1 << 62)))
		return 1;   /* cannot succeed; and no signed overflow below */
	return tc->sample_left - (int64_t)n < 0 || (n == 0 && tc->sample_left == 0);
}

static void *small_alloc_once(unsigned cls, size_t n)
{
	ha_ensure_init();
	return small_pop(cls, n);
}

/* A block the profiler tracks: small ones with a header, big ones with
 * their size in the big-block header; counted, sampled when due. */
static void *alloc_prof_tracked(size_t n, size_t align, int zero)
{
	size_t pad = align <= HA_MIN_ALIGN ? HA_HDR : align;
	unsigned cls = 0;
	if (align <= HA_MIN_ALIGN)
		cls = hdr_class(n);
	else if (n < HA_SMALL_MAX - pad)
		cls = aligned_class(n + pad + (n == 0), align);
	if (!cls) {
		void *p = alloc_plain_big(n, align, zero, 1);
		if (HA_LIKELY(p != NULL))
			prof_note_alloc(p, n, NULL);
		return p;
	}
	char *b = small_alloc_once(cls, n + pad);
	if (HA_UNLIKELY(!b)) {
		int e = errno;
		ha_release_cached();
		b = small_alloc_once(cls, n + pad);
		if (!b) {
			errno = ENOMEM;
			return NULL;
		}
		errno = e;
	}
	char *p = b + pad;
	if (zero)
		memset(p, 0, n);
	prof_note_alloc(p, n, (uint64_t *)p - 2);
	if (pad != HA_HDR)
		((uint64_t *)p)[-1] ^= HA_HDR_ALIGNED;
	return p;
}

/* The general profiling path: any size, alignment, zeroing. */
static HA_NOINLINE void *alloc_prof(size_t n, size_t align, int zero)
{
	if (!ha_prof_exact) {
		/* estimate mode: a plain block unless a sample may be due */
		ha_tcache *tc = prof_sync();
		if (!prof_due(tc, n)) {
			void *p = alloc_plain(n, align, zero);
			if (HA_LIKELY(p != NULL))
				tc->sample_left -= (int64_t)n;
			return p;
		}
	}
	return alloc_prof_tracked(n, align, zero);
}

/* The profiled fast paths' pop: a block of class cls for a request of n
 * bytes, with the countdown charged; NULL when anything is unusual (empty
 * list, a sample due) and the caller must go to alloc_prof().  Only a live
 * thread takes it, so exact mode may write the thread's registry record:
 * a countdown is positive only in a live thread (a new thread's is 0,
 * prof_note_alloc never leaves another thread a positive one, thread exit
 * zeroes it).  There is no check that the countdown is this session's:
 * after a stop and a new start, a thread other than the starter first runs
 * out what is left of its last countdown (at most one sampling distance or
 * threshold budget of the earlier session; its bytes are counted exactly,
 * only not sampled), then takes this session's (prof_sync).  3
 * instructions off every profiled malloc. */
static inline void *countdown_pop(ha_tcache *tc, unsigned cls, size_t n)
{
	ha_tlist *l = &tc->list[cls];
	void *p = l->head;
	if (HA_UNLIKELY(!p))
		return NULL;
	if (HA_UNLIKELY(!countdown_take(&tc->sample_left, (int64_t)n))) {
		tc->sample_left += (int64_t)n;
		return NULL;
	}
	l->head = *(void **)p;
	l->room++;
	return p;
}

/* malloc with profiling on, n <= 32 KiB: the plain fast path plus the
 * countdown's subtract-and-branch, one counter and the header. */
static HA_NOINLINE void *malloc_prof_small(size_t n)
{
	ha_tcache *tc = &ha_tc;
	uint64_t *h = countdown_pop(tc, hdr_class(n), n);
	if (HA_UNLIKELY(!h))
		return alloc_prof(n, 0, 0);
	BUMP(tc->node->prof_alloc_bytes, n);
	h[0] = n;
	h[1] = hdr_check();
	return (char *)h + HA_HDR;
}

/* malloc in estimate mode (HEAP_PROFILE_EXACT_TOTALS off), n <= 32 KiB:
 * the countdown's subtract-and-branch, then the plain pop: a plain block
 * that free() handles as without profiling.  A block that may be sampled
 * (the countdown runs out) goes to alloc_prof() and gets a header.  The
 * countdown needs no live thread (a new thread's is 0 and goes slow) nor
 * the current session's epoch: after a stop and a new start a thread first
 * runs out the countdown left from the earlier session, and only then
 * (prof_sync) takes this session's.  The bytes in between go unsampled:
 * on average one interval per thread per restart, for 3 instructions off
 * every malloc. */
static inline void *malloc_prof_fast(size_t n)
{
	ha_tcache *tc = &ha_tc;
	if (HA_UNLIKELY(!countdown_take(&tc->sample_left, (int64_t)n))) {
		tc->sample_left += (int64_t)n;
		return alloc_prof(n, 0, 0);
	}
	return small_pop(ha_size_to_class(n), n);
}

/* Estimated totals, n < 32 KiB: a block with a header (uncounted), from
 * the list with the countdown charged as malloc_prof_small does; anything
 * unusual (empty list, a sample due) takes the general path. */
static void *alloc_hdr_est(size_t n)
{
	uint64_t *h = countdown_pop(&ha_tc, hdr_class(n), n);
	if (HA_UNLIKELY(!h))
		return alloc_prof_tracked(n, 0, 0);
	h[0] = n;
	h[1] = hdr_check();
	return (char *)h + HA_HDR;
}

/* End of a tracked small block's life (h: its header, checked): count it
 * if it belongs to this session, tell the profiler if it was sampled. */
static void prof_forget_small(void *p, uint64_t *h)
{
	size_t req = (size_t)h[0];
	uint64_t flags = hdr_flags(h);
	uint32_t session = hdr_session(h);
	h[1] = 0;
	if (!ha_prof_active || session != ha_prof_key)
		return;
	if (ha_prof_exact)
		prof_count(&ha_tc, 1, req);
	if (HA_UNLIKELY(flags & HA_HDR_SAMPLED))
		ha_prof_on_free(p, req);
}

/* free of a small block that is not a plain block start: a tracked block
 * (profiling on or off), or an invalid pointer (aborts). */
static HA_NOINLINE void free_small_odd(ha_span *s, void *p)
{
	/* estimated totals: a block with an ordinary header of this session
	 * (realloc gave it one) has nothing to count: clear and push (the
	 * check word is 0 until the first session: no header matches then) */
	uint64_t m = hdr_check();
	if (!ha_prof_exact && m && hdr_readable(p) && hdr_word(p, 1) == m) {
		uint64_t *h = (uint64_t *)p - 2;
		h[1] = 0;
		push_checked(s->cls, h);
		return;
	}
	char *b;
	uintptr_t rem = block_of(s, p, &b);
	uint64_t *h = hdr_of(p, rem, "free(): invalid pointer (not the start of a block)");
	if (h)
		prof_forget_small(p, h);
	push_checked(s->cls, b);
}

/* free of a small block that carries no valid header of this session at
 * p - 16: a plain block (allocated before profiling) or anything odd. */
static HA_NOINLINE void free_prof_other(ha_span *s, void *p)
{
	small_push(s, p);   /* out of line: keeps free_prof_small short */
}

/* free with profiling on.  The common case, a block of this session that
 * was neither sampled nor aligned, in a live thread: clear the header's
 * check word, count its bytes, push the block.  The check word comes
 * first: it holds this session (and no flag) under a random secret, so
 * when it matches, p is such a block's pointer and p - 16 its block, with
 * no division to find p's place in the span (hdr_readable says when p - 16
 * may be read first).  Every call is a tail call or noreturn. */
static HA_NOINLINE void free_prof_small(ha_span *s, void *p)
{
	uint64_t *h = (uint64_t *)p - 2;
	if (HA_UNLIKELY(!hdr_readable(p) || hdr_word(p, 1) != hdr_check())) {
		free_prof_other(s, p);
		return;
	}
	ha_tnode *nd = ha_tc.node;      /* non-NULL exactly while state == 1 */
	if (HA_UNLIKELY(!nd)) {
		free_small_odd(s, p);
		return;
	}
	h[1] = 0;
	BUMP(nd->prof_free_bytes, h[0]);
	push_checked(s->cls, h);
}

/* End of a big block's tracked life; v is its header word (read before the
 * block moved or went away), p its address then. */
static void prof_forget_big(uint64_t v, void *p)
{
	if (!(v & HA_BIG_TRACKED) || !ha_prof_active ||
	    (v & ((uint64_t)0x7fff << HA_BIG_SESSION_SHIFT)) != big_session())
		return;
	size_t req = (size_t)(v & (((uint64_t)1 << HA_BIG_SESSION_SHIFT) - 1));
	if (ha_prof_exact)
		prof_count(&ha_tc, 1, req);
	if (v & HA_LARGE_SAMPLED)
		ha_prof_on_free(p, req);
}

/* ------------------------------------------------------------------ */
/* internal entry points                                                */

static HA_NOINLINE void *malloc_slow(size_t n)
{
	if (ha_prof_active)
		return n > HA_SMALL_MAX ? alloc_prof(n, 0, 0) :
			ha_prof_exact ? malloc_prof_small(n) : malloc_prof_fast(n);
	return alloc_plain(n, 0, 0);
}

/* malloc's body, for operator new too: profiling off, a pop; exact totals,
 * the header path; estimated totals, the countdown inline, then a pop. */
static inline void *alloc_fast(size_t n)
{
	if (HA_LIKELY(n <= HA_SMALL_MAX)) {
		int mode = ha_prof_active;
		if (HA_LIKELY(!mode))
			return small_pop(ha_size_to_class(n), n);
		if (HA_LIKELY(mode == HA_PROF_EXACT))
			return malloc_prof_small(n);
		return malloc_prof_fast(n);
	}
	return malloc_slow(n);
}

void *ha_alloc(size_t n)
{
	return alloc_fast(n);
}

void *ha_alloc_aligned(size_t align, size_t n)
{
	if (ha_prof_active)
		return alloc_prof(n, align, 0);
	return alloc_plain(n, align, 0);
}

static HA_NOINLINE void free_slow(void *p, ha_span *s)
{
	if (!p)
		return;
	if (s) {
		if (ha_prof_exact)
			free_prof_small(s, p);
		else
			small_push(s, p);
		return;
	}
	if (ha_huge_is(p)) {
		if (ha_prof_active)
			prof_forget_big(*ha_huge_req(p), p);
		ha_huge_free(p);
		return;
	}
	if (HA_UNLIKELY(!ha_arena_is_large(p)))
		ha_fatal("free(): invalid pointer (not allocated by heapalloc, or freed twice)", p);
	if (ha_prof_active)
		prof_forget_big(*ha_arena_large_req(p), p);
	ha_arena_large_free(p);
}

void ha_free(void *p)
{
	ha_span *s = ha_pagemap_get(p);
	if (HA_LIKELY(s && !ha_prof_exact)) {
		small_push(s, p);
		return;
	}
	free_slow(p, s);
}

size_t ha_usable_size(const void *p)
{
	if (!p)
		return 0;
	ha_span *s = ha_pagemap_get(p);
	if (s) {
		char *b;
		uintptr_t rem = block_of(s, p, &b);
		/* a tracked block's header is the profiler's */
		hdr_of((void *)p, rem, "malloc_usable_size(): invalid pointer");
		return ha_class_size[s->cls] - rem;
	}
	if (ha_huge_is(p))
		return ha_huge_usable(p);
	if (!ha_arena_is_large(p))
		ha_fatal("malloc_usable_size(): invalid pointer", p);
	return ha_arena_large_usable(p);
}

/* p a profiled small block of this session that is not sampled and stays
 * in its block at n bytes, no sample due: rewrite the size, return 1 (exact
 * totals, in a live thread: the free and the allocation counted too).
 * Anything else returns 0 and ha_realloc takes the general path.  (The
 * general path costs ~100 instructions here; strings grown a few bytes at
 * a time make this the common case of a realloc-heavy program.  With
 * estimated totals the blocks that have a header are those that once fell
 * due for a sample, and a string that did keeps growing in place.) */
static inline int realloc_prof_inplace(const ha_span *s, void *p, size_t n, int exact)
{
	uint64_t *h = (uint64_t *)p - 2;
	ha_tcache *tc = &ha_tc;
	if (!hdr_readable(p) || hdr_word(p, 1) != hdr_check() || hdr_class(n) != s->cls)
		return 0;
	int64_t left = tc->sample_left - (int64_t)n;
	if (left <= 0)
		return 0;
	if (exact) {
		ha_tnode *nd = tc->node;    /* non-NULL: the countdown is positive */
		BUMP(nd->prof_free_bytes, h[0]);
		BUMP(nd->prof_alloc_bytes, n);
	}
	h[0] = n;
	tc->sample_left = left;
	return 1;
}

/* Profiling off, or on with estimated totals: p a plain block start (no
 * header) that stays in its class at n bytes (estimate mode: with no
 * sample due, the countdown charged).  Returns 1 when p can be returned as
 * it is; 0 sends ha_realloc down the general path. */
static inline int realloc_plain_inplace(const ha_span *s, void *p, size_t n)
{
	if (n > HA_SMALL_MAX || ha_size_to_class(n) != s->cls || !plain_start(s, p))
		return 0;
	if (!ha_prof_active)
		return 1;
	ha_tcache *tc = &ha_tc;
	int64_t left = tc->sample_left - (int64_t)n;
	if (left <= 0)
		return 0;
	tc->sample_left = left;
	return 1;
}

/* realloc in place when the block already fits (same size class; a large
 * block shrinking by at most half; huge to huge by mremap), else move.
 * With profiling on, in place still counts as a free plus an allocation. */
void *ha_realloc(void *p, size_t n)
{
	if (!p)
		return ha_alloc(n);
	if (n == 0) {
		ha_free(p);
		return NULL;
	}
	ha_span *s = ha_pagemap_get(p);
	size_t old;
	void *q = NULL;
	int e = errno;   /* a failed attempt in place must not show on success */
	if (s) {
		/* estimated totals: a plain block, or one that got a header */
		if (ha_prof_exact ? realloc_prof_inplace(s, p, n, 1) :
		    (realloc_plain_inplace(s, p, n) ||
		     (ha_prof_active && realloc_prof_inplace(s, p, n, 0))))
			return p;
		char *b;
		uintptr_t rem = block_of(s, p, &b);
		uint64_t *h = hdr_of(p, rem, "realloc(): invalid pointer");
		old = ha_class_size[s->cls] - rem;
		if (!h) {
			if (n <= HA_SMALL_MAX && ha_size_to_class(n) == s->cls) {
				if (!ha_prof_active)
					return p;
				if (!ha_prof_exact) {   /* estimate mode: the countdown only */
					ha_tcache *tc = prof_sync();
					if (!prof_due(tc, n)) {
						tc->sample_left -= (int64_t)n;
						return p;
					}
				}
			}
		} else if (rem == HA_HDR && hdr_class(n) == s->cls) {
			/* a tracked block stays tracked: with profiling on that
			 * counts as a free plus an allocation */
			if (ha_prof_active) {
				prof_forget_small(p, h);
				prof_note_alloc(p, n, h);
			}
			return p;
		}
	} else if (ha_huge_is(p)) {
		old = ha_huge_usable(p);
		if (n >= HA_HUGE_MIN) {
			uint64_t v = *ha_huge_req(p);
			q = ha_huge_realloc(p, n);
			if (q) {
				if (ha_prof_active) {
					*ha_huge_req(q) = 0;
					prof_forget_big(v, p);
					prof_note_alloc(q, n, NULL);
				}
				return q;
			}
		}
	} else {
		if (HA_UNLIKELY(!ha_arena_is_large(p)))
			ha_fatal("realloc(): invalid pointer", p);
		old = ha_arena_large_usable(p);
		if (n <= old && n > HA_SMALL_MAX && n >= old / 2 && n < HA_HUGE_MIN) {
			if (ha_prof_active) {
				uint64_t *r = ha_arena_large_req(p);
				uint64_t v = *r;
				*r = 0;
				prof_forget_big(v, p);
				prof_note_alloc(p, n, NULL);
			}
			return p;
		}
	}
	/* Estimated totals: a block that realloc moves into a class with room
	 * to spare gets a header, so that when it grows in place later and
	 * falls due for a sample, it is marked where it is instead of being
	 * copied to a block that can be (a string grown a few bytes at a time:
	 * up to 32 KiB copied per sample).  A block that fills its class (a
	 * vector doubling) cannot grow in place and stays plain: a header
	 * would only slow its free. */
	if (ha_prof_active && !ha_prof_exact && n < HA_SMALL_MAX &&
	    ha_class_size[ha_size_to_class(n)] != n)
		q = alloc_hdr_est(n);
	else
		q = ha_alloc(n);
	if (!q)
		return NULL;
	memcpy(q, p, old < n ? old : n);
	ha_free(p);
	errno = e;
	return q;
}

/* ------------------------------------------------------------------ */
/* the exported malloc API                                              */

HA_EXPORT void *malloc(size_t n)
{
	return alloc_fast(n);
}

HA_EXPORT void free(void *p)
{
	ha_span *s = ha_pagemap_get(p);
	if (HA_LIKELY(s != NULL)) {
		/* estimate mode frees as without profiling: only sampled blocks
		 * carry a header, and small_push sends those to the profiler */
		if (HA_LIKELY(!ha_prof_exact))
			small_push(s, p);
		else
			free_prof_small(s, p);
		return;
	}
	free_slow(p, s);
}

HA_EXPORT void *calloc(size_t n, size_t m)
{
	size_t t;
	if (HA_UNLIKELY(__builtin_mul_overflow(n, m, &t))) {
		errno = ENOMEM;
		return NULL;
	}
	if (ha_prof_active)
		return alloc_prof(t, 0, 1);
	return alloc_plain(t, 0, 1);
}

HA_EXPORT void *realloc(void *p, size_t n)
{
	return ha_realloc(p, n);
}

HA_EXPORT void *reallocarray(void *p, size_t n, size_t m)
{
	size_t t;
	if (HA_UNLIKELY(__builtin_mul_overflow(n, m, &t))) {
		errno = ENOMEM;
		return NULL;
	}
	return ha_realloc(p, t);
}

static inline size_t pow2_up(size_t a)
{
	if (a <= 1)
		return 1;
	if (a > ((size_t)1 << 63))   /* glibc: EINVAL past SIZE_MAX / 2 + 1 */
		return 0;
	return (size_t)1 << (64 - __builtin_clzl(a - 1));
}

HA_EXPORT void *memalign(size_t align, size_t n)
{
	/* glibc rounds a non-power-of-two alignment up to the next one */
	size_t a = pow2_up(align);
	if (!a) {
		errno = EINVAL;
		return NULL;
	}
	if (a <= HA_MIN_ALIGN)
		return ha_alloc(n);
	return ha_alloc_aligned(a, n);
}

/* C17 (DR 460) and glibc 2.38: an alignment that is not a power of two
 * (0 included) fails with EINVAL; memalign keeps glibc's rounding up. */
HA_EXPORT void *aligned_alloc(size_t align, size_t n)
{
	if (HA_UNLIKELY(align == 0 || (align & (align - 1)))) {
		errno = EINVAL;
		return NULL;
	}
	return memalign(align, n);
}

HA_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	if (align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	void *p = align <= HA_MIN_ALIGN ? ha_alloc(n) : ha_alloc_aligned(align, n);
	if (!p)
		return ENOMEM;   /* errno ENOMEM too, as glibc leaves it */
	*out = p;
	return 0;
}

HA_EXPORT void *valloc(size_t n)
{
	return ha_alloc_aligned((size_t)sysconf(_SC_PAGESIZE), n);
}

HA_EXPORT void *pvalloc(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	if (n > SIZE_MAX - pg) {
		errno = ENOMEM;
		return NULL;
	}
	n = (n + pg - 1) & ~(pg - 1);
	return ha_alloc_aligned(pg, n ? n : pg);
}

HA_EXPORT size_t malloc_usable_size(void *p)
{
	return ha_usable_size(p);
}

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
	       "0.1.0", mi.arena + mi.hblkhd, mi.uordblks, mi.hblks, mi.hblkhd,
	       (unsigned long long)n, (unsigned long long)tcb,
	       (unsigned long long)ha_meta_bytes());
}

/* glibc's internal names, so that static links and libc itself find us. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#define HA_ALIAS(name, target) \
	HA_EXPORT __typeof__(target) name __attribute__((alias(#target), copy(target)))
HA_ALIAS(__libc_malloc, malloc);
HA_ALIAS(__libc_free, free);
HA_ALIAS(__libc_calloc, calloc);
HA_ALIAS(__libc_realloc, realloc);
HA_ALIAS(__libc_memalign, memalign);
HA_ALIAS(__libc_valloc, valloc);
HA_ALIAS(__libc_pvalloc, pvalloc);
HA_ALIAS(__libc_mallinfo, mallinfo);
HA_ALIAS(__libc_mallopt, mallopt);
