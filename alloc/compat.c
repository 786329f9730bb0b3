/* alloc/compat.c — compatibility mode (HEAP_PROFILE_EXACT_TOTALS=1): what
 * gperftools counts, the requested size of every allocation and free, kept
 * in a 16-byte header before each small block (big blocks keep it in their
 * header word).  Its countdown (ha_tcache.compat_left) runs in requested
 * bytes; the fast path's countdown stays 0, so every malloc comes here.
 *
 * A small block's header, the 16 bytes before the program's pointer:
 *     word 0   requested size (low 32 bits); a default-mode sample whose
 *              record the allocator keeps (ha_prof_sampled_kept) also
 *              holds the class it was charged as (bits 32-39) and the
 *              record (bits 40-60), so its free needs no look-up
 *     word 1   ha_hdr_secret ^ session << 32 ^ flags (HA_HDR_SAMPLED,
 *              HA_HDR_ALIGNED), i.e. ha_hdr_mask for an ordinary block of
 *              the current session: one compare checks that the header is
 *              real, that the block counts and that free has nothing else
 *              to do.
 * The program's pointer is never a block start, so free's plain-block check
 * fails and sends it to ha_compat_free_small.  The default mode uses the
 * same header for its sampled small blocks (HA_HDR_CLASS), so that their
 * free finds them without a look-up (unless every allocation is recorded:
 * those are plain blocks of marked spans, see ha_span_mark_recorded).
 * Word 1 is cleared on free,
 * so a second free of the same pointer aborts.  Only blocks of the current
 * session count.
 */
#include "alloc/fastpath.h"
#include <errno.h>

#define HA_HDR 16
#define HA_HDR_SAMPLED ((uint64_t)1)
/* the header is not the block's start (an aligned request: the program's
 * pointer is block + align), so free must find the block the long way */
#define HA_HDR_ALIGNED ((uint64_t)2)
/* a default-mode sample: the books count the class of word 0's size (what
 * the countdown charged), not this block's class */
#define HA_HDR_CLASS ((uint64_t)4)
#define HA_HDR_FLAGS (HA_HDR_SAMPLED | HA_HDR_ALIGNED | HA_HDR_CLASS)

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
 * when p is not in the first 16 bytes of its page (spans are whole pages,
 * all mapped). */
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

/* Word 0's fields (above). */
#define HDR_REQ(w) ((size_t)(uint32_t)(w))
#define HDR_CHARGE_CLASS(w) ((unsigned)((w) >> 32) & 0xff)
#define HDR_REC(w) ((uint32_t)((w) >> 40) & 0x1fffff)

static inline uint64_t hdr_flags(const uint64_t *h)
{
	return (h[1] ^ __atomic_load_n(&ha_hdr_secret, __ATOMIC_RELAXED)) & HA_HDR_FLAGS;
}

/* Class for a request of n bytes plus the header, or 0 (goes big).  A
 * 0-byte request gets 1 byte: its pointer must lie inside its block. */
static inline unsigned hdr_class(size_t n)
{
	if (HA_LIKELY(n <= HA_HDR_LO_MAX))
		return ha_class_hdr_lo[(n + 7) >> 3];
	if (HA_LIKELY(n <= HA_SMALL_MAX - HA_HDR))
		return ha_size_to_class(n + HA_HDR);
	return n <= HA_SMALL_MAX ? HA_CLASS_HDR_MAX : 0;
}

uint64_t *ha_compat_hdr_of(void *p, uintptr_t rem, const char *what)
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

/* Does this thread count compat blocks now? */
static inline int counting(const ha_tcache *tc)
{
	return ha_hot.prof_mode == HA_PROF_COMPAT && tc->state == 1;
}

/* A new compat block of n requested bytes at p (h: its small header, or
 * NULL for a big block): count it, run the countdown, sample when due. */
