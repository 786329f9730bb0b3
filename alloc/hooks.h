/* alloc/hooks.h — the whole interface between the allocator and the profiler.
 *
 * The allocator never includes prof/ and the profiler never writes the
 * allocator's state: each side is read and tested through these calls.
 *
 * The countdown.  Every allocation charges its bytes to the thread's
 * countdown (the allocated unit: class bytes for small blocks, usable bytes
 * for big ones; requested bytes in compatibility mode) on the same fast
 * path whether profiling is on or off.  The allocator arms it with the
 * nearer of two budgets it keeps per thread (alloc/books.c, due):
 * the bytes to the next sampled byte, which only ha_prof_sample_distance
 * draws, and the bytes to the next threshold check, which only
 * ha_prof_check sets (with the freed-bytes budget beside it).  A sampled
 * block is then allocated where its free reaches the allocator's slow path
 * (a big block, a compatibility-mode header, or a marked span when
 * everything is recorded) and handed to ha_prof_sampled; its free calls
 * ha_prof_on_free.
 *
 * The allocator calls the profiler's half (first below): the sample's
 * distance and record (ha_prof_sample_distance, ha_prof_sampled,
 * ha_prof_sampled_kept), frees of recorded blocks (ha_prof_on_free,
 * ha_prof_on_free_kept), budgets and the heap's turn (ha_prof_check,
 * ha_prof_turn), the off-profiling poll (ha_prof_poll), mappings
 * (ha_prof_mmap_counts, ha_prof_unmapped, ha_prof_mapped) and fork
 * (ha_prof_prefork, ha_prof_postfork).
 * The profiler calls in only through the second half: init
 * (ha_alloc_init), switches (ha_alloc_profiling, ha_alloc_mmap_profiling,
 * ha_alloc_watch_frees, ha_alloc_call_back_next), the books (ha_books,
 * ha_books_own_begin, ha_books_own_end, ha_alloc_session_live,
 * ha_alloc_books_layout, and ha_books_of, their formula over the parts
 * that layout names), read-only statistics (ha_alloc_stats,
 * ha_alloc_view_read, ha_alloc_resident_read, ha_alloc_arena_ranges,
 * ha_alloc_threads, ha_alloc_free_ranges with its ha_free_range_fn) and
 * raw memory (ha_raw_malloc, ha_raw_calloc, ha_raw_free); besides these
 * it includes only alloc/base.h, debug.h, env.h (the variables' grammar),
 * lock.h, log.h and sys.h, never alloc/internal.h (tests/unit/layering.sh
 * checks that this summary names every call declared below).  The
 * profiler must not call the public malloc while it holds one of its own
 * locks: it uses ha_raw_malloc/ha_raw_free.  tests/unit/prof_none.c is a
 * profiler that does nothing, so that the allocator links and is tested
 * alone.
 */
#ifndef HA_ALLOC_HOOKS_H
#define HA_ALLOC_HOOKS_H
#include <stddef.h>
#include <stdint.h>

/* ---- implemented by the profiler (prof/), called from allocator slow
 * paths with no allocator lock held ---------------------------------- */

/* The distance in bytes from here to the next sampled byte, drawn afresh
 * (>= 0: an allocation that covers it is sampled); -1: the next allocation
 * is sampled whatever its size (static-link calibration).  Called at a
 * thread's first slow allocation of a session and after each sample. */
int64_t ha_prof_sample_distance(void);
/* A sampled allocation's block p is ready: record its stack with `size`
 * bytes (req: requested).  1 when recorded: its free must be reported. */
int ha_prof_sampled(void *p, size_t req, size_t size);
/* A recorded block is being freed (before its memory is reused). */
void ha_prof_on_free(void *p);
/* The same for a small sample whose record the allocator keeps in the
 * block's header, so the profiler remembers nothing per block: returns
 * the record (nonzero, < 2^20 + 1) or 0 when not recorded; its free hands
 * the record and `size` back. */
uint32_t ha_prof_sampled_kept(void *p, size_t req, size_t size);
void ha_prof_on_free_kept(void *p, uint32_t rec, size_t size, uint32_t session);
/* A threshold budget of this thread ran out: check the dump thresholds
 * and set budget[0], the bytes this thread may allocate, and budget[1],
 * the bytes it may free, before the next check (INT64_MAX: none). */
void ha_prof_check(int64_t budget[2]);
/* While the profiler watches frees (ha_alloc_watch_frees): a free is
 * about to lower the heap, from a slow path (a big block, a sample or a
 * block of a marked span, a compatibility-mode block, a batch given back
 * to the central cache), before the block leaves the profile or the books. */
