/* alloc/fastpath.h — the inline pieces the entry points are made of, shared
 * by entry.c (the entry points) and compat.c (compatibility-mode blocks).
 */
#ifndef HA_ALLOC_FASTPATH_H
#define HA_ALLOC_FASTPATH_H
#include "alloc/internal.h"
#include <string.h>

/* top += 1 (down: -= 1) as one read-modify-write of memory on x86-64: the
 * compiler otherwise computes the new top in a register and stores it,
 * one instruction more on each fast path. */
static inline void ha_tl_top_move(void **HA_SEG *top, int up)
{
#if defined(__x86_64__)
	if (up)
		__asm__("addq $8, %0" : "+m"(*top));
	else
		__asm__("subq $8, %0" : "+m"(*top));
#else
	*top += up ? 1 : -1;
#endif
}

/* Pop a block from this thread's stack named by key (ha_tl_key; refill
 * when empty: the slot below is then a NULL guard). */
static inline void *ha_pop_at(uintptr_t key, size_t n)
{
	ha_tlist HA_SEG *l = ha_tl_of_key(key);
	void **t = l->top;
	void *p = t[-1];
	if (HA_LIKELY(p)) {
		ha_tl_top_move(&l->top, 0);
		l->room++;
		return p;
	}
	return ha_tcache_refill(key, n);
}

static inline void *ha_small_pop(unsigned cls, size_t n)
{
	return ha_pop_at(ha_tl_key(cls), n);
}

/* Push a block onto this thread's stack named by key (ha_tl_key); the same
 * block twice in a row is a double free.  Full (or no stack: room 0), the
 * block goes to the slow path unstored. */
static inline void ha_push_at(uintptr_t key, void *p)
{
	ha_tlist HA_SEG *l = ha_tl_of_key(key);
	void **t = l->top;
	if (HA_UNLIKELY(t[-1] == p))
		ha_fatal("free(): double free detected", p);
	if (HA_UNLIKELY(--l->room < 0)) {
		ha_tcache_overflow(p, key);
		return;
	}
	*t = p;
	ha_tl_top_move(&l->top, 1);
}

/* ha_push_at(seg + k, p), for free's fast path: seg the cache's key
 * (ha_tl_key(0)), k a class's offset.  On x86-64 the list is addressed as
 * %fs:(seg,k), so that no add stands between the page map's entry and
 * the list's address. */
static inline void ha_push_split(uintptr_t seg, uintptr_t k, void *p)
{
#if defined(__x86_64__) && HA_SEG_ON && defined(__GCC_ASM_FLAG_OUTPUTS__)
	void **t;
	int full;
	__asm__ volatile("movq %%fs:(%[s],%[k]), %[t]"
			 : [t] "=r"(t)
			 : [s] "r"(seg), [k] "r"(k)
			 : "memory");
	if (HA_UNLIKELY(t[-1] == p))
		ha_fatal("free(): double free detected", p);
	__asm__ volatile("subl $1, %%fs:%c[room](%[s],%[k])"
			 : "=@ccs"(full)
			 : [s] "r"(seg), [k] "r"(k), [room] "i"(offsetof(ha_tlist, room))
			 : "memory");
	if (HA_UNLIKELY(full)) {
		ha_tcache_overflow(p, seg + k);
		return;
	}
	*t = p;
	__asm__ volatile("addq $8, %%fs:(%[s],%[k])"
			 :
			 : [s] "r"(seg), [k] "r"(k)
			 : "memory");
#else
	ha_push_at(seg + k, p);
#endif
}

/* malloc's half of ha_push_split: the list at seg + k (seg = ha_tl_key(0),
 * k a class's offset) addressed as %fs:(seg,k) on x86-64, so that no add
 * stands between the class table's load and the list's.  The size (the
 * sampling countdown's charge), the top, and the pop once t[-1] is known
 * to be a block. */
#if defined(__x86_64__) && HA_SEG_ON && defined(__GCC_ASM_FLAG_OUTPUTS__)
static inline uint64_t ha_size_split(uintptr_t seg, uintptr_t k)
{
	uint64_t c;   /* movl clears the upper half: no zero-extension after */
	__asm__ volatile("movl %%fs:%c[sz](%[s],%[k]), %k[c]"
			 : [c] "=r"(c)
			 : [s] "r"(seg), [k] "r"(k), [sz] "i"(offsetof(ha_tlist, size))
			 : "memory");
	return c;
}

