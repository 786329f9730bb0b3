/* alloc/internal.h — the allocator's internal map.
 *
 * Tiers (google/tcmalloc names):
 *   front-end   thread_cache.c   per-thread stacks of block pointers, no lock, no atomic
 *   middle-end  central.c        per-class transfer arrays + span free lists
 *   back-end    arena.c          spans and large blocks from mimalloc (the only
 *                                includer of <mimalloc.h>)
 *               huge.c           blocks >= 1 MiB: carved from reserved regions,
 *                                freed pages merged and kept up to a budget
 *   maps        pagemap.c        page -> span, O(1), for any pointer
 *               size_class.c     the class table
 *               meta.c           never-freed bookkeeping memory (mmap)
 *   entry       entry.c          malloc family, its two fast paths, glibc
 *               operators.cc     aliases (only files defining libc / C++ names)
 *               cxx_runtime.c    operator new's C++ runtime pieces, found on failure
 *               mmap.c           mmap, mmap64, munmap, mremap: raw system
 *                                calls; the program's own are counted when
 *                                HEAP_PROFILE_MMAP profiles them
 *               fastpath.h       the inline pieces entry.c and compat.c share
 *               stats.c          mallinfo, malloc_stats, malloc_trim, mallopt
 *   profiling   books.c          the books (allocated, in use) and the switch
 *               compat.c         compatibility mode's headers; sample headers
 *   process     init.c           first-call init, fork, thread exit
 *               retain.c         what freed memory the caches keep (retain.h)
 *               purge.c          the caches' clock; the opt-in purge thread
 *               log.c            stderr messages that never allocate
 *
 * Prototypes below are grouped under the file that defines them.
 *
 * Synchronization (lock order, outermost first):
 *   [libc's stdio list lock, at fork only: init.c] ->
 *   profiler locks (prof/, via ha_prof_prefork) -> thread-cache registry ->
 *   central[cls].lock (ascending cls) -> span-pool lock -> record lock -> large cache lock
 *   -> huge cache lock -> page-map leaf lock -> meta lock.
 * No lock is held while calling into mimalloc for span memory, nor while the
 * profiler unwinds.  Every lock is taken by pthread_atfork's prepare handler
 * in that order and released (parent) or re-initialised (child) after fork,
 * except in a fork() made by a signal handler on a thread that holds one of
 * them or is inside fork itself: that fork takes none (init.c).
 * Signal handlers never allocate through heapalloc locks: prof/ only posts.
 * The purge thread (purge.c) takes the span-record, large-cache and huge
 * locks, one at a time, and is started only by a thread holding none.
 */
#ifndef HA_ALLOC_INTERNAL_H
#define HA_ALLOC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "alloc/base.h"
#include "alloc/lock.h"
#include "alloc/log.h"
#include "alloc/sys.h"
#include "alloc/hooks.h"   /* the profiler interface, both ways */
#include "alloc/retain.h"  /* what freed memory is kept, how long, why */


#define HA_PAGE_SHIFT 12
#define HA_PAGE_SIZE ((size_t)1 << HA_PAGE_SHIFT)
#define HA_SMALL_MAX 32768        /* largest size served by a size class */
#define HA_NCLASSES 74            /* class 0 unused; 1..72 real, 73 below */
/* 34 KiB, only for a profiled request of 32 KiB - 15 .. 32 KiB plus its
 * 16-byte header (alloc/entry.c); ha_size_to_class() never returns it */
#define HA_CLASS_HDR_MAX 73
#define HA_MIN_ALIGN 16
#define HA_LARGE_HDR 16           /* header before every large block */

/* ---- size_class.c ---------------------------------------------------- */
/* Every class size is a multiple of 16, so one table indexed by
 * (n + 15) / 16 is exact: no branch on the size's range in malloc.  It
 * holds cls * 16, the offset of the class's list in a thread cache
 * (ha_tlist is 16 bytes), which malloc uses as is; 4 KiB, its first three
 * lines cover n <= 1 KiB. */
#define HA_TL_SHIFT 4
extern uint16_t ha_class_tab[HA_SMALL_MAX / 16 + 1];
extern uint32_t ha_class_size[HA_NCLASSES];
extern uint32_t ha_class_batch[HA_NCLASSES];   /* objects moved per transfer */
/* Blocks of class cls that fill whole 128-byte line pairs (8 of 16 or
 * 48 B, 4 of 32 B, 2 of 64 B, 1 from 128 B on; a pair, because x86's
 * adjacent-line prefetcher moves lines in pairs): carving and slow start
 * move blocks in such groups, so that no pair holds blocks of two threads
 * that write them (false sharing). */