static void note_alloc(ha_tcache *tc, void *p, uint64_t *h, size_t n)
{
	ha_books_req(tc, 0, n);
	uint64_t *w = NULL;
	if (h) {
		h[0] = n;
		h[1] = hdr_check();
	} else {
		w = ha_big_word(p);
		*w = HA_BIG_TRACKED | big_session() | n;
	}
	if (HA_UNLIKELY(ha_books_charge_req(tc, n)) && ha_prof_sampled(p, n, n)) {
		if (h)
			h[1] ^= HA_HDR_SAMPLED;
		else
			*w |= HA_LARGE_SAMPLED;
	}
}

/* End of a compat small block's life (h: its header, checked). */
static void forget_small(void *p, uint64_t *h)
{
	size_t req = HDR_REQ(h[0]);
	uint64_t flags = hdr_flags(h);
	uint32_t session = hdr_session(h);
	h[1] = 0;
	if (ha_hot.prof_mode == HA_PROF_OFF || session != ha_prof_key)
		return;
	ha_tcache *tc = &ha_tc;
	if (HA_UNLIKELY(flags & HA_HDR_SAMPLED)) {
		if (HDR_REC(h[0]))
			ha_prof_on_free_kept(p, HDR_REC(h[0]),
					     ha_class_size[HDR_CHARGE_CLASS(h[0])], session);
		else
			ha_prof_on_free(p);
	}
	if (counting(tc)) {
		ha_books_req(tc, 1, req);
		ha_books_freed(tc, (int64_t)req);
	}
}

/* ha_compat_malloc's slow path, out of line so that the fast one needs no
 * stack frame: profiling may have switched since this thread looked. */
static HA_NOINLINE void *compat_malloc_slow(size_t n)
{
	ha_tcache *tc = &ha_tc;
	ha_books_sync(tc);
	if (HA_UNLIKELY(!tc->compat))
		return ha_alloc(n);
	return ha_compat_alloc(n, 0, 0);
}

void *ha_compat_malloc(size_t n)
{
	ha_tcache *tc = &ha_tc;
	unsigned cls = hdr_class(n);
	ha_tlist *l = &tc->list[cls];
	uint64_t *h = l->top[-1];
	if (HA_UNLIKELY(!h))
		return compat_malloc_slow(n);
	if (HA_UNLIKELY(!ha_countdown_take(&tc->compat_left, (int64_t)n))) {
		ha_countdown_give_back(&tc->compat_left, (int64_t)n);   /* the slow path charges it */
		return compat_malloc_slow(n);
	}
	l->top--;
	l->room++;
	tc->drawn += l->size;
	ha_counter_add(&tc->node->req_alloc_bytes, n);
	h[0] = n;
	h[1] = hdr_check();
	return h + 2;
}

void *ha_compat_alloc(size_t n, size_t align, int zero)
{
	ha_tcache *tc = &ha_tc;
	size_t pad = align <= HA_MIN_ALIGN ? HA_HDR : align;
	unsigned cls = 0;
	if (align <= HA_MIN_ALIGN)
		cls = hdr_class(n);
	else if (n < HA_SMALL_MAX - pad)
		cls = ha_aligned_class(n + pad + (n == 0), align);
	if (!cls) {
		void *p = ha_big_block(n, align, zero);
		if (HA_UNLIKELY(!p))
			return NULL;
		ha_books_big(tc, (int64_t)n);
		ha_books_alloc(tc, (int64_t)n);
		note_alloc(tc, p, NULL, n);
		ha_books_publish(tc, 0);
		return p;
	}
	char *b = ha_class_block(cls, n + pad);
	if (HA_UNLIKELY(!b))
		return NULL;
	ha_books_alloc(tc, ha_class_size[cls]);
	char *p = b + pad;
	if (zero)
		memset(p, 0, n);
	uint64_t *h = (uint64_t *)p - 2;
	note_alloc(tc, p, h, n);
	if (pad != HA_HDR)
		h[1] ^= HA_HDR_ALIGNED;
	return p;
}

/* The free of a small block p (at b in span s) whose header is h, or NULL
 * for a plain block: its accounting, then back to the thread cache. */
