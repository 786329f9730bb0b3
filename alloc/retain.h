/* alloc/retain.h — what freed memory the allocator keeps, for how long, how
 * much, and why: the whole retention policy, in one place (retain.c holds
 * its rules; the caches that follow them are central.c, arena.c, huge.c).
 *
 * Freed memory stays resident for a while so that a program that allocates
 * again does not fault it back in.  Four caches keep it:
 *   span pool      empty spans of every class, by span size    (central.c)
 *   transfer       per-class arrays of free blocks in flight   (central.c)
 *   large cache    freed blocks of 32 KiB .. 1 MiB             (arena.c)
 *   huge pages     free dirty pages of the 1 MiB+ regions      (huge.c)
 * Each keeps what it holds "hot" (resident) up to a bound, and past it, or
 * once idle, makes it "cold": pages given back (MADV_DONTNEED), address
 * space kept, so the next use faults in zeros but costs no mapping.
 *
 * How much, while the program runs: all four together keep HA_KEEP_FLOOR
 * plus 1/HA_KEEP_SHARE of the bytes the program has in use, plus what
 * was learned (below): ha_keep_cap.  A program that goes quiet right after
 * a free keeps no more than that for good, and a heap that churns beside a
 * live working set keeps room to do so in place.  With the opt-in purge
 * thread (HEAPALLOC_PURGE_THREAD=1), which ages caches out on its own
 * clock, each keeps up to its own maximum (*_HOT_MAX) instead.
 *
 * For how long: bytes idle HA_DECAY_MS go cold, down to HA_IDLE_KEEP for
 * all caches together (ha_idle_floor), at the program's own slow paths
 * (ha_purge_tick) or on the purge thread.  After a decay period with no
 * use, the span pool's cold spans go back to mimalloc too, which frees its
 * emptied segments (their headers are resident), and the page map's and
 * span records' unused pages go back.
 *
 * Learned reuse: memory the bound forced back that the program wanted
 * again within HA_REFAULT_MS raises the bound by those bytes (up to
 * HA_KEEP_LEARN_MAX): a working set freed and taken again every few ms
 * stops churning.  It halves at every tick once no give-back has been
 * forced for a decay period.
 */
#ifndef HA_ALLOC_RETAIN_H
#define HA_ALLOC_RETAIN_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* ---- for how long -------------------------------------------------------- */
/* Idle this long, cached bytes go cold: a program's own pauses between
 * phases are shorter, a program that has gone quiet is noticed within it. */
#define HA_DECAY_MS 1000
/* Resident bytes all caches together keep once idle: a program that takes
 * a little again after a pause finds it warm. */
#define HA_IDLE_KEEP ((size_t)1 << 20)

/* ---- how much (without the purge thread) ---------------------------------- */
/* The shared bound: HA_KEEP_FLOOR + in use / HA_KEEP_SHARE + learned. */
#define HA_KEEP_FLOOR ((uint64_t)8 << 20)
#define HA_KEEP_SHARE 8
/* A give-back forced by the bound and refaulted within this: learned. */
#define HA_REFAULT_MS 50
#define HA_KEEP_LEARN_MAX ((uint64_t)64 << 20)

/* ---- each cache's own limits -------------------------------------------- */
/* Span pool: hot at most (the purge thread's bound) and cold address space
 * at most (cold spans cost 8 bytes each; past it spans go to mimalloc,
 * which faults a page of each back in to link it). */
#define HA_SPAN_HOT_MAX ((size_t)64 << 20)
#define HA_SPAN_COLD_MAX ((size_t)4 << 30)
/* Empty spans a class keeps on its own list before the pool (a refill
 * from one costs no page-map update). */
#define HA_CLASS_KEEP_EMPTY ((uint64_t)64 << 10)
/* Transfer arrays: all classes' together, and one class's capacity in
 * bytes of blocks (at most HA_TRANSFER_MAX_OBJS pointers).  In a
 * producer/consumer program the blocks in flight swing by tens of MiB:
 * with 1 MiB, going back to spans one by one was 25% of xmalloc-testN. */
