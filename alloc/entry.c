/* alloc/entry.c — the malloc family's entry points and C++'s hot operator
 * new/delete forms: the only file (with operators.cc) defining libc's and
 * C++'s names.
 *
 * One malloc fast path and one free fast path, the same code whether
 * profiling is on or off (profiling changes the countdown's values, not the
 * code).  The instruction counts are kept true by `make bench-instr`.
 *
 * malloc(n), n <= 1 KiB: 18 instructions (the same up to 32 KiB), no
 *   lock, no atomic, no call: the class's stack from one table, the
 *   countdown charged the class size (one subtract from memory and a
 *   branch), a pop from this thread's stack of block pointers, all
 *   %fs-relative (HA_SEG), the list as %fs:(cache, class offset) with no
 *   add between the table's load and the list's; the block's memory is
 *   not read.
 * free(p), p a small block: 25 instructions: the page map (two dependent
 *   loads and an add, no branch: a page without a span reads class 0, which
 *   no pointer passes) gives p's page's class and its span's first object,
 *   and the span record is not read; with the class's row (ha_pm.cl) a
 *   multiply, a rotate and a compare check that p is a block's start, a
 *   compare against the stack's top (a block freed twice in a row), a push
 *   onto the class's stack; the block's memory is not written.  The class
 *   comes as an offset that addresses both its row and its list, so the
 *   list's address is known one load after the map's.
 * C++: operator new and new[] (without alignment) are malloc's path inlined
 *   (18 too); operator delete and delete[] are free itself.  Their sized
 *   forms (34) take the class from the size, so the list's address does
 *   not wait for the page map, which only checks it.
 *
 * Everything else goes to noinline slow paths: an empty or full list
 * (thread_cache.c), a countdown that ran out (a sample, a threshold check,
 * a profiling switch), big blocks, alignment.  A sampled small block gets
 * a 16-byte header (compat.c) that makes it fail free's block-start check,
 * a big one a flag in its header word, so that a sample's free reaches a
 * slow path with nothing added to the small-block free path.  When every
 * allocation is recorded (sampling interval 1) a small block gets no
 * header: the span it came from is marked instead (ha_span.plain_max = 0),
 * (and its pages' entries name class 0), which fails the same check for
 * every block of that span.
 * Compatibility mode (compat.c) keeps its countdown at 0: every malloc
 * takes the slow path there, and its blocks' headers make free take
 * ha_compat_free_small.
 */
#include "alloc/fastpath.h"
#include "heapalloc.h"
#include <errno.h>
#include <unistd.h>

ha_hot_t ha_hot;
ha_counter ha_slow_allocs;
/* defined in operators.cc: pulls the operators into static links */
extern const char ha_operators_anchor;
__attribute__((used)) static const char *const ha_keep_operators = &ha_operators_anchor;

/* ------------------------------------------------------------------ */
/* fast paths: first, as they are what runs; what they call is below    */

static HA_NOINLINE void *malloc_due(size_t n, int64_t c);
static HA_NOINLINE void *alloc_slow(size_t n, size_t align, int zero);
/* p first, here and in ha_tcache_overflow: free's fast path tail-calls
 * them with p where it arrived (the first argument's register), so no
 * instruction of it moves p */
static HA_NOINLINE void free_odd(void *p);

static HA_NOINLINE void *new_slow(size_t n, int64_t c);

/* malloc's body; operator new's with cxx set, whose every miss (an empty
 * list too) goes to new_slow, so that nothing but the pop is between the
 * entry and its return. */
static inline void *alloc_fast_as(size_t n, int cxx)
{
	if (HA_LIKELY(n <= HA_SMALL_MAX)) {
		uintptr_t seg = ha_tl_key(0), k = ha_class_tab[(n + 15) >> 4];
		int64_t c = ha_size_split(seg, k);
		if (HA_LIKELY(ha_countdown_take_seg(&ha_tc_seg()->sample_left, c))) {
			void *p = ha_top_split(seg, k)[-1];
			if (HA_LIKELY(p)) {
				ha_popped_split(seg, k);
				return p;
			}
			if (!cxx)
				return ha_tcache_refill(seg + k, n);
		}
		return cxx ? new_slow(n, c) : malloc_due(n, c);
	}
	return cxx ? new_slow(n, 0) : alloc_slow(n, 0, 0);
}