static inline void **ha_top_split(uintptr_t seg, uintptr_t k)
{
	void **t;
	__asm__ volatile("movq %%fs:(%[s],%[k]), %[t]"
			 : [t] "=r"(t)
			 : [s] "r"(seg), [k] "r"(k)
			 : "memory");
	return t;
}

static inline void ha_popped_split(uintptr_t seg, uintptr_t k)
{
	__asm__ volatile("addl $1, %%fs:%c[room](%[s],%[k])\n\t"
			 "subq $8, %%fs:(%[s],%[k])"
			 :
			 : [s] "r"(seg), [k] "r"(k), [room] "i"(offsetof(ha_tlist, room))
			 : "memory", "cc");
}
#else
static inline uint64_t ha_size_split(uintptr_t seg, uintptr_t k)
{
	return ha_tl_of_key(seg + k)->size;
}

static inline void **ha_top_split(uintptr_t seg, uintptr_t k)
{
	return ha_tl_of_key(seg + k)->top;
}

static inline void ha_popped_split(uintptr_t seg, uintptr_t k)
{
	ha_tlist HA_SEG *l = ha_tl_of_key(seg + k);
	ha_tl_top_move(&l->top, 0);
	l->room++;
}
#endif

/* Is p the block this thread freed last in its class (the top of the stack
 * named by key)?  realloc asks before it allocates: the new block may take
 * p off the stack (the profiler's own allocations when every allocation is
 * recorded, an idle cache's scavenge at a refill), after which the push of
 * the old block would no longer see it twice, and p would be live twice. */
static inline int ha_freed_last(uintptr_t key, const void *p)
{
	return ha_tl_of_key(key)->top[-1] == p;
}

static inline void ha_push_checked(unsigned cls, void *p)
{
	ha_push_at(ha_tl_key(cls), p);
}

/* Is p the start of one of span s's blocks (a plain block) that free may
 * push without a look?  Never in a span marked by ha_span_mark_recorded.
 * With size = odd << ror and inv = odd^-1 mod 2^64, q = (off * inv)
 * rotated right by ror is off / size when size divides off, and above
 * 2^64 / size when it does not (Hacker's Delight, 10-17: exact for every
 * 64-bit off), so one compare against plain_max (<= the span's objects)
 * checks both. */
static inline int ha_plain_start(const ha_span *s, const void *p)
{
	uint64_t q = ((uintptr_t)p - s->base) * s->inv;
	q = (q >> s->ror) | (q << (-s->ror & 63));
	return q < s->plain_max;
}

/* p (a small block) was recorded in place: from now on every free in its
 * span takes the slow path (ha_compat_free_small), which reports it.  The
 * mark stays until every block of the span is back in it (central.c). */
static inline void ha_span_mark_recorded(void *p)
{
	ha_span *s = ha_pagemap_get(p);
	if (__atomic_load_n(&s->plain_max, __ATOMIC_RELAXED)) {
		__atomic_store_n(&s->plain_max, 0, __ATOMIC_RELAXED);
		ha_pagemap_mark(s);   /* free's entries: class 0 */
	}
}

/* A fast path's charge to a countdown (sample_left, or the compatibility
 * mode's compat_left): *c -= n; is *c still > 0?  On x86-64 one
 * read-modify-write instruction whose flags the branch uses (the compiler
 * otherwise loads, copies, subtracts, stores and tests). */
static inline int ha_countdown_take(int64_t *c, int64_t n)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
	int more;
	__asm__("subq %2, %0" : "+m"(*c), "=@ccg"(more) : "er"(n));
	return more;
#else
	return (*c -= n) > 0;
#endif
}

/* A charge taken by a fast path whose allocation then goes to a slow
 * path, which charges it again: the one give-back (malloc_due, the
 * compatibility mode's malloc). */
static inline void ha_countdown_give_back(int64_t *c, int64_t n)
{
	*c += n;
}

/* ha_countdown_take on this thread's cache through HA_SEG. */
static inline int ha_countdown_take_seg(int64_t HA_SEG *c, int64_t n)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
	int more;
	__asm__("subq %2, %0" : "+m"(*c), "=@ccg"(more) : "er"(n));
	return more;