static inline uint32_t ha_class_line_group(unsigned cls)
{
	unsigned z = (unsigned)__builtin_ctz(ha_class_size[cls]);
	return z >= 7 ? 1 : 128u >> z;
}
extern uint32_t ha_class_span_bytes[HA_NCLASSES];
extern uint64_t ha_class_magic[HA_NCLASSES];   /* ceil(2^64 / size) */
/* size = odd << ror: ha_class_inv is odd's inverse mod 2^64 */
extern uint64_t ha_class_inv[HA_NCLASSES];
extern uint32_t ha_class_ror[HA_NCLASSES];
void ha_size_class_init(void);

static inline unsigned ha_size_to_class(size_t n)
{
	return ha_class_tab[(n + 15) >> 4] >> HA_TL_SHIFT;
}
/* The class of max(n, 1) + 16 for n <= HA_HDR_LO_MAX, in one load: a
 * profiled block's request plus its header (alloc/entry.c). */
#define HA_HDR_LO_MAX 1008
extern uint8_t ha_class_hdr_lo[HA_HDR_LO_MAX / 8 + 1];

/* ---- meta.c ------------------------------------------------------------ */
void *ha_meta_alloc(size_t bytes);    /* zeroed, 16-aligned, never freed */
uint64_t ha_meta_bytes(void);
uint64_t ha_meta_resident(void);      /* resident bytes of its chunks */
void ha_meta_note(const void *p, size_t len);   /* a range for ha_meta_ranges */
void ha_meta_prefork(void);
void ha_meta_postfork(int child);

/* ---- span (central.c owns the lists; arena.c the memory) --------------- */
typedef struct ha_span {
	/* free's fast path reads the first 36 bytes only (records are
	 * 64-aligned: one cache line), written only when the span is set up
	 * or marked: what the central cache changes at every carve or
	 * return (nfree, carved, freelist) sits on the second line, so that
	 * a free on another core keeps its copy */
	uintptr_t base;          /* first object */
	uint64_t inv;            /* ha_class_inv[cls]: ha_plain_start */
	uint64_t plain_max;      /* objects free's fast path accepts: nobj, or 0
				  * once it may hold a block recorded in place
				  * (every free in it then goes slow) */
	uintptr_t tl_key;        /* ha_tl_key(cls) */
	uint32_t ror;            /* ha_class_ror[cls] */
	uint32_t cls;
	uint64_t magic;          /* ha_class_magic[cls]: ha_block_of */
	uint32_t nobj;           /* objects the span holds */
	uint32_t size;           /* ha_class_size[cls] */
	uint32_t nfree __attribute__((aligned(64)));   /* objects on span->freelist */
	uint32_t carved;         /* objects handed out by bump so far */
	void *freelist;          /* objects returned to this span */
	union {
		struct {
			/* its class's partial list, or a dead list */
			struct ha_span *next, *prev;
		};
		ha_hot_entry hot;   /* in the free pool: its hot list */
	};
	uint16_t on_list;
	uint16_t kept_empty;     /* counted in its class's kept empty bytes */
	uint32_t color;          /* the first object carved (central.c) */
} ha_span;



/* ---- spanrec.c: span records, their unused pages given back ------------- */
ha_span *ha_spanrec_get(void);     /* zeroed, 64-aligned; NULL when out */
void ha_spanrec_put(ha_span *s);
void ha_spanrec_decay(void);       /* pages all of whose records are free */
void ha_spanrec_prefork(void);
void ha_spanrec_postfork(int child);

/* ---- pagemap.c ---------------------------------------------------------- */
#define HA_PM_LEAF_BITS 14   /* a leaf (2 x 128 KiB) covers 64 MiB; the root is 32 MiB of BSS, touched sparsely */
#define HA_PM_ROOT_BITS (48 - HA_PAGE_SHIFT - HA_PM_LEAF_BITS)
#define HA_PM_LEAF_MASK ((1u << HA_PM_LEAF_BITS) - 1)
/* What free's fast path reads of a page, in one 8-byte entry (one line
 * covers 8 pages): the low 32 bits of its span's first object and the
 * span's class as an offset, cls << HA_TL_SHIFT: the class's list in the
 * thread cache and its row of ha_pm.cl, so free reaches both with no
 * further load.  0 (no span, or a span marked by ha_span_mark_recorded)
 * is class 0, which no pointer passes. */