static inline void *alloc_fast(size_t n)
{
	return alloc_fast_as(n, 0);
}

/* p's page's entry, at index i of the map: its class offset (the return)
 * and *d, p's low 32 bits less its span's first object's. */
static inline uintptr_t map_entry(intptr_t i, uint32_t *d)
{
	uintptr_t k;
#if defined(__x86_64__)
	/* both fields straight from the map: the compiler otherwise puts the
	 * entry's address in a register first, one instruction more (and a
	 * 32-bit load zero-extends k, which it does not know either) */
	__asm__("movl %c[ent]+4(%[pm],%[i],8), %k[k]\n\t"
		"subl %c[ent](%[pm],%[i],8), %[d]"
		: [k] "=&r"(k), [d] "+r"(*d)
		: [pm] "r"(&ha_pm), [i] "r"(i), [ent] "i"(offsetof(ha_pagemap, none.ent)),
		  "m"(*ha_pagemap_ent(i)));
#else
	k = ha_pagemap_ent(i)->coff;
	*d -= ha_pagemap_ent(i)->base_lo;
#endif
	return k;
}

/* Is d (from map_entry) not a block start of class row k, i.e. not a
 * multiple of its size below its span's objects? */
static inline int row_odd(uint32_t d, uintptr_t k)
{
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
	/* the row's fields from &ha_pm and k: the compiler otherwise puts the
	 * row's address in a register first, one instruction more */
	int odd;
	__asm__("imull %c[inv](%[pm],%[k]), %[d]\n\t"
		"movl %c[ror](%[pm],%[k]), %%ecx\n\t"
		"rorl %%cl, %[d]\n\t"
		"cmpl %c[lim](%[pm],%[k]), %[d]"
		: [d] "+r"(d), "=@ccae"(odd)
		: [pm] "r"(&ha_pm), [k] "r"(k),
		  [inv] "i"(offsetof(ha_pagemap, cl[0].inv)),
		  [ror] "i"(offsetof(ha_pagemap, cl[0].ror)),
		  [lim] "i"(offsetof(ha_pagemap, cl[0].lim)), "m"(ha_pm.cl)
		: "ecx");
	return odd;
#else
	const ha_pmclass *cl = (const ha_pmclass *)((uintptr_t)ha_pm.cl + k);
	uint32_t q = d * cl->inv;
	uint32_t r = cl->ror;
	q = (q >> r) | (q << (-r & 31));
	return q >= cl->lim;
#endif
}

/* free of p, small or not: a big block, NULL and an invalid pointer take
 * the odd path, as their page has no span (class 0).  The check is on p's
 * low 32 bits within the page p's bits 12-47 name: bits 48-63 are not
 * looked at (a pointer no program can dereference on x86-64). */
static inline void free_fast(void *p)
{
	uint32_t d = (uint32_t)(uintptr_t)p;
	/* p's class << HA_TL_SHIFT: its list's key less the cache's */
	uintptr_t k = map_entry(ha_pagemap_index((uintptr_t)p >> HA_PAGE_SHIFT), &d);
	if (HA_UNLIKELY(row_odd(d, k))) {
		free_odd(p);
		return;
	}
	/* the list's address is k plus a constant, not a further load: when
	 * the classes freed change from call to call, the next call's loads
	 * wait until these stores know their addresses
	 * (bench/results/free-chain.md) */
	ha_push_split(ha_tl_key(0), k, p);
}

/* free of p whose requested size n the caller names (C++'s sized delete):
 * n names the class as malloc found it, so the list's address waits for
 * one table load instead of the page map.  The map's entry must still name
 * that class, and p be a plain block start of it; anything else (a sampled
 * block, one from aligned new, a wrong n) takes free's own path. */