#else
	return (*c -= n) > 0;
#endif
}

/* Owner-only counters, read racily by other threads: one read-modify-write
 * instruction without a lock prefix (a reader sees the old or the new value
 * of an aligned 8-byte word), elsewhere a relaxed store of the sum. */
static inline void ha_counter_add(uint64_t *c, uint64_t v)
{
#if defined(__x86_64__)
	__asm__("addq %1, %0" : "+m"(*c) : "er"(v));
#else
	__atomic_store_n(c, *c + v, __ATOMIC_RELAXED);
#endif
}

/* Where p sits in its span: *bp the block's start; returns p's offset in
 * it.  Aborts if p is outside the span's blocks. */
static inline uintptr_t ha_block_of(const ha_span *s, const void *p, char **bp)
{
	uint64_t off = (uintptr_t)p - s->base;
	uint64_t idx = (uint64_t)(((unsigned __int128)off * s->magic) >> 64);
	if (HA_UNLIKELY(idx >= s->nobj))
		ha_fatal("free(): invalid pointer (not the start of a block)", p);
	uintptr_t rem = off - idx * s->size;
	*bp = (char *)p - rem;
	return rem;
}

/* Header word of a big (large or huge) block. */
static inline uint64_t *ha_big_word(void *p)
{
	return ha_huge_is(p) ? ha_huge_req(p) : ha_arena_large_req(p);
}


/* ---- entry.c ---- */
/* Smallest class >= n whose size is a multiple of align (align <= 4096,
 * power of two); 0 if none fits in a size class. */
unsigned ha_aligned_class(size_t n, size_t align);
/* A block from class cls, or NULL with errno ENOMEM (the refill has
 * released the caches and retried). */
void *ha_class_block(unsigned cls, size_t n);
/* A big block (large or huge by size; align 0 or a power of two), retried
 * once after releasing caches; NULL with errno ENOMEM.  Not in the books. */
void *ha_big_block(size_t n, size_t align, int zero);

/* ---- compat.c: compatibility mode (HEAP_PROFILE_EXACT_TOTALS=1) ---- */
/* Any allocation in compatibility mode: a small block with its 16-byte
 * header, or a big block whose header word holds the size. */
void *ha_compat_alloc(size_t n, size_t align, int zero);
/* malloc(n <= 32 KiB) in compatibility mode, in a live thread that has
 * taken the current switch: a pop, the countdown, one counter, the header;
 * anything unusual goes to ha_compat_alloc. */
void *ha_compat_malloc(size_t n);
/* free of a small block that is not a plain block start: a compat block,
 * or an invalid pointer (aborts). */
void ha_compat_free_small(ha_span *s, void *p) HA_NOINLINE;
/* A default-mode sample of n <= 32 KiB - 16 bytes charged `charge`: a
 * block with a compat header flagged HA_HDR_CLASS (its books count
 * `charge`), or NULL (no class fits, no memory). */
void *ha_sample_block(ha_tcache *tc, size_t n, size_t charge);
/* The profiler recorded the sample at p (from ha_sample_block) charged
 * `charge` bytes; rec: the record it gave to keep in p's header, or 0. */
void ha_sample_mark(void *p, uint32_t rec, size_t charge);
/* End of a big block's life (v: its header word, read before the block
 * moved or went away; p its address then): report a sampled block, count
 * a compat block. */
void ha_big_forget(uint64_t v, void *p);
/* The header before p (rem bytes into its block), NULL for a plain block;
 * aborts on a pointer that is neither. */
uint64_t *ha_compat_hdr_of(void *p, uintptr_t rem, const char *what);
/* realloc of a compat block h (rem == 16) that stays in its class: the
 * accounting of a free plus an allocation.  1 if it stayed. */
int ha_compat_realloc_here(const ha_span *s, void *p, uint64_t *h, size_t n);
/* A big block with header word v resized in place (huge: perhaps moved
 * from old to q) to n bytes: a sampled block that moved is forgotten; a
 * compat block counts a free and an allocation. */
void ha_compat_big_resized(void *old, void *q, uint64_t v, size_t n);

#endif