typedef struct ha_pent {
	uint32_t base_lo;
	uint32_t coff;
} ha_pent;
/* A leaf: per page its span (distance from ha_pm.nospan) and its entry,
 * both at the same index, so one root load reaches either; then its
 * bookkeeping (pagemap.c), per part of 512 pages (one page of each array):
 * the spans that name a page of it, and which parts may be resident. */
#define HA_PM_PART_BITS 9
#define HA_PM_PARTS (1u << (HA_PM_LEAF_BITS - HA_PM_PART_BITS))
typedef struct ha_pmleaf {
	uintptr_t span[1u << HA_PM_LEAF_BITS];
	ha_pent ent[1u << HA_PM_LEAF_BITS];
	uint32_t users[HA_PM_PARTS];   /* spans set in the part | HA_PM_DISCARDING */
	uint32_t dirty;                /* parts written since last given back */
	struct ha_pmleaf *next;        /* every leaf, for ha_pagemap_decay */
} ha_pmleaf;
/* Free's row of a class: the block-start check in 32 bits (a span's
 * offsets are below 2^32: size = odd << ror, inv the odd part's inverse
 * mod 2^32, lim the span's objects; class 0: inv and lim 0, so every
 * pointer fails).  A row is as long as a thread-cache list, so that a
 * page's coff indexes both. */
typedef struct ha_pmclass {
	uint32_t inv;
	uint32_t ror;
	uint32_t lim;
	uint32_t pad;
} ha_pmclass;
/* A root entry is its leaf's distance from `none`, in span entries: 0
 * (all of the BSS root at first) is `none`, a leaf that is never written.
 * A leaf's span entry is its span's distance in bytes from `nospan`, a
 * span of zeros (magic 0: no pointer is a plain block of it): 0 is no
 * span.  So every lookup is two loads and an add with no branch. */
typedef struct ha_pagemap {
	ha_span nospan;
	ha_pmclass cl[HA_NCLASSES];   /* beside the root: free addresses both from &ha_pm */
	ha_pmleaf none;
	intptr_t root[1u << HA_PM_ROOT_BITS];
} ha_pagemap;
extern ha_pagemap ha_pm;

/* Page pg's index in ha_pm.none.span (and .ent): its leaf's distance plus
 * its place in the leaf; pg < 2^36 or it is taken modulo 2^36. */
static inline intptr_t ha_pagemap_index(uintptr_t pg)
{
	return ha_pm.root[(pg >> HA_PM_LEAF_BITS) & ((1u << HA_PM_ROOT_BITS) - 1)] +
	       (intptr_t)(pg & HA_PM_LEAF_MASK);
}

/* The span of page pg, &ha_pm.nospan for none. */
static inline ha_span *ha_pagemap_at(uintptr_t pg)
{
	intptr_t i = ha_pagemap_index(pg);
	uintptr_t e = *(uintptr_t *)((uintptr_t)ha_pm.none.span + (uintptr_t)i * sizeof(uintptr_t));
	return (ha_span *)((uintptr_t)&ha_pm.nospan + e);
}

/* Free's entry of the page at index i (ha_pagemap_index). */
static inline const ha_pent *ha_pagemap_ent(intptr_t i)
{
	return (const ha_pent *)((uintptr_t)ha_pm.none.ent + (uintptr_t)i * sizeof(ha_pent));
}

/* The span of p, or NULL. */
static inline ha_span *ha_pagemap_get(const void *p)
{
	uintptr_t pg = (uintptr_t)p >> HA_PAGE_SHIFT;
	if (HA_UNLIKELY(pg >> (HA_PM_ROOT_BITS + HA_PM_LEAF_BITS)))
		return NULL;
	ha_span *s = ha_pagemap_at(pg);
	return s != &ha_pm.nospan ? s : NULL;
}
/* Span s's pages [start, start + bytes) name s, their entries its class
 * while it is unmarked; s NULL clears exactly the pages one span was set
 * on (the span leaves the count of users each part of the map keeps). */
int ha_pagemap_set(uintptr_t start, size_t bytes, ha_span *s); /* 0 or ENOMEM */
/* The entries of span s's pages: its class while plain_max says it is
 * unmarked, else 0 (ha_span_mark_recorded and its undoing). */
void ha_pagemap_mark(const ha_span *s);
/* The decay step's part for the page map: a leaf's part no span names now
 * gives its pages back (a burst spread over a GiB leaves 6 MiB of leaves
 * behind otherwise, 256 KiB per 64 MiB); returns 0. */