static HA_NOINLINE void free_unsized(void *p)
{
	free_fast(p);
}

static inline void free_sized_fast(void *p, size_t n)
{
	if (HA_UNLIKELY(n > HA_SMALL_MAX)) {
		free_unsized(p);
		return;
	}
	uintptr_t k = ha_class_tab[(n + 15) >> 4];
	uint32_t d = (uint32_t)(uintptr_t)p;
	uintptr_t e = map_entry(ha_pagemap_index((uintptr_t)p >> HA_PAGE_SHIFT), &d);
	if (HA_UNLIKELY(e != k) || HA_UNLIKELY(row_odd(d, k))) {
		free_unsized(p);
		return;
	}
	ha_push_split(ha_tl_key(0), k, p);
}

/* ------------------------------------------------------------------ */
/* blocks                                                               */

unsigned ha_aligned_class(size_t n, size_t align)
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

void *ha_class_block(unsigned cls, size_t n)
{
	return ha_small_pop(cls, n);   /* the refill retries and sets errno */
}

static void *big_block_once(size_t n, size_t align, int zero)
{
	__atomic_fetch_add(&ha_slow_allocs.v, 1, __ATOMIC_RELAXED);
	if (align <= HA_MIN_ALIGN && n >= HA_HUGE_MIN)
		return ha_huge_alloc(n, zero);
	return ha_arena_large_alloc(n, align, zero);
}

void *ha_big_block(size_t n, size_t align, int zero)
{
	int e = errno;
	void *p = big_block_once(n, align, zero);
	if (HA_UNLIKELY(!p) && n <= ((size_t)1 << 46)) {
		ha_release_cached();
		p = big_block_once(n, align, zero);
	}
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	errno = e;
	return p;
}

/* ------------------------------------------------------------------ */
/* the slow allocation path                                             */

/* A sampled allocation as a big block that counts `charge` (its class size)
 * in the books, marked sampled when the profiler recorded it. */
static void *alloc_sampled(ha_tcache *tc, size_t n, size_t align, int zero, size_t charge)
{
	void *p = ha_big_block(n, align, zero);
	if (HA_UNLIKELY(!p))
		return NULL;
	uint64_t *w = ha_big_word(p);
	*w = charge;
	ha_books_big(tc, (int64_t)charge);
	ha_books_publish(tc, 0);
	if (ha_prof_sampled(p, n, charge))
		*w |= HA_LARGE_SAMPLED;
	return p;
}

/* A sampled small allocation: a block with a header that marks it (free
 * then reaches ha_compat_free_small), else a big block. */
static void *sample_small(ha_tcache *tc, size_t n, int zero, size_t charge)
{
	void *p = ha_sample_block(tc, n, charge);
	if (HA_UNLIKELY(!p))
		return alloc_sampled(tc, n, 0, zero, charge);
	if (zero)
		memset(p, 0, n);
	ha_books_publish(tc, 0);
	uint32_t rec = ha_prof_sampled_kept(p, n, charge);
	if (rec)
		ha_sample_mark(p, rec, charge);
	return p;
}

/* A sample when every allocation is recorded: p (of its request's class)
 * needs no header; the profiler remembers it and its span is marked, so
 * its free reaches ha_compat_free_small. */
static void *record_in_place(ha_tcache *tc, void *p, size_t n, int zero, size_t charge)
{
	if (zero)
		memset(p, 0, n);
	ha_books_publish(tc, 0);
	if (ha_prof_sampled(p, n, charge))
		ha_span_mark_recorded(p);
	return p;
}

/* Every allocation the fast path does not finish: any size, alignment
 * (0 or a power of two), zeroing.  A small request's countdown charge has
 * not been taken (the fast path gives it back). */