static void free_block(ha_span *s, void *p, uint64_t *h, char *b)
{
	ha_books_turn();
	int64_t c = 0;
	if (h) {
		if (hdr_flags(h) & HA_HDR_CLASS) {   /* undo the sample's books correction */
			c = ha_class_size[ha_size_to_class(HDR_REQ(h[0]))];
			ha_books_big(&ha_tc, (int64_t)s->size - c);
		}
		forget_small(p, h);
	} else if (ha_hot.prof_mode != HA_PROF_OFF) {
		/* a plain block in a marked span: perhaps recorded in place;
		 * its bytes count toward the next threshold check, as a
		 * sample's do */
		ha_prof_on_free(p);
		c = s->size;
	}
	ha_push_checked(s->cls, b);
	ha_tcache *tc = &ha_tc;      /* the block is in the cache: the check sees it freed */
	if (c && tc->state == 1 && ha_hot.prof_mode == HA_PROF_ON)
		ha_books_freed(tc, c);
}

/* The free of a default-mode sample of the session whose check word is m
 * (h: its header, matched against m), while that session samples: the
 * record back to the profiler, the books' correction undone, the block
 * back to the cache.  free_block's work for this one case, without its
 * questions (the sampled path's free, once per 512 KiB allocated). */
static void free_sample(ha_span *s, void *p, uint64_t *h, uint64_t m)
{
	ha_books_turn();
	uint64_t w = h[0];
	uint32_t rec = HDR_REC(w);
	int64_t c = ha_class_size[rec ? HDR_CHARGE_CLASS(w) : ha_size_to_class(HDR_REQ(w))];
	int sampled = (h[1] ^ m) != HA_HDR_CLASS;   /* HA_HDR_SAMPLED set too */
	ha_tcache *tc = &ha_tc;
	ha_books_big(tc, (int64_t)s->size - c);
	h[1] = 0;
	if (sampled) {
		if (rec)
			ha_prof_on_free_kept(p, rec, (size_t)c,
					     (uint32_t)((m ^ ha_hdr_secret) >> 32));
		else
			ha_prof_on_free(p);
	}
	ha_push_checked(s->cls, h);
	if (tc->state == 1)
		ha_books_freed(tc, c);
}

/* The rest of ha_compat_free_small, out of line so that the common case
 * needs no stack frame: anything but an ordinary block of this session
 * (m: its check word).  A default-mode sample of this session is known by
 * its check word alone; anything else, e.g. a plain block of a span marked
 * by ha_span_mark_recorded, is looked up. */
static HA_NOINLINE void free_odd(ha_span *s, void *p, uint64_t m)
{
	if (m && hdr_readable(p) && ((hdr_word(p, 1) ^ m ^ HA_HDR_CLASS) & ~HA_HDR_SAMPLED) == 0) {
		uint64_t *h = (uint64_t *)p - 2;
		if (HA_LIKELY(ha_hot.prof_mode == HA_PROF_ON))
			free_sample(s, p, h, m);
		else
			free_block(s, p, h, (char *)h);
		return;
	}
	char *b;
	uintptr_t rem = ha_block_of(s, p, &b);
	free_block(s, p, ha_compat_hdr_of(p, rem, "free(): invalid pointer (not the start of a block)"),
		   b);
}

void *ha_sample_block(ha_tcache *tc, size_t n, size_t charge)
{
	unsigned cls = hdr_class(n);
	if (!cls || !hdr_check())
		return NULL;
	uint64_t *h = ha_class_block(cls, n + HA_HDR);
	if (HA_UNLIKELY(!h))
		return NULL;
	h[0] = n;
	h[1] = hdr_check() ^ HA_HDR_CLASS;
	/* the books count `charge` for it, as the countdown did */
	ha_books_big(tc, (int64_t)charge - (int64_t)ha_class_size[cls]);
	return h + 2;
}

int ha_alloc_session_live(uint32_t session)
{
	return __atomic_load_n(&ha_hot.prof_mode, __ATOMIC_ACQUIRE) != HA_PROF_OFF &&
	       __atomic_load_n(&ha_prof_key, __ATOMIC_RELAXED) == session;
}

void ha_sample_mark(void *p, uint32_t rec, size_t charge)
{
	uint64_t *h = (uint64_t *)p - 2;
	h[1] ^= HA_HDR_SAMPLED;
	if (rec)
		h[0] = HDR_REQ(h[0]) | (uint64_t)ha_size_to_class(charge) << 32 |
		       (uint64_t)rec << 40;
}