int ha_pagemap_decay(uint32_t now);
/* Fill ha_pm.cl from the class tables (after ha_size_class_init). */
void ha_pagemap_init(void);
void ha_pagemap_prefork(void);
void ha_pagemap_postfork(int child);

/* ---- purge.c: the caches' clock (the policy: alloc/retain.h) ------------ */
/* A slow path's look at the clock: every HA_DECAY_MS / 8 at most, each
 * cache's decay step (the thread's steps too, when it runs).  No heapalloc
 * lock held from the span-record lock on. */
void ha_purge_tick(uint32_t now);
int ha_purge_running(void);
/* A cache now holds more than its resident floor: with
 * HEAPALLOC_PURGE_THREAD=1 the thread runs (started on the first call by a
 * caller that holds no lock, woken if asleep). */
void ha_purge_kick(void);
/* The decay steps: give back what has been idle HA_DECAY_MS by now; nonzero
 * while bytes that will decay are left. */
int ha_central_decay(uint32_t now);
int ha_arena_decay(uint32_t now);
int ha_huge_decay(uint32_t now);
int ha_tcache_decay(uint32_t now);   /* exited threads' slabs */
/* The span pool has gone unused (no span taken or put by a busy program)
 * for HA_DECAY_MS: the quiet that alloc/retain.h gives the address space,
 * the page map and the span records back in. */
int ha_central_pool_idle(uint32_t now);
/* The pool's cold spans back to mimalloc (then ha_arena_collect); nonzero
 * when there were some. */
int ha_central_release_cold(void);
/* Bytes in use by each tier, racy: spans held by size classes, large
 * blocks, huge blocks. */
uint64_t ha_central_live_bytes(void);
uint64_t ha_arena_live_bytes(void);
uint64_t ha_huge_live_bytes(void);
/* Free bytes each keeps resident: hot spans and transfer arrays, hot
 * large blocks, free dirty huge pages. */
uint64_t ha_central_held_bytes(void);
uint64_t ha_arena_held_bytes(void);
uint64_t ha_huge_held_bytes(void);

/* A coarse millisecond clock (the vDSO: no system call), wrapping. */
static inline uint32_t ha_now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
	return (uint32_t)((uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000);
}

/* ---- arena.c (mimalloc adapter) --------------------------------------- */
void *ha_arena_span_alloc(size_t bytes);      /* page-aligned */
void ha_arena_span_free(void *p);
void *ha_arena_large_alloc(size_t n, size_t align, int zero); /* header-prefixed */
void ha_arena_large_free(void *p);
size_t ha_arena_large_usable(const void *p);
uint64_t *ha_arena_large_req(void *p);        /* header word: req | flags<<62 */
int ha_arena_is_large(const void *p);         /* header magic intact */
void ha_arena_trim(void);                     /* mimalloc collects */
void ha_arena_collect(void);                  /* ... and cold large blocks go back */
void ha_arena_free_ranges(ha_free_range_fn *add, void *ctx);  /* the large cache's blocks */
void ha_arena_decommit_now(int on);           /* mimalloc decommits freed pages at once */
void ha_arena_stats(uint64_t *blocks, uint64_t *bytes);
uint64_t ha_arena_committed(void);
/* The large cache's bytes, as ha_central_pool_bytes. */
void ha_arena_cache_bytes(uint64_t *hot, uint64_t *cold);
void ha_arena_init(void);
void ha_arena_prefork(void);                  /* the large cache's lock */
void ha_arena_postfork(int child);
/* A big block's header word: the bytes the books count for it (its
 * requested size; a sampled small request's class size) in the low 47 bits,
 * | HA_LARGE_SAMPLED when it is a recorded sample; in compatibility mode
 * also HA_BIG_TRACKED | (session & 0x7fff) << 47. */
#define HA_LARGE_SAMPLED ((uint64_t)1 << 63)
#define HA_BIG_TRACKED ((uint64_t)1 << 62)
#define HA_BIG_SESSION_SHIFT 47
#define HA_BIG_BYTES(v) ((v) & (((uint64_t)1 << HA_BIG_SESSION_SHIFT) - 1))