static HA_NOINLINE void *alloc_slow(size_t n, size_t align, int zero)
{
	ha_ensure_init();
	ha_tcache *tc = &ha_tc;
	if (HA_UNLIKELY(tc->state == 0))
		ha_tcache_attach();
	ha_books_sync(tc);
	if (HA_UNLIKELY(tc->compat))
		return ha_compat_alloc(n, align, zero);
	unsigned cls = 0;
	if (align <= HA_MIN_ALIGN)
		cls = n <= HA_SMALL_MAX ? ha_size_to_class(n) : 0;
	else
		cls = ha_aligned_class(n, align);
	if (cls) {
		/* the block first, so that a threshold check counts it in use */
		int64_t c = ha_class_size[cls];
		void *p = ha_class_block(cls, n);
		if (HA_UNLIKELY(!p))
			return NULL;
		if (HA_UNLIKELY(ha_books_charge(tc, (size_t)c))) {
			if (ha_hot.record_all)
				return record_in_place(tc, p, n, zero, (size_t)c);
			void *q = align <= HA_MIN_ALIGN ? sample_small(tc, n, zero, (size_t)c) :
				  alloc_sampled(tc, n, align, zero, (size_t)c);
			if (HA_LIKELY(q != NULL)) {
				ha_push_checked(cls, p);
				return q;
			}
		}
		if (zero)
			memset(p, 0, n);
		return p;
	}
	void *p = ha_big_block(n, align, zero);
	if (HA_UNLIKELY(!p))
		return NULL;
	uint64_t *w = ha_big_word(p);
	*w = n;
	ha_books_big(tc, (int64_t)n);
	if (HA_UNLIKELY(ha_books_charge(tc, n)) && ha_prof_sampled(p, n, n))
		*w |= HA_LARGE_SAMPLED;
	ha_books_publish(tc, 0);
	return p;
}

/* A program mapping of n bytes (mmap.c): allocated and in use as a big
 * block would be, charged to the same countdown (compatibility mode: its
 * requested-bytes countdown). */
int ha_charge_mapping(size_t n)
{
	ha_ensure_init();
	ha_tcache *tc = &ha_tc;
	if (HA_UNLIKELY(tc->state == 0))
		ha_tcache_attach();
	ha_books_sync(tc);
	int sample = 0;
	ha_books_big(tc, (int64_t)n);
	if (tc->compat) {
		ha_books_alloc(tc, (int64_t)n);
		ha_books_req(tc, 0, n);
		sample = ha_books_charge_req(tc, n);
	} else {
		sample = ha_books_charge(tc, n);
	}
	ha_books_publish(tc, 0);
	return sample;
}

/* A counted program mapping of n bytes is gone: freed, as a big block. */
void ha_credit_mapping(size_t n)
{
	ha_tcache *tc = &ha_tc;
	ha_books_big(tc, -(int64_t)n);
	if (tc->state != 1)
		return;
	if (tc->compat)
		ha_books_req(tc, 1, n);
	if (ha_hot.prof_mode != HA_PROF_OFF)
		ha_books_freed(tc, (int64_t)n);
	ha_books_publish(tc, 0);
}

/* malloc(n <= 32 KiB) and operator new past their fast path (a countdown
 * that ran out, a thread's first call, new's empty list): the fast path
 * charged c to the countdown, given back here as the slow path charges the
 * block again (ha_books_charge). */
static HA_NOINLINE void *malloc_due(size_t n, int64_t c)
{
	ha_tcache *tc = &ha_tc;
	ha_countdown_give_back(&tc->sample_left, c);
	if (HA_LIKELY(tc->compat))
		return ha_compat_malloc(n);
	return alloc_slow(n, 0, 0);
}