void ha_prof_turn(void);
/* Profiling is off and this thread's countdown ran out (every
 * HA_COUNTDOWN_OFF bytes of its allocation): the profiler may switch
 * sampling on from here (an attached otel_memory probe, prof/session/usdt.c). */
void ha_prof_poll(void);
/* Mapping profiling (HEAP_PROFILE_MMAP), from alloc/mmap.c's slow path:
 * 1 when this thread's mmap calls count now (profiling runs with the
 * option on, and this thread is not inside the profiler). */
int ha_prof_mmap_counts(void);
/* [p, p+len) unmapped or mapped over: forget every record starting inside
 * it (a sampled one is freed in the profile); returns their bytes, which
 * the allocator then counts freed. */
uint64_t ha_prof_unmapped(void *p, size_t len);
/* Remember the counted mapping [p, p+len) (sampled: ha_prof_sampled
 * recorded it), after ha_prof_unmapped cleared its range. */
void ha_prof_mapped(void *p, size_t len, int sampled);
/* fork: take / release every profiler lock. */
void ha_prof_prefork(void);
void ha_prof_postfork(int child);

/* What ha_prof_postfork(child) is told: the parent; a child whose
 * structures are whole (the fork held every lock); a child of a fork made by
 * a signal handler that interrupted this thread while it held a lock: locks
 * are re-initialised but nothing is walked (the interrupted code finishes
 * its own change when the handler returns). */
enum { HA_FORK_PARENT, HA_FORK_CHILD, HA_FORK_CHILD_TORN };

/* ---- implemented by the allocator (alloc/) ---------------------------- */
/* Make the allocator ready (the first malloc does it too). */
void ha_alloc_init(void);
/* Raw memory for the profiler and other internals: never sampled, never in
 * size classes, safe to call while holding heapalloc locks. */
void *ha_raw_malloc(size_t n);
void *ha_raw_calloc(size_t n, size_t m);
void ha_raw_free(void *p);
struct heapalloc_stats;
/* Fill the allocator's fields of the public statistics (the profiler's
 * fields are left alone). */
void ha_alloc_stats(struct heapalloc_stats *out);
/* The allocator's memory beyond the public statistics, for the stats
 * sidecar. */
typedef struct ha_alloc_view {
	uint64_t huge_blocks, huge_bytes;  /* blocks >= 1 MiB in use */
	uint64_t huge_cached;              /* freed pages of them kept for reuse */
	uint64_t arena_committed;          /* the backing arena's committed bytes */
	/* freed memory kept for reuse: resident (hot) and given back with its
	 * address space kept (cold) */
	uint64_t span_pool_hot, span_pool_cold;     /* empty small-class spans */
	uint64_t large_cache_hot, large_cache_cold; /* freed blocks > 32 KiB */
} ha_alloc_view;
void ha_alloc_view_read(ha_alloc_view *v);
/* Resident bytes (mincore) of the allocator's own memory: huge, the
 * huge-block regions; meta, the metadata chunks; large_hot, the freed
 * large blocks kept hot (in mimalloc's mappings, whose resident bytes the
 * stats read from /proc/self/smaps by ha_alloc_arena_ranges).  A pass
 * over their page tables: for the stats. */
typedef struct ha_alloc_resident {
	uint64_t huge, meta, large_hot;
} ha_alloc_resident;
void ha_alloc_resident_read(ha_alloc_resident *r);
/* Up to cap of the ranges [lo, hi) mimalloc has mapped (spans, large
 * blocks, raw memory, the freed pages it keeps, its headers, its reserve);
 * how many there are. */
unsigned ha_alloc_arena_ranges(uintptr_t (*out)[2], unsigned cap);
/* The free memory the allocator holds, range by range [lo, hi): this
 * thread's cache, the transfer arrays, the spans' free and uncarved blocks,
 * the span pool, the large cache.  A leak scan reads none of it as a root:
 * a free block keeps the stale pointers of its last use (or of mimalloc's
 * free lists).  Other threads' caches are not given: read while their
 * threads run, a block one of them has just taken would pass for free.
 * Nothing from a thread that holds an allocator lock (an exit from a
 * signal handler).  add is called with allocator locks held: it must not
 * allocate or lock. */