/* ---- huge.c (blocks >= HA_HUGE_MIN, no alignment: own mappings) -------- */
#define HA_HUGE_MIN ((size_t)1 << 20)
void *ha_huge_alloc(size_t n, int zero);
int ha_huge_is(const void *p);                /* page offset 16 + magic */
size_t ha_huge_usable(const void *p);
uint64_t *ha_huge_req(void *p);               /* same layout as large */
void ha_huge_free(void *p);
void *ha_huge_realloc(void *p, size_t n);     /* NULL: p untouched */
size_t ha_huge_trim(void);
void ha_huge_stats(uint64_t *blocks, uint64_t *bytes, uint64_t *cached);
uint64_t ha_huge_resident(void);      /* resident bytes of the regions */
uint64_t ha_arena_cache_resident(void);   /* of the hot cached large blocks */
void ha_huge_prefork(void);
void ha_huge_postfork(int child);

/* ---- central.c ------------------------------------------------------------ */
/* Up to `want` blocks of class cls into out[0 .. got); returns got (0: no
 * memory).  Block memory is not touched. */
unsigned ha_central_fetch(unsigned cls, unsigned want, void **out);
/* Give back the n blocks objs[0 .. n) of class cls: into the class's
 * transfer array while it has room (and the caller allows: to_spans 0),
 * the rest to their spans (a thread exiting or trimming, or the first free
 * of a class: the spans can empty and go).  One lock hold; objs is only
 * read. */
void ha_central_release(unsigned cls, void *const *objs, unsigned n, int to_spans);
/* to_spans, and the spans the blocks empty have been idle already (a cache
 * scavenged after HA_DECAY_MS without use): pooled as idle, so the pool's
 * decay gives their pages back at once */
#define HA_TO_SPANS_IDLE 2
/* Blocks a refill takes, or an overflow gives back, at once: at most this
 * many batches. */
#define HA_MOVE_BATCHES 8
void ha_central_trim(void);
void ha_central_release_all(void);      /* trim + cold spans' address space */
void ha_central_thread_exited(void);   /* drains transfer arrays past 1 MiB */
void ha_central_stats(uint64_t *spans, uint64_t *span_bytes, uint64_t *free_bytes);
/* Free blocks of every class and the span pool's spans (ha_alloc_free_ranges). */
void ha_central_free_ranges(ha_free_range_fn *add, void *ctx);
/* The free-span pool's bytes: hot (resident) and cold (given back,
 * address space kept); racy reads. */
void ha_central_pool_bytes(uint64_t *hot, uint64_t *cold);
void ha_central_prefork(void);
void ha_central_postfork(int child);
void ha_central_init(void);

/* ---- thread_cache.c ------------------------------------------------------ */
/* A thread's free stack of one class: an array of block pointers in the
 * thread's slab (below), not a list linked through the blocks, so that
 * neither malloc nor free touches a block's memory: a block another core
 * wrote last costs its miss in the program's own first write, where the
 * core overlaps it, not in a dependent load here (google/tcmalloc's
 * per-CPU caches hold arrays for the same reason).  top is the next free
 * slot; top[-1] is NULL exactly when the stack is empty (a guard slot
 * below each class's array; before a class's first refill or overflow in
 * a thread and after thread exit top points past a read-only NULL, so
 * that both fast paths go slow).  It
 * holds max - room blocks (max in ha_tcache.max): free takes one from room
 * and goes slow when it would turn negative, malloc gives one back.  size
 * is the class's object size, next to top so that malloc charges the
 * countdown with one load; 0 until the thread attaches. */
typedef struct ha_tlist {
	void **top;
	int32_t room;     /* max - blocks held */
	uint32_t size;    /* ha_class_size[cls] once attached, else 0 */
} ha_tlist;

/* The slab: every class's array, each after a NULL guard slot, with
 * ha_tl_cap[c] + 1 slots (one spare: an overflowing free stores its block
 * before giving back).  ha_tl_off[c] is the first slot of class c's array.
 * One mapping per thread record, kept with the record for the next thread. */
extern uint32_t ha_tl_cap[HA_NCLASSES];
extern uint32_t ha_tl_off[HA_NCLASSES];
extern size_t ha_tl_slab_bytes;
extern void *const ha_tl_guard[2];

/* A thread's registry record, in meta memory so that it stays readable
 * whatever becomes of the thread: a thread whose first allocation comes in
 * the last round of TSD destructors never gets our destructor call, and
 * its TLS (the cache itself) may be reused or unmapped afterwards.  Readers
 * never touch a thread's TLS; a record whose thread is gone (tgkill says
 * so) is retired by the next statistics walk.  The book fields are written
 * only by the owner, at its slow paths, and summed racily by readers. */