/* free of a big block (or NULL, or an invalid pointer: aborts). */
static HA_NOINLINE void free_big(void *p)
{
	if (!p)
		return;
	int huge = ha_huge_is(p);
	if (HA_UNLIKELY(!huge && !ha_arena_is_large(p)))
		ha_fatal("free(): invalid pointer or double free (not allocated by heapalloc, or freed already)", p);
	ha_books_turn();
	uint64_t v = *(huge ? ha_huge_req(p) : ha_arena_large_req(p));
	int64_t u = (int64_t)HA_BIG_BYTES(v);
	if (v & (HA_LARGE_SAMPLED | HA_BIG_TRACKED))
		ha_big_forget(v, p);
	ha_tcache *tc = &ha_tc;
	ha_books_big(tc, -u);
	if (tc->state == 1 && ha_hot.prof_mode == HA_PROF_ON)
		ha_books_freed(tc, u);
	if (huge)
		ha_huge_free(p);
	else
		ha_arena_large_free(p);
}

/* free of a pointer that is not a plain block start: a big block or NULL
 * (their pages have no span), a compat block, a sample, a block of a
 * marked span, or an invalid pointer (the fast path's page-map lookup
 * takes p modulo 2^48). */
static HA_NOINLINE void free_odd(void *p)
{
	if (!p)          /* glibc frees a dozen NULLs as each thread ends */
		return;
	ha_span *s = ha_pagemap_at((uintptr_t)p >> HA_PAGE_SHIFT);
	if (s == &ha_pm.nospan) {
		free_big(p);
		return;
	}
	if (HA_UNLIKELY((uintptr_t)p >> 48))
		ha_fatal("free(): invalid pointer", p);
	ha_compat_free_small(s, p);
}

void *ha_alloc(size_t n)
{
	return alloc_fast(n);
}

void *ha_alloc_aligned(size_t align, size_t n)
{
	return alloc_slow(n, align, 0);
}

void ha_free(void *p)
{
	free_fast(p);
}

size_t ha_usable_size(const void *p)
{
	if (!p)
		return 0;
	ha_span *s = ha_pagemap_get(p);
	if (s) {
		char *b;
		uintptr_t rem = ha_block_of(s, p, &b);
		/* a compat block's header is the profiler's */
		ha_compat_hdr_of((void *)p, rem, "malloc_usable_size(): invalid pointer");
		return s->size - rem;
	}
	if (ha_huge_is(p))
		return ha_huge_usable(p);
	if (!ha_arena_is_large(p))
		ha_fatal("malloc_usable_size(): invalid pointer", p);
	return ha_arena_large_usable(p);
}

/* ------------------------------------------------------------------ */
/* realloc                                                              */

/* A big block (header word v) resized in place to n bytes (huge: perhaps
 * moved from p to q): the books follow its size, growth is allocated. */
static void big_resized(void *p, void *q, uint64_t v, size_t n)
{
	ha_tcache *tc = &ha_tc;
	int64_t d = (int64_t)n - (int64_t)HA_BIG_BYTES(v);
	*ha_big_word(q) = (v & ~HA_BIG_BYTES(~(uint64_t)0)) | n;
	ha_books_big(tc, d);
	if (d > 0)
		ha_books_alloc(tc, d);
	ha_books_publish(tc, 0);
	if (v & (HA_LARGE_SAMPLED | HA_BIG_TRACKED))
		ha_compat_big_resized(p, q, v, n);
}

/* A block that stays where it is charges nothing (same class; a large
 * block shrinking by at most half; a huge block resized by mremap charges
 * only the bytes it grew by); one that moves is a new allocation.
 * Compatibility mode counts a free plus an allocation even in place. */
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
	int e = errno;   /* a failed attempt in place must not show on success */
	if (s) {
		if (HA_UNLIKELY(ha_freed_last(s->tl_key, p)))
			ha_fatal("realloc(): double free detected (the block was freed)", p);
		if (HA_LIKELY(ha_plain_start(s, p))) {
			if (n <= HA_SMALL_MAX && ha_size_to_class(n) == s->cls &&
			    ha_hot.prof_mode != HA_PROF_COMPAT)
				return p;
			old = s->size;
		} else {
			char *b;
			uintptr_t rem = ha_block_of(s, p, &b);
			uint64_t *h = ha_compat_hdr_of(p, rem, "realloc(): invalid pointer");
			old = s->size - rem;
			if (rem == 16 && ha_compat_realloc_here(s, p, h, n))
				return p;
		}
	} else if (ha_huge_is(p)) {
		old = ha_huge_usable(p);
		if (n >= HA_HUGE_MIN) {
			uint64_t v = *ha_huge_req(p);
			void *q = ha_huge_realloc(p, n);
			if (q) {
				big_resized(p, q, v, n);
				return q;
			}
		}
	} else {
		if (HA_UNLIKELY(!ha_arena_is_large(p)))
			ha_fatal("realloc(): invalid pointer", p);
		old = ha_arena_large_usable(p);
		uint64_t v = *ha_arena_large_req(p);
		/* a sample of a small request stays while it fits: moving it
		 * would only make another sample due */
		if (n <= old && n < HA_HUGE_MIN &&
		    (n > HA_SMALL_MAX ? n >= old / 2 : (v & HA_LARGE_SAMPLED) && !(v & HA_BIG_TRACKED))) {
			big_resized(p, p, v, n);
			return p;
		}
	}
	void *q = ha_alloc(n);
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
	free_fast(p);
}