/* A free whose bytes ran out this thread's freed-bytes budget. */
static HA_NOINLINE void free_check(unsigned cls, uint64_t *h)
{
	ha_tcache *tc = &ha_tc;
	ha_books_check(tc);
	ha_push_checked(cls, h);
}

void ha_compat_free_small(ha_span *s, void *p)
{
	/* the common case: an ordinary block of this session (the check word
	 * is 0 until the first session: no header matches then); while the
	 * profiler watches for the peak's turn, the odd path (free_block) */
	uint64_t m = hdr_check();
	uint64_t watch = (uint64_t)__atomic_load_n(&ha_hot.free_watch, __ATOMIC_RELAXED);
	if (HA_UNLIKELY(!m || !hdr_readable(p) || ((hdr_word(p, 1) ^ m) | watch))) {
		free_odd(s, p, m);
		return;
	}
	uint64_t *h = (uint64_t *)p - 2;
	h[1] = 0;
	ha_tcache *tc = &ha_tc;
	ha_tnode *nd = tc->node;     /* non-NULL exactly while state == 1 */
	if (HA_LIKELY(nd != NULL) && HA_LIKELY(ha_hot.prof_mode == HA_PROF_COMPAT)) {
		ha_counter_add(&nd->req_free_bytes, h[0]);
		if (HA_UNLIKELY((tc->free_check -= (int64_t)h[0]) < 0)) {
			free_check(s->cls, h);
			return;
		}
	}
	ha_push_checked(s->cls, h);
}

void ha_big_forget(uint64_t v, void *p)
{
	if (ha_hot.prof_mode == HA_PROF_OFF)
		return;
	if (!(v & HA_BIG_TRACKED)) {       /* a sample of the default mode */
		if (v & HA_LARGE_SAMPLED)
			ha_prof_on_free(p);
		return;
	}
	if ((v & ((uint64_t)0x7fff << HA_BIG_SESSION_SHIFT)) != big_session())
		return;
	if (v & HA_LARGE_SAMPLED)
		ha_prof_on_free(p);
	ha_tcache *tc = &ha_tc;
	if (counting(tc)) {
		size_t req = (size_t)HA_BIG_BYTES(v);
		ha_books_req(tc, 1, req);
		ha_books_freed(tc, (int64_t)req);
	}
}

int ha_compat_realloc_here(const ha_span *s, void *p, uint64_t *h, size_t n)
{
	if (hdr_class(n) != s->cls)
		return 0;
	ha_tcache *tc = &ha_tc;
	uint64_t flags = hdr_flags(h);
	if (flags & HA_HDR_ALIGNED)
		return 0;
	if (flags & HA_HDR_CLASS) {        /* a default-mode sample */
		if (counting(tc))
			return 0;
		/* its books count word 0's class: follow it (growth is allocated) */
		int64_t d = (int64_t)ha_class_size[ha_size_to_class(n)] -
			    (int64_t)ha_class_size[ha_size_to_class(HDR_REQ(h[0]))];
		ha_books_big(tc, d);
		if (d > 0)
			ha_books_alloc(tc, d);
		h[0] = (h[0] & ~(uint64_t)0xffffffff) | n;   /* the record stays */
		return 1;
	}
	if (!counting(tc)) {
		h[0] = n;
		return 1;
	}
	/* with compat profiling on, in place is a free plus an allocation */
	forget_small(p, h);
	note_alloc(tc, p, h, n);
	return 1;
}

void ha_compat_big_resized(void *old, void *q, uint64_t v, size_t n)
{
	uint64_t *w = ha_big_word(q);
	if (!(v & HA_BIG_TRACKED)) {       /* a default-mode sample */
		if (q != old) {            /* moved: its record would go stale */
			*w = n;
			ha_big_forget(v, old);
		}
		return;
	}
	*w = n;
	ha_big_forget(v, old);
	ha_tcache *tc = &ha_tc;
	if (counting(tc))
		note_alloc(tc, q, NULL, n);
}