typedef struct ha_tnode {
	struct ha_tnode *next;    /* registry: append-only, records recycled */
	int live;                 /* a thread owns it */
	int tid;
	uint64_t alloc_bytes;     /* books: bytes allocated, as of the last slow path */
	uint64_t net_bytes;       /* books: bytes taken from the central cache
				   * less bytes given back (wraps: a difference) */
	uint64_t big_bytes;       /* books: big blocks allocated less freed (wraps) */
	uint64_t cached_bytes;    /* bytes in the cache, as of its last count */
	/* compatibility mode: requested sizes allocated and freed */
	uint64_t req_alloc_bytes, req_free_bytes;
	void **slab;              /* its thread's stacks (ha_tl_off), reused with the record */
	uint32_t slab_idle_since; /* retired with its slab's pages resident: the ms clock then | 1 */
} __attribute__((aligned(64))) ha_tnode;  /* own cache line */

typedef struct ha_tcache {
	ha_tlist list[HA_NCLASSES];
	/* The countdown: every allocation subtracts the bytes it is charged
	 * (its class size) and goes slow when nothing is left; profiling off
	 * keeps it large.  This thread has allocated drawn - sample_left
	 * bytes (ha_books_set_countdown keeps that true). */
	int64_t sample_left;
	int64_t drawn;
	int64_t compat_left;     /* compatibility mode's countdown, requested bytes */
	int64_t free_check;      /* freed bytes until the next threshold check */
	ha_tnode *node;          /* registry record while state == 1 */
	int state;               /* 0 new, 1 live, 2 finished (thread exiting) */
	int compat;              /* live and in compatibility mode as of epoch */
	unsigned epoch;          /* the profiling switch this thread has seen */
	unsigned budget_skips;   /* budget checks skipped since the last count */
	uint64_t max_bytes;      /* sum of list max * class size: a bound on
				  * the cache's bytes at every slow path */
	void **slab;             /* node->slab while state == 1 */
	uint32_t used_at;        /* ms clock of this cache's last refill or overflow */
	uint32_t max[HA_NCLASSES];
	/* classes whose max was ever set in this thread (bit c of word c/64):
	 * the rest sit on the guard with max 0, so counting the cache or
	 * flushing it at exit looks at these alone */
	uint64_t touched[(HA_NCLASSES + 63) / 64];
	/* profiling's two budgets behind the countdown (books.c, due) */
	int64_t armed;           /* what the countdown was last set to */
	int64_t to_sample;       /* bytes to the next sampled byte; -1: the next allocation */
	int64_t alloc_check;     /* allocated bytes to the next threshold check */
	int prof_fresh;          /* a session began: draw both afresh */
} ha_tcache;

static inline uint32_t ha_tl_len(const ha_tcache *tc, unsigned c)
{
	return (uint32_t)((int64_t)tc->max[c] - tc->list[c].room);
}

/* The first slot of class c's array in this thread's slab. */
static inline void **ha_tl_lo(const ha_tcache *tc, unsigned c)
{
	return tc->slab + ha_tl_off[c];
}

static inline void ha_tl_set_max(ha_tcache *tc, unsigned c, uint32_t max)
{
	tc->list[c].room += (int32_t)(max - tc->max[c]);
	tc->max[c] = max;
}

extern HA_TLS ha_tcache ha_tc;

/* This thread's cache, addressed through the thread pointer: on x86-64
 * its offset from %fs (one load from the GOT, the same in every thread)
 * and %fs-relative operands, not &ha_tc, which costs a read of %fs:0 and
 * an add before every use.  HA_SEG marks such a pointer.  C only: the C++
 * operators of operators.cc call ha_alloc and ha_free (entry.c defines the
 * hot ones), and every key (below) must be made the same way in one
 * library. */
#ifndef __cplusplus
/* a list's key is its offset: list[] first, 16 bytes an entry */
_Static_assert(offsetof(ha_tcache, list) == 0 && sizeof(ha_tlist) == (1u << HA_TL_SHIFT),
	       "ha_tlist layout");
#if defined(__x86_64__) && defined(__SEG_FS) && defined(__PIC__)
#define HA_SEG __seg_fs
#define HA_SEG_ON 1
static inline ha_tcache HA_SEG *ha_tc_seg(void)
{
	uintptr_t off;
	__asm__("movq ha_tc@gottpoff(%%rip), %0" : "=r"(off));
	return (ha_tcache HA_SEG *)off;
}
#else
#define HA_SEG
#define HA_SEG_ON 0
static inline ha_tcache *ha_tc_seg(void)
{
	return &ha_tc;
}
#endif