/* C23's free_sized (glibc 2.36 has none): n is what malloc, calloc (its
 * product) or realloc was asked for, so the class comes from it, as for
 * C++'s sized delete; and free_aligned_sized, which is free. */
HA_EXPORT void free_sized(void *p, size_t n)
{
	free_sized_fast(p, n);
}

HA_EXPORT void free_aligned_sized(void *p, size_t align, size_t n)
{
	(void)align;
	(void)n;
	free_unsized(p);
}

/* C++'s plain and array new and its deletes without an alignment, the forms
 * a C++ program calls: malloc's and free's fast paths, not a call away in
 * operators.cc (which cannot address the cache through HA_SEG).  A new that
 * gets NULL goes to operators.cc's new_handler loop, whose std::bad_alloc
 * unwinds through this frame; a sized delete's size is not read. */
void *ha_cxx_new_failed(size_t n);

/* operator new past its fast path: malloc's (the charge c given back),
 * then the new_handler loop on NULL. */
static HA_NOINLINE void *new_slow(size_t n, int64_t c)
{
	void *p = n <= HA_SMALL_MAX ? malloc_due(n, c) : alloc_slow(n, 0, 0);
	return HA_LIKELY(p != NULL) ? p : ha_cxx_new_failed(n);
}

HA_EXPORT void *ha_cxx_new(size_t n) __asm__("_Znwm");
HA_EXPORT void *ha_cxx_new(size_t n)
{
	return alloc_fast_as(n, 1);
}
HA_EXPORT __typeof__(ha_cxx_new) ha_cxx_new_array __asm__("_Znam")
	__attribute__((alias("_Znwm")));
#define HA_DELETE(cname, sym) \
	HA_EXPORT __typeof__(free) cname __asm__(sym) __attribute__((alias("free"), copy(free)))
HA_DELETE(ha_cxx_delete, "_ZdlPv");
HA_DELETE(ha_cxx_delete_array, "_ZdaPv");
HA_EXPORT void ha_cxx_delete_sized(void *p, size_t n) __asm__("_ZdlPvm");
HA_EXPORT void ha_cxx_delete_sized(void *p, size_t n)
{
	free_sized_fast(p, n);
}
HA_EXPORT __typeof__(ha_cxx_delete_sized) ha_cxx_delete_array_sized __asm__("_ZdaPvm")
	__attribute__((alias("_ZdlPvm")));

HA_EXPORT void *calloc(size_t n, size_t m)
{
	size_t t;
	if (HA_UNLIKELY(__builtin_mul_overflow(n, m, &t))) {
		errno = ENOMEM;
		return NULL;
	}
	if (t <= HA_SMALL_MAX) {
		void *p = alloc_fast(t);
		if (HA_LIKELY(p != NULL))
			memset(p, 0, t);
		return p;
	}
	return alloc_slow(t, 0, 1);
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

/* glibc's internal names, so that static links and libc itself find us
 * (stats.c aliases the statistics calls). */
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