typedef void ha_free_range_fn(void *ctx, uintptr_t lo, uintptr_t hi);
void ha_alloc_free_ranges(ha_free_range_fn *add, void *ctx);
/* on: every thread's slow frees call ha_prof_turn first, until off. */
void ha_alloc_watch_frees(int on);
/* Threads with a live cache (racy: a thread may be exiting). */
unsigned ha_alloc_threads(void);
/* Where the books live, for a reader outside the process (prof/serve/remote.c
 * publishes it; docs/reference.md, "Reading a process from outside"):
 * registry, the address of the head of the thread records (ha_tnode, a
 * list linked by `next`, append-only, records recycled, never freed);
 * retired, uint64_t[5] (allocated, net, big, requested allocated and
 * freed of exited threads); own, uint64_t[4] (the profiler's own use:
 * allocated, in use, requested allocated and freed); the byte offsets of
 * a record's fields.  ha_books_totals is the formula. */
typedef struct ha_books_layout {
	uint64_t registry, retired, own;
	uint16_t node_size, node_next, node_live, node_alloc, node_net, node_big,
		 node_cached, node_req_alloc, node_req_free;
} ha_books_layout;
void ha_alloc_books_layout(ha_books_layout *out);
/* The books (ha_books) from their parts: s, the live thread records' sums
 * (allocated, net, big, cached, requested allocated, requested freed);
 * ret, the retired array; own, the own array (the layout above).  The one
 * formula, for ha_books and for a reader outside that copied the parts
 * (tools/profile.c). */
static inline void ha_books_of(const uint64_t s[6], const uint64_t ret[5], const uint64_t own[4],
			       uint64_t out[2], uint64_t req[2])
{
	int64_t inuse = (int64_t)(s[1] + ret[1] - s[3] + s[2] + ret[2] - own[1]);
	out[0] = s[0] + ret[0] - own[0];
	out[1] = inuse < 0 ? 0 : (uint64_t)inuse;
	req[0] = s[4] + ret[3] - own[2];
	req[1] = s[5] + ret[4] - own[3];
}

/* The allocator's own memory that holds block addresses (span records,
 * thread records and caches' pointer stacks, transfer arrays), which a
 * leak scan must not count as references: a stack's popped slots keep the
 * address of a block handed out since.  An append-only table (ranges are
 * never unmapped, only their pages given back) of at most HA_META_RANGES
 * {lo, hi}; the count is stored after its entry, so a reader in or out of
 * the process that reads the count first sees whole entries. */
#define HA_META_RANGES 4096
typedef struct ha_meta_range {
	uint64_t lo, hi;
} ha_meta_range;
extern ha_meta_range ha_meta_ranges[HA_META_RANGES];
extern uint64_t ha_meta_nranges;

enum { HA_PROF_OFF, HA_PROF_ON, HA_PROF_COMPAT };
/* Switch profiling to mode: every thread's next slow path (at most a
 * batch, or HA_COUNTDOWN_OFF bytes, away) asks ha_prof_sample_distance
 * afresh; the calling thread's next allocation does.  record_all (HA_PROF_ON only):
 * every allocation is sampled, so a small sample needs no header: it is
 * recorded in place and its span marked, so that every free in that span
 * takes the slow path and asks the profiler (ha_prof_on_free of a block
 * that was never recorded finds nothing). */
void ha_alloc_profiling(int mode, int record_all);
/* The books since the process started: out[0] bytes allocated, out[1]
 * bytes in use, both in the allocated unit; req[0], req[1] requested bytes
 * allocated and freed while in compatibility mode.  Exact for the calling
 * thread and for threads that have exited, as of their last slow path
 * (within a batch) for the others. */
void ha_books(uint64_t out[2], uint64_t req[2]);
/* The profiler's own use of the public malloc (its symboliser plugin:
 * dlopen, libdw) leaves the books: everything the calling thread allocates
 * and frees between begin and end (mark: 5 words) is taken out of
 * ha_books, so that they count the program's heap only.  The section must
 * run no program code. */
void ha_books_own_begin(int64_t mark[5]);
void ha_books_own_end(const int64_t mark[5]);
/* The program's mmap family goes to ha_prof_mmap_counts (on) or is a bare
 * system call (off). */
void ha_alloc_mmap_profiling(int on);
/* The calling thread's next allocation goes to the slow path and asks
 * ha_prof_sample_distance again. */
void ha_alloc_call_back_next(void);
/* Whether profiling still runs the session a block was counted in (its
 * header's): a record kept in a block is only good for its own session. */
int ha_alloc_session_live(uint32_t session);

#endif