/* A key for this thread's list of class cls that names the same list in
 * every thread: with HA_SEG its offset from the thread pointer (constant:
 * initial-exec TLS), else its offset in ha_tc.  Spans keep their class's
 * key, so free reaches the list with no table and no add. */
static inline uintptr_t ha_tl_key(unsigned cls)
{
#if HA_SEG_ON
	return (uintptr_t)ha_tc_seg() + ((uintptr_t)cls << HA_TL_SHIFT);
#else
	return (uintptr_t)cls << HA_TL_SHIFT;
#endif
}

static inline ha_tlist HA_SEG *ha_tl_of_key(uintptr_t key)
{
#if HA_SEG_ON
	return (ha_tlist HA_SEG *)key;
#else
	return (ha_tlist *)((char *)&ha_tc + key);
#endif
}

static inline unsigned ha_tl_key_class(uintptr_t key)
{
	return (unsigned)((key - ha_tl_key(0)) / sizeof(ha_tlist));
}
#endif /* !__cplusplus */

/* Read by the slow paths, written only when profiling starts or stops: one
 * cache line of its own, never shared with a counter that threads write. */
typedef struct ha_hot {
	int prof_mode;           /* HA_PROF_OFF, HA_PROF_ON, HA_PROF_COMPAT */
	unsigned epoch;          /* bumped by every switch; never 0 after the first */
	uint32_t prof_key;       /* the profiling session, in compat headers */
	uint64_t hdr_secret;     /* random, set once: checks compat headers */
	uint64_t hdr_mask;       /* hdr_secret ^ prof_key << 32 */
	int record_all;          /* every allocation is recorded: small blocks
				  * are recorded in place, their span marked */
	int mmap_prof;           /* the program's mmap calls are profiled (mmap.c) */
	int free_watch;          /* frees report their turn (ha_alloc_watch_frees) */
} __attribute__((aligned(64))) ha_hot_t;
extern ha_hot_t ha_hot;
#define ha_prof_key (ha_hot.prof_key)
#define ha_hdr_secret (ha_hot.hdr_secret)
#define ha_hdr_mask (ha_hot.hdr_mask)
/* A counter that threads bump, alone on its cache line. */
typedef struct ha_counter {
	uint64_t v;
} __attribute__((aligned(64))) ha_counter;

void ha_tcache_init(void);                           /* the slab's layout */
void *ha_tcache_refill(uintptr_t key, size_t n);    /* slow path of pop (ha_tl_key) */
ha_tcache *ha_tcache_attach(void);                   /* register this thread */
/* slow path of push (ha_tl_key): p is not stored yet, room already counts it;
 * p first, as free's fast path holds it in the first argument's register */
void ha_tcache_overflow(void *p, uintptr_t key);
void ha_tcache_flush_self(void);
void ha_tcache_free_ranges(ha_free_range_fn *add, void *ctx);   /* this thread's cached blocks */
void ha_tcache_thread_exit(void *arg);
uint64_t ha_tcache_count(uint64_t *bytes);
unsigned ha_tcache_live(void);     /* threads attached and not exited (racy) */

/* ---- books.c: the allocator's books and the profiling switch ------------ */
/* Bytes the countdown runs while profiling is off: a thread that never
 * reaches a slow path still notices a switch within this many bytes (a
 * slow call per 16 MiB is lost in the noise even for 32 KiB blocks). */
#define HA_COUNTDOWN_OFF ((int64_t)16 << 20)
/* This thread's countdown becomes v; what it has allocated stays. */
static inline void ha_books_set_countdown(ha_tcache *tc, int64_t v)
{
	tc->drawn += v - tc->sample_left;
	tc->sample_left = v;
}
/* Take a profiling switch made since this thread last looked (its
 * countdown then calls the profiler at the next allocation). */
void ha_books_sync_slow(ha_tcache *tc);
static inline void ha_books_sync(ha_tcache *tc)
{
	if (HA_UNLIKELY(tc->epoch != __atomic_load_n(&ha_hot.epoch, __ATOMIC_ACQUIRE)))
		ha_books_sync_slow(tc);
}
/* Books changes, in the allocated unit: bytes allocated outside the
 * countdown, big blocks allocated (+) or freed (-), small blocks moved
 * between this thread's cache and the central cache. */