#define HA_TRANSFER_MAX ((uint64_t)16 << 20)
#define HA_TRANSFER_CLASS ((uint64_t)16 << 20)
#define HA_TRANSFER_MAX_OBJS 262144u
/* Large cache: hot at most (purge thread) and cold address space. */
#define HA_LARGE_HOT_MAX ((size_t)64 << 20)
#define HA_LARGE_COLD_MAX ((size_t)1 << 30)
/* Huge pages: free dirty bytes are bounded by twice the recent peak of huge
 * bytes in use less those in use, never below HA_HUGE_DIRTY_MIN nor above
 * HA_HUGE_DIRTY_MAX (ha_huge_dirty_max); without the purge thread also by
 * the shared bound plus the block freed last (up to HA_HUGE_REUSE_MAX: a
 * loop that frees and takes a block of a few MiB reuses it in place, as
 * glibc's dynamic mmap threshold lets it) plus the huge bytes in use (a
 * working set of big blocks replaced one by one, mimalloc-bench's
 * malloc-large, reuses freed pages: it took about as much free as in use
 * to cut its faults to 0.5 GB, at a peak RSS under glibc's).  The peak
 * decays by 1/128 at every huge free. */
#define HA_HUGE_DIRTY_MIN ((size_t)64 << 20)
#define HA_HUGE_DIRTY_MAX ((size_t)256 << 20)
#define HA_HUGE_REUSE_MAX ((size_t)8 << 20)

/* ---- the rules (retain.c) ------------------------------------------------ */
/* The hot bytes a cache holding own of them may hold: hot_max while the
 * purge thread runs, else the shared bound less what the other caches
 * hold, between 0 and hot_max. */
size_t ha_keep_cap(uint64_t own, size_t hot_max);
/* The same from given figures: live bytes in use, held by all caches,
 * own of them this cache's, learned. */
size_t ha_keep_cap_of(uint64_t live, uint64_t held, uint64_t own, uint64_t learned, size_t hot_max);
/* A cache's part of HA_IDLE_KEEP: what the others do not hold already. */
size_t ha_idle_floor(uint64_t own);
size_t ha_idle_floor_of(uint64_t held, uint64_t own);
/* Huge pages: the dirty bound from the recent peak and the bytes in use,
 * and the budget (cache_budget in huge.c) given the shared bound's keep. */
size_t ha_huge_dirty_max(size_t peak, size_t use);
size_t ha_huge_budget(size_t peak, size_t use, size_t last_freed, size_t keep);
/* Learned reuse. */
void ha_keep_forced(uint32_t now);   /* the bound made a cache give back */
void ha_keep_refault(size_t bytes);  /* a cache handed out bytes that fault in */
/* A fork's child starts with nothing learned: the parent's give-backs and
 * the child's first allocations are not one program's churn. */
void ha_keep_forget(void);
/* Every tick: what was learned halves once nothing was forced for a
 * decay period. */
void ha_keep_fade(uint32_t now);


/* ---- the decaying cache (retain.c): the span pool's and the large cache's
 * hot part, one implementation.  Entries sit on one of nlists lists (a
 * span size, a size bin), newest at the head; each has its bytes (size)
 * and the ms it went idle (since).  ha_hot_decay makes entries cold, the
 * oldest of all lists first: while more than cap bytes are hot (a forced
 * give-back, which ha_keep_forced learns from), and, looked for at most
 * every HA_DECAY_MS / 8, while more than the idle floor are, those idle
 * HA_DECAY_MS; cap 0: all.  A few at a time under the lock; cool, outside
 * it, gives an entry's pages back and keeps it cold (the owner's). */
typedef struct ha_hot_entry {
	struct ha_hot_entry *next, *prev;
	uint32_t since;
} ha_hot_entry;
typedef struct ha_hot_list {
	ha_hot_entry *head, *tail;
} ha_hot_list;
typedef struct ha_hot_cache {
	pthread_mutex_t *lock;
	ha_hot_list *lists;
	unsigned nlists;
	size_t hot;            /* bytes hot: under the lock; racy reads */
	uint32_t checked;      /* ms clock of the last look for idle entries */
	size_t (*size)(const struct ha_hot_cache *c, unsigned list, const ha_hot_entry *e);
	void (*cool)(struct ha_hot_cache *c, unsigned list, ha_hot_entry *e);
} ha_hot_cache;
/* Lock held: e (of bytes) goes hot at the head of list, idle since then;
 * or leaves its list. */
void ha_hot_push(ha_hot_cache *c, unsigned list, ha_hot_entry *e, size_t bytes, uint32_t since);
void ha_hot_unlink(ha_hot_cache *c, unsigned list, ha_hot_entry *e, size_t bytes);
void ha_hot_decay(ha_hot_cache *c, uint32_t now, size_t cap);
static inline size_t ha_hot_bytes(const ha_hot_cache *c)
{
	return __atomic_load_n(&c->hot, __ATOMIC_RELAXED);
}

#endif