void ha_books_alloc(ha_tcache *tc, int64_t bytes);
void ha_books_big(ha_tcache *tc, int64_t bytes);
void ha_books_net(ha_tcache *tc, int64_t bytes);
/* A threshold budget ran out: the profiler checks and sets both. */
void ha_books_check(ha_tcache *tc);
/* Freed bytes seen at a slow path: counts down to a threshold check. */
static inline void ha_books_freed(ha_tcache *tc, int64_t bytes)
{
	if (HA_UNLIKELY((tc->free_check -= bytes) < 0))
		ha_books_check(tc);
}
/* A free is about to lower in use (a slow path, before its block leaves
 * the profile or the books): while the profiler watches for the turn,
 * tell it.  One load of the slow paths' own cache line; the free fast
 * path (a push onto the thread's list) never looks. */
static inline void ha_books_turn(void)
{
	if (HA_UNLIKELY(__atomic_load_n(&ha_hot.free_watch, __ATOMIC_ACQUIRE)))
		ha_prof_turn();
}
/* The one due path (books.c).  Every slow allocation charges its bytes in
 * the allocated unit to this thread's countdown: a subtract while it
 * covers them, else ha_books_charge_slow; compatibility mode charges its
 * requested bytes to compat_left instead (ha_books_charge_req).  Both
 * return 1 when this allocation is sampled (hand it to ha_prof_sampled). */
int ha_books_charge_slow(ha_tcache *tc, size_t charge);
static inline int ha_books_charge(ha_tcache *tc, size_t charge)
{
	if (HA_LIKELY(tc->sample_left - (int64_t)charge > 0) && HA_LIKELY(tc->state == 1)) {
		tc->sample_left -= (int64_t)charge;
		return 0;
	}
	return ha_books_charge_slow(tc, charge);
}
int ha_books_charge_req(ha_tcache *tc, size_t n);
/* Publish this thread's books (its record), exactly when count_cache. */
void ha_books_publish(ha_tcache *tc, int count_cache);
/* Compatibility mode: requested bytes allocated / freed by this thread. */
void ha_books_req(ha_tcache *tc, int is_free, uint64_t bytes);
/* Thread exit / a record found dead: fold a record into the retired sums. */
void ha_books_retire(ha_tnode *nd);
/* All threads: out[0] allocated, out[1] in use (allocated unit);
 * req[0], req[1] requested bytes allocated and freed (compatibility mode). */
void ha_books_totals(uint64_t out[2], uint64_t req[2]);
/* Registry walk behind ha_books_totals (thread_cache.c). */
void ha_tcache_sum(uint64_t out[6]);
/* The registry's head, for ha_alloc_books_layout. */
ha_tnode **ha_tcache_registry(void);

void ha_tcache_prefork(void);
void ha_tcache_postfork(int child);

/* ---- init.c ------------------------------------------------------------- */
extern int ha_ready;
void ha_init_slow(void);
static inline void ha_ensure_init(void)
{
	if (HA_UNLIKELY(!ha_ready))
		ha_init_slow();
}
extern pthread_key_t ha_thread_key;

/* ---- mmap.c: heapalloc's own mappings use alloc/sys.h --------------- */
/* Non-zero while this thread is inside mimalloc (arena.c): mimalloc maps
 * through the libc symbol, which is ours, and its mappings are not the
 * program's. */
extern HA_TLS int ha_mmap_own;
/* Resident bytes of [lo, hi) (mincore; unmapped parts count 0). */
uint64_t ha_resident(uintptr_t lo, uintptr_t hi);
void ha_mmap_prefork(void);
void ha_mmap_postfork(int child);

/* ---- entry.c ------------------------------------------------------------ */
extern ha_counter ha_slow_allocs;   /* refills + large/huge allocations (relaxed) */
void *ha_alloc(size_t n);                  /* malloc semantics, errno on fail */
void *ha_alloc_aligned(size_t align, size_t n);
void ha_free(void *p);
size_t ha_usable_size(const void *p);
void *ha_realloc(void *p, size_t n);
/* Charge n bytes allocated outside the malloc family (a program mapping)
 * to this thread's countdown and books as a big block: 1 when it is to be
 * sampled (then hand it to ha_prof_sampled). */
int ha_charge_mapping(size_t n);
void ha_credit_mapping(size_t n);     /* ... and its end: freed */
/* Out of memory: give back every cached mapping and empty span (huge cache,
 * span pool, mimalloc's free pages), so one retry can succeed. */
void ha_release_cached(void) HA_COLD;


#endif
