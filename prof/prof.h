/* prof/prof.h — the heap profiler's internal map.
 *
 * Files (one noun each) in four rooms (each folder's README says what it
 * owns); prototypes grouped below under the file that defines them.  The
 * headers they share are here: this map, sampler.h (the chance of a sample
 * and a pair's unsampling, standalone, shared with the commands), root.h
 * (heapalloc_root's layout), pb.h (protobuf wire encoders), leakscan.h,
 * heapsort.h, sym_abi.h (the symboliser plugin's interface), environ.h,
 * unit.h (the unit tests' seams).
 *
 * capture/: a sampled allocation and its free
 *   hooks.c        the allocator hooks: the sample distance, sampled,
 *                  on_free, check, turn (alloc/hooks.h)
 *   sampler.c      the sampler's draws and unsampling (the countdowns are
 *                  the allocator's)
 *   stack.c        stack capture with libunwind (with frame_rules.c, its
 *                  only includers): our ranges, the probe, the fork gate
 *   frame_rules.c  the learned frame cache: rows, rules, the row walk
 *                  (frame_rules.h: the inline rule walk; those two only)
 *   unw_pipe.c     libunwind's one-time set-up, its validation pipe refused
 *                  (the library's pipe2)
 *   stack_table.c  stack+size-class buckets keyed by xxhash (its only includer)
 *   object_map.c   sampled object address -> bucket, size, time
 *   ages.c         ages of live samples, lifetimes of freed ones (the clock,
 *                  the lifetime bins, a dump's copy of the times)
 *   mmap_hook.c    the program's mappings (HEAP_PROFILE_MMAP): start -> length
 *
 * session/: a session's life, and what asks for a dump
 *   options.c      the ONE table of environment switches and its parser
 *   session.c      start/stop, fork, the HEAPPROFILE start and the exit dump
 *   triggers.c     totals, the threshold books and the queued threshold dump
 *   peak.c         the profile at the highest in-use total (PREFIX.peak.heap)
 *   dump.c         writing a numbered dump (and the peak, stats, log line)
 *   naming.c       file names, pid naming, HEAP_PROFILE_KEEP and _CLEANUP
 *   (session.h: the state those and hooks.c share; theirs only)
 *   helper.c       the helper thread: time, signal and queued threshold dumps
 *   memwatch.c     RSS growth dumps and the pre-OOM dump (polled by helper)
 *   usdt.c         the otel_memory USDT probes and the sampling they switch on
 *   api.c          public API (heapalloc_*) and the gperftools API
 *
 * output/: what a dump writes
 *   writer.c       the gperftools text format, memory map, temp+rename
 *                  (writer.c, calibrate.c, pprof.c, mappings.c, gzip.c and
 *                  capture/'s ages.c and sampler.c are also linked into
 *                  tools/heapalloc-profile, whose tools/profile.c answers the
 *                  calls they make here from tables copied out of another
 *                  process)
 *   calibrate.c    sampled estimates scaled to the books' exact totals
 *   pprof.c        the pprof protobuf encoder (pb.h: its wire encoders)
 *   mappings.c     its executable mappings and their GNU build IDs
 *   pprof_named.c  a served profile named in process (the symboliser
 *                  plugin), in three lock steps (pprof.h: those three's)
 *   gzip.c         the gzip of it, through zlib loaded on first use, and
 *                  the hand-off to writer.c's temp name and rename
 *   sym_loader.c   loading the symboliser plugin libheapalloc-sym.so, which
 *                  names served profiles (sym_abi.h: its interface)
 *   stats.c        PREFIX.NNNN.stats: the heap against the process's RSS
 *   dumplog.c      PREFIX.log: one line per dump (totals, RSS, reason)
 *   leakscan.c     a leak scan's conservative mark over /proc/PID/mem (shared
 *                  with tools/leakscan.c; leakscan.h: its interface)
 *   leaks.c        HEAP_PROFILE_LEAKS: that scan at exit, in the process
 *
 * serve/: the running process read by others
 *   http_*.c       HEAP_PROFILE_HTTP: /debug/pprof/heap and /allocs (polled by
 *                  helper): listen, connections, requests (http.h: theirs)
 *   remote.c       heapalloc_root: where a reader outside the process finds
 *                  the table and the books (root.h: its layout)
 *
 * Synchronization (lock order, outermost first):
 *   names lock (sym_loader.c; one named profile at a time: held across the
 *               plugin's calls, which allocate through the public malloc
 *               and read files, with none of the locks below held; not
 *               taken at fork: a child whose parent held it forgets the
 *               plugin's state)
 *   -> ha_prof_dump_lock (one dump / start / stop at a time; may be held long,
 *                      but no allocating thread needs it unless it is itself
 *                      about to dump)
 *   -> peak lock (peak.c; short: a copy of the table at the turn, taken by
 *      the freeing thread, or the copy picked up for writing)
 *   -> threshold lock (triggers.c ha_prof_thr_lock; short: the threshold
 *      books and the queued dump, so a crossing never waits for a dump
 *      being written)
 *   -> table lock (stack_table.c; short: a new bucket, or a snapshot copy)
 *   -> mapping lock (mmap_hook.c; short: a mapping made or unmapped)
 *   -> object-map stripe locks (ascending; short)
 *      A sample of a known stack takes only its object's stripe lock and
 *      finds the bucket without the table lock (ha_objmap_record); a new
 *      stack drops the stripe lock, then takes table lock -> stripe lock.
 *   -> allocator locks (only inside ha_raw_malloc/ha_raw_free)
 * Rules: never unwind, dladdr or dl_iterate_phdr while holding any of these
 * (the unwinder takes the loader lock); never call the public malloc while
 * holding them (ha_raw_* only); a signal handler only writes one byte to the
 * helper's pipe.  ha_prof_prefork takes all of them in the order above;
 * ha_prof_postfork releases them (parent) or re-initialises them (child).
 */
#ifndef HA_PROF_PROF_H
#define HA_PROF_PROF_H

#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#include "alloc/base.h"
#include "alloc/debug.h"     /* HA_ASSERT */
#include "alloc/env.h"       /* the grammar of the variables */
#include "alloc/lock.h"
#include "alloc/log.h"
#include "alloc/sys.h"
#include "alloc/hooks.h"   /* all the profiler may call in the allocator */
#include "prof/sampler.h"  /* the sampler's standalone part */

#define HA_PROF_DEPTH 32          /* frames kept per stack (gperftools' cap) */

/* The short locks (table, object-map stripes, peak, threshold, mappings)
 * are ha_plock, alloc/lock.h's futex lock. */

/* ---- options.c ----------------------------------------------------------- */
/* HEAP_PROFILE_SAMPLE_INTERVAL's default (the table's row) is tcmalloc's
 * 2 MiB, which keeps the always-on sampling's cost under 1% of
 * instructions on bench/instr's allocation loops; a session asked for
 * draws at the same default.  The grammar of every value is alloc/env.h's. */
typedef struct ha_prof_options {
	const char *prefix;       /* HEAPPROFILE (points into environ) or NULL */
	int64_t sample_interval;  /* HEAP_PROFILE_SAMPLE_INTERVAL (0 given: the default) */
	int64_t always_on;        /* the always-on sampling's interval; 0: off */
	int64_t sample_interval_set;   /* HEAP_PROFILE_SAMPLE_INTERVAL present */
	int64_t alloc_interval;   /* HEAP_PROFILE_ALLOCATION_INTERVAL */
	int64_t dealloc_interval; /* HEAP_PROFILE_DEALLOCATION_INTERVAL */
	int64_t inuse_interval;   /* HEAP_PROFILE_INUSE_INTERVAL */
	int64_t time_interval;    /* HEAP_PROFILE_TIME_INTERVAL, seconds */
	int64_t signal;           /* HEAPPROFILESIGNAL, 0 = none */
	int64_t use_pid;          /* HEAPPROFILE_USE_PID */
	int64_t use_pid_set;      /* HEAPPROFILE_USE_PID present in environ */
	int64_t cleanup;          /* HEAP_PROFILE_CLEANUP */
	int64_t exact_totals;     /* HEAP_PROFILE_EXACT_TOTALS */
	int64_t format;           /* HEAP_PROFILE_FORMAT: HA_FORMAT_* bits */
	int64_t peak_interval;    /* HEAP_PROFILE_PEAK_INTERVAL, 0 = no peak profile */
	int64_t stats;            /* HEAP_PROFILE_STATS: PREFIX.NNNN.stats with each dump */
	int64_t keep;             /* HEAP_PROFILE_KEEP: newest N dumps kept, 0 all */
	int64_t min_seconds;      /* HEAP_PROFILE_MIN_SECONDS: threshold dump spacing */
	int64_t rss_interval;     /* HEAP_PROFILE_RSS_INTERVAL, bytes, 0 off */
	int64_t oom_fraction;     /* HEAP_PROFILE_OOM_FRACTION, parts per million */
	int64_t timeline_ms;      /* HEAP_PROFILE_TIMELINE_MS: log rows' cadence, 0 off */
	int64_t profile_root;     /* HEAPALLOC_PROFILE_ROOT: set in descendants, 0 in the root */
	int64_t mmap;             /* HEAP_PROFILE_MMAP: the program's mappings count */
	int64_t symbolize;        /* HEAP_PROFILE_SYMBOLIZE: names in served profiles */
	int64_t calibrate;        /* HEAP_PROFILE_CALIBRATE: scale estimates to the books */
	int64_t seed;             /* HEAP_PROFILE_SEED: the sampler's seed, 0 its own */
	int64_t leaks;            /* HEAP_PROFILE_LEAKS: the leak check at exit */
	int64_t leaks_status;     /* HEAP_PROFILE_LEAKS_STATUS: exit status on a leak, 0 none */
	const char *http;         /* HEAP_PROFILE_HTTP: the address to serve on, or NULL */
	const char *http_addr_file; /* HEAP_PROFILE_HTTP_ADDR_FILE: the bound address goes there */
	int64_t http_root;        /* HEAPALLOC_HTTP_ROOT: the serving ancestor's pid, 0 none */
} ha_prof_options;
#define HA_FORMAT_TEXT HA_ENV_FORMAT_TEXT     /* PREFIX.NNNN.heap */
#define HA_FORMAT_PPROF HA_ENV_FORMAT_PPROF   /* PREFIX.NNNN.pb.gz */
extern ha_prof_options ha_prof_opt;
extern int ha_prof_opt_loaded;   /* ha_options_load has run */
/* Parse environ into ha_prof_opt; junk values get one line and the default. */
void ha_options_load(void);
/* The same over any environment array (the fuzz target's seam). */
void ha_options_load_from(char *const *env);

/* ---- sampler.c ----------------------------------------------------------- */
/* At mean interval r every allocation is recorded (requested bytes, no
 * unsampling): the one test of it, for a profile of this process
 * (ha_prof_records_all) or of tables copied out of another. */
static inline int ha_rate_records_all(int64_t r)
{
	return r <= 1;
}
/* Next exponential distance in bytes with mean r (0 when it records all). */
int64_t ha_sampler_next(int64_t r);
/* What a sampled object of req bytes stands for at mean interval r:
 * req / (1 - exp(-req / r)), pprof's unsampling (req itself when it
 * records all). */
uint64_t ha_sampler_unsample(uint64_t req, int64_t r);
void ha_sampler_seed(uint64_t seed);
/* (ha_sampler_unsample_pair, ha_exp_neg, ha_ln, ha_sample_p: the part the
 * commands share, prof/sampler.h) */

/* ---- stack.c --------------------------------------------------------------- */
/* Find heapalloc's and libunwind's text, pick the cache policy.  Call with no
 * lock held (uses dladdr / dl_iterate_phdr). */
void ha_stack_init(void);
/* Stack capture, in two halves so that the sampling hook calls the unwinder
 * from its own frame (one frame of ours fewer to walk and drop), and the
 * stack is used in place (no copy):
 *     uintptr_t raw[HA_STACK_RAW];  int want = ha_stack_want(), at;
 *     int d = ha_stack_trim(raw, ha_stack_unwind((void **)raw, want), want,
 *                           max, &at);
 *     if (d < 0)   (more of our frames than expected: walk the full depth)
 *         d = ha_stack_trim(raw, ha_stack_unwind((void **)raw, HA_STACK_RAW),
 *                           HA_STACK_RAW, max, &at);
 *     then raw[at .. at+d) are the caller's frames, leaf first.
 * No lock may be held while unwinding.  ha_stack_trim drops heapalloc's own
 * frames (and libunwind's) and keeps up to max caller frames; it returns the
 * depth, or -1 when it was asked for fewer than HA_STACK_RAW frames and the
 * buffer filled up before max frames of the caller's (the hint then grows). */
#define HA_STACK_RAW (HA_PROF_DEPTH + 24)
extern int (*const ha_stack_unwind)(void **buf, int size);
int ha_stack_want(void);
int ha_stack_trim(const uintptr_t *raw, int n, int asked, int max, int *start);
/* Static links: learn heapalloc's functions by probing every entry point
 * once (call right after profiling turns on, no lock held).  1 if it ran
 * (its allocations then count in the allocator's totals). */
int ha_stack_calibrate(int maps);   /* maps: the mmap family too */
/* Fork: wait until no thread is inside libunwind (whose global mutexes a
 * child would inherit held), and open the gate again after (open: 0 for a
 * torn child, whose prefork never closed it). */
void ha_stack_prefork(void);
void ha_stack_postfork(int child, int open);
/* Is this thread probing the entry points (ha_stack_calibrate)?  The
 * global flag, set only while a probe runs, spares the sampling hooks a
 * call every time. */
extern int ha_stack_probing;
int ha_stack_calibrating_now(void);
static inline int ha_stack_calibrating(void)
{
	return HA_UNLIKELY(__atomic_load_n(&ha_stack_probing, __ATOMIC_RELAXED)) &&
	       ha_stack_calibrating_now();
}
void ha_stack_calibrate_frame(void);

/* ---- frame_rules.c (the rest: prof/capture/frame_rules.h) -------------------------- */
/* Bytes the frame cache holds: the table's sizes used so far, the rows
 * kept, the scratch stack once used (counted in prof_memory). */
uint64_t ha_frame_memory(void);

/* ---- stack_table.c --------------------------------------------------------- */
#define HA_LIFE_BINS 13           /* < 1 us, then decades of ns up to 1e14 (27.8 h), more */
typedef struct ha_bucket {
	struct ha_bucket *next;   /* hash chain */
	uint64_t hash;
	uint64_t alloc_count, alloc_bytes;  /* atomic adds */
	uint64_t free_count, free_bytes;
	uint16_t skey;            /* size key: objects on a line share it */
	uint16_t depth;
	uint32_t idx;             /* ha_table_bucket(idx) is this bucket */
	uint32_t dirty;           /* changed since the peak image read it (peak.c) */
	uint32_t pad_;
	uint64_t life[HA_LIFE_BINS];   /* freed sampled bytes by lifetime (ages.c) */
	uintptr_t pcs[];
} ha_bucket;

/* A line of a snapshot: counts copied under the table lock. */
typedef struct ha_line {
	const ha_bucket *b;
	uint64_t alloc_count, alloc_bytes, free_count, free_bytes;
} ha_line;

/* Lines to write: a saved snapshot (the peak's), or NULL for the live table.
 * books: ha_prof_totals as the snapshot was taken, when books_set, so that
 * its profile is calibrated to them (calibrate.c); else written raw. */
typedef struct ha_lineset {
	const ha_line *v;
	size_t n;
	int books_set;
	uint64_t books[2];
	int live;                 /* the live table's lines, copied just now: a
				   * pprof profile gives them ages (ages.c) */
} ha_lineset;

int ha_table_init(void);          /* 0 or ENOMEM */
void ha_table_destroy(void);
/* Find or add the bucket for (pcs, size key of req); counts the
 * allocation.  Caller holds the table lock.  NULL when the table is full or gone (counted as a drop). */
ha_bucket *ha_table_record(const uintptr_t *pcs, int depth, size_t req);
/* The same with the key's hash already computed (ha_table_hash). */
uint64_t ha_table_hash(const uintptr_t *pcs, int depth, size_t req);
ha_bucket *ha_table_record_hashed(uint64_t h, const uintptr_t *pcs, int depth, size_t req);
/* Find the bucket of (pcs, size key of req) without the table lock, or
 * NULL when it does not exist yet (or the table is gone).  Counts nothing.
 * The caller holds an object-map stripe lock or the table lock. */
ha_bucket *ha_table_find(uint64_t h, const uintptr_t *pcs, int depth, size_t req);
/* Bucket idx when it is (pcs, size key of req), else NULL: a sample's
 * stack checked against a bucket it is likely to have, without the hash.
 * The caller holds an object-map stripe lock or the table lock. */
ha_bucket *ha_table_find_at(uint32_t idx, const uintptr_t *pcs, int depth, size_t req);
/* The bucket numbered idx (ha_bucket.idx), which exists.  The caller holds
 * an object-map stripe lock or the table lock. */
ha_bucket *ha_table_bucket(uint32_t idx);
/* The same, or NULL when idx is no bucket of the live table (stopped). */
ha_bucket *ha_table_bucket_live(uint32_t idx);
/* Snapshot every bucket into raw memory; *n lines.  NULL on ENOMEM. */
ha_line *ha_table_snapshot(size_t *n);
/* The same into lines (room for cap): the number of lines, which is more
 * than cap (and nothing copied) when they do not fit.  Table lock held. */
size_t ha_table_copy(ha_line *lines, size_t cap);
/* Buckets so far (any thread, no lock). */
size_t ha_table_count(void);
/* b's counters into l, as ha_table_copy reads them. */
void ha_table_line(ha_line *l, const ha_bucket *b);
uint32_t ha_table_size_key(size_t req);
void ha_table_stats(uint64_t *buckets, uint64_t *memory, uint64_t *drops);
/* Where the table lives, for the root (remote.c; prof/root.h). */
struct ha_root_table;
void ha_table_root(struct ha_root_table *t);
/* Of that memory, the raw chunks the buckets live in (the backing arena's). */
uint64_t ha_table_raw_bytes(void);
void ha_table_lock(void);
void ha_table_unlock(void);
void ha_table_postfork_child(void);

/* ---- object_map.c ---------------------------------------------------------- */
int ha_objmap_init(void);         /* 0 or ENOMEM */
void ha_objmap_destroy(void);
/* Remember p -> (b, req, allocated at t); 0, or ENOMEM (then the sample
 * is dropped). */
int ha_objmap_insert(uintptr_t p, ha_bucket *b, size_t req, uint64_t t);
/* Record a sample whose bucket already exists, holding only p's stripe
 * lock: find the bucket, count the allocation in it and remember p.  The
 * bucket is looked for first at hint (an index + 1, 0 for none: the last
 * bucket this thread sampled into, ha_table_find_at), else by the stack's
 * hash, which is then computed into *h (ha_table_hash).  1 recorded, with
 * the bucket's index in *idx; 0 dropped (no memory to remember p); -1 no
 * such bucket yet (*h computed): the caller takes the table lock and uses
 * ha_table_record_hashed + ha_objmap_insert instead. */
int ha_objmap_record(uintptr_t p, uint32_t hint, uint64_t *h, const uintptr_t *pcs, int depth,
		     size_t req, uint64_t t, uint32_t *idx);
/* Forget p and subtract it from its bucket, its lifetime counted there
 * (ha_life_add); 1 if it was known (_bytes: and its bytes in *bytes). */
int ha_objmap_remove(uintptr_t p);
int ha_objmap_remove_bytes(uintptr_t p, uint64_t *bytes);
/* A sample the allocator keeps the record of (ha_prof_sampled_kept):
 * ha_objmap_count is ha_objmap_record without remembering p (1, with the
 * bucket's index in *idx, or -1: no such bucket yet); ha_objmap_free_kept
 * counts its free in bucket idx, nothing once the block's session (the
 * allocator's) has ended.  Both
 * hold p's stripe lock, which keeps the table alive. */
int ha_objmap_count(uintptr_t p, uint32_t hint, uint64_t *h, const uintptr_t *pcs, int depth,
		    size_t req, size_t asked, uint64_t t, uint32_t *idx);
void ha_objmap_free_kept(uintptr_t p, uint32_t idx, size_t req, uint32_t session);
/* A kept sample counted in a new bucket b (under the table lock): p's
 * time only, as ha_objmap_count keeps it.  Both keep p with its time and
 * the bytes asked for (asked: its extent) for its age and a leak scan (no
 * slot free: not aged); ha_objmap_free_kept then forgets it and counts its
 * lifetime. */
void ha_objmap_keep(uintptr_t p, ha_bucket *b, size_t asked, uint64_t t);
/* A live sample as a dump sees it: its bucket, bytes, allocation time. */
typedef struct ha_agent {
	uint32_t idx;
	uint64_t req, t;
} ha_agent;
/* Every live sample into out (room for cap), a stripe lock at a time; how
 * many there were (more than cap: only cap copied). */
size_t ha_objmap_ages(ha_agent *out, size_t cap);
/* Every live sample as a leak scan's candidate (prof/leakscan.h: its
 * extent, line = its number here) and its bucket's index in idx; the same
 * count as ha_objmap_ages.  The only copy of the samples' addresses a dump
 * makes: the caller keeps it out of what it scans. */
struct ha_leak_block;
size_t ha_objmap_blocks(struct ha_leak_block *out, uint32_t *idx, size_t cap);
void ha_objmap_stats(uint64_t *objects, uint64_t *memory);
/* Where the map lives, for the root (remote.c; prof/root.h). */
struct ha_root_objmap;
void ha_objmap_root(struct ha_root_objmap *m);
void ha_objmap_lock_all(void);
void ha_objmap_unlock_all(void);
void ha_objmap_postfork_child(void);

/* ---- writer.c ------------------------------------------------------------ */
/* Growable output buffer in raw memory. */
typedef struct ha_out {
	char *buf;
	size_t len, cap;
	int fd;                   /* >= 0: flush to fd when full */
	int err;                  /* first errno seen */
} ha_out;
void ha_out_bytes(ha_out *o, const char *s, size_t n);
void ha_out_str(ha_out *o, const char *s);
void ha_out_u64(ha_out *o, uint64_t v, int width);
int ha_out_flush(ha_out *o);
/* write(2) all of buf, across short writes and EINTR; 0 or an errno. */
int ha_write_all(int fd, const void *buf, size_t n);
/* Whether no descriptor can be opened now (EMFILE, ENFILE): a dlopen that
 * failed then is tried again later, not given up for the process's life. */
int ha_fds_short(void);
/* Copy a /proc/self/maps stream from fd to o, 4th perm char -> 'p'. */
void ha_writer_maps_copy(ha_out *o, int fd);
/* The process whose memory map a profile names (MAPPED_LIBRARIES, and
 * pprof's mappings and build IDs, mappings.c): 0 this one; set only by a
 * reader outside (tools/profile.c) to the process it copied the tables of. */
extern int ha_maps_pid;
/* Or the memory map that reader hands over instead of PID's maps (an
 * emulated process's as its program sees it: tools/ha_proc.py's
 * program_view), taken as it is; NULL: read the maps. */
extern const char *ha_maps_text;
extern size_t ha_maps_text_len;
/* Its /proc/PID/maps, normalised as above, appended to o (nothing if unreadable). */
void ha_writer_maps(ha_out *o);
/* Write the whole profile (header, lines, memory map) to o. */
void ha_writer_profile(ha_out *o, int64_t r);
/* Write the profile to path via path.tmp + rename.  0 or errno. */
int ha_writer_file(const char *path, int64_t r);
/* Write path via path.tmp (created afresh, never followed) + rename, its
 * bytes from fill(o, arg).  0 or errno; nothing left under either name on
 * failure. */
int ha_write_file(const char *path, void (*fill)(ha_out *o, void *arg), void *arg);
/* The same from set's lines (NULL: the live table). */
void ha_writer_profile_from(ha_out *o, int64_t r, const ha_lineset *set);
int ha_writer_file_from(const char *path, int64_t r, const ha_lineset *set);
/* set's lines, or a fresh snapshot of the live table (*own: raw-free it). */
const ha_line *ha_lines_of(const ha_lineset *set, size_t *n, int *own);
/* A dump's working memory (raw memory, or the reserve when one is set);
 * the reserve is set and used only under ha_prof_dump_lock. */
void *ha_dump_mem(size_t n);
void ha_dump_mem_free(void *p);
void ha_dump_mem_reserve(void *base, size_t cap);

/* ---- peak.c -------------------------------------------------------------- */
/* The profile as it stood at the highest in-use total: copied at the turn,
 * before the first free after in use climbed a step past the last copy.
 * Start a session's tracking (interval: the smallest step, 0 turns it
 * off; rate: the sampling interval).  Under ha_prof_dump_lock. */
void ha_peak_reset(int64_t interval, int64_t rate);
/* A threshold check saw inuse (the books' total, any thread, no lock):
 * raise the high, and past the step have the next free report its turn. */
void ha_peak_arm(uint64_t inuse);
/* Bytes of allocation before the next check is due (INT64_MAX: off). */
int64_t ha_peak_room(uint64_t inuse);
/* The turn: a free is about to lower in use from ha_inuse_of(t) (the
 * totals read before it);
 * copy the table when inuse is a step past the copy.  No lock held. */
void ha_peak_turn(const uint64_t t[2]);
/* A dump sees the totals t: copy when its in use is above the copy's (under
 * the dump lock). */
void ha_peak_dump(const uint64_t t[2]);
/* Recording everything, the peak copy is an image kept up to date bucket
 * by bucket: each change to a bucket's counters marks it (ha_peak_touch,
 * after the change), and the turn rereads only the marked ones, so it can
 * copy at every new high and the copy is the peak exactly. */
extern int ha_peak_inc;
void ha_peak_touch_slow(ha_bucket *b);
static inline void ha_peak_touch(ha_bucket *b)
{
	if (__builtin_expect(__atomic_load_n(&ha_peak_inc, __ATOMIC_RELAXED), 0)) {
		/* the change, then the mark: a turn that clears the mark then
		 * reads the counters sees the change or leaves the mark set */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&b->dirty, __ATOMIC_RELAXED))
			ha_peak_touch_slow(b);
	}
}
/* A copy taken since *version (the last call's): 1, with when it was
 * taken and ha_prof_totals then (for the timeline's row at the peak). */
int ha_peak_taken(uint64_t *version, struct timespec *at, uint64_t t[2]);
/* Write the peak copy as PATH (text) and/or PB (pprof) if it changed
 * since the last write; 0 or the first errno.  *written: files written. */
int ha_peak_write(const char *path, const char *pb, int fmt, int64_t r, int *written);
/* In use at the copy (0: none yet). */
uint64_t ha_peak_inuse(void);
/* Raise the in-use high to inuse (any thread, no lock needed). */
void ha_peak_see(uint64_t inuse);
/* The highest in use the books saw since the session started (the true
 * peak as of the last check or turn; prof_peak_inuse). */
uint64_t ha_peak_high(void);
/* Forget the copies (the table is going away).  Under the dump lock, not
 * the table lock. */
void ha_peak_drop(void);
/* Bytes the copies hold. */
uint64_t ha_peak_bytes(void);
void ha_peak_prefork(void);
void ha_peak_postfork(int child);

/* ---- ages.c --------------------------------------------------------------- */
/* The clock of ages and lifetimes: CLOCK_MONOTONIC in ns (vDSO, one read
 * per sample and per sampled free; the same clock an outside reader reads). */
uint64_t ha_age_now(void);
/* A sampled block of req bytes allocated at t is being freed now: count its
 * bytes in b's lifetime bin.  Caller keeps b alive (a stripe lock). */
void ha_life_add(ha_bucket *b, uint64_t req, uint64_t t);
/* The lifetime bin of ns nanoseconds: 0 below 1 us, i in [1e(i+2), 1e(i+3))
 * ns, HA_LIFE_BINS - 1 from 1e14. */
unsigned ha_life_bin(uint64_t ns);
/* Lifetime bin i: the numeric label's value (ns; the bin's upper bound less
 * 1 ns, the last bin's lower bound) and a range label ("1us-10us"). */
uint64_t ha_life_label(unsigned i);
const char *ha_life_range(unsigned i);
/* The live samples of a dump, sorted by bucket, then oldest first. */
typedef struct ha_ages {
	ha_agent *v;              /* ha_dump_mem memory, NULL: none */
	size_t n;
	uint64_t now;             /* ha_age_now as they were copied */
} ha_ages;
/* Copy them (0, or ENOMEM: a dump without ages). */
int ha_ages_take(ha_ages *a);
void ha_ages_free(ha_ages *a);
/* Bucket idx's samples: a->v[*first .. *first + return). */
size_t ha_ages_of(const ha_ages *a, uint32_t idx, size_t *first);
/* The age label of a block allocated at t, in seconds, as written: exact
 * below 4096 s, then rounded down to 1/2048 of itself (a bounded number of
 * distinct values per site). */
uint64_t ha_age_seconds(uint64_t now, uint64_t t);
/* Part k of total split by weights w (k = 0..n-1; cumulative rounding: the
 * parts add up to total exactly): total * (W_k+1 - W_k) / W, W_k the sum of
 * the weights before k.  cum: W_k, part: w[k], sum: W. */
uint64_t ha_split_part(uint64_t total, uint64_t cum, uint64_t part, uint64_t sum);

/* ---- naming.c (the rest: prof/session/session.h) ---------------------------------- */
/* PREFIX[_PID].leaks.pb.gz into pb (for leaks.c): 1, or 0 when the session
 * writes no files (no HEAPPROFILE). */
int ha_naming_leaks(char *pb, size_t cap);

/* ---- leaks.c --------------------------------------------------------------- */
/* HEAP_PROFILE_LEAKS: the leak scan at exit (an atexit handler, after the
 * exit dump); may end the process with HEAP_PROFILE_LEAKS_STATUS. */
void ha_leaks_at_exit(void);

/* ---- stats.c ------------------------------------------------------------- */
/* Write PREFIX.NNNN.stats (path) for dump `dump`: the heap's books and caches
 * against the process's resident memory.  0 or errno. */
int ha_stats_file(const char *path, const char *dump, const char *reason, uint64_t inuse,
		  uint64_t peak);

/* ---- dumplog.c ----------------------------------------------------------- */
/* Start the dump log at path afresh with its header, unless this process
 * started it already (a restart carries on). */
void ha_dumplog_start(const char *path);
/* A comment line: the peak the books saw (high) and the in use of the
 * copy written as file (readers skip '#' lines). */
void ha_dumplog_peak(const char *path, const char *file, uint64_t high, uint64_t copy);
/* A comment line "# command: ARGS" (this process's command line), for a
 * descendant of the profiled program. */
void ha_dumplog_command(const char *path);
/* This process's command line, arguments space-separated, control bytes
 * as '?', NUL-terminated in out (cap bytes); its length. */
size_t ha_cmdline(char *out, size_t cap);
/* Append dump number seq: t = allocated, freed (bytes); file the path
 * written, NULL when the dump failed ("-" in the log). */
void ha_dumplog_line(const char *path, uint64_t seq, const uint64_t t[2], const char *file,
		     const char *reason);
/* The same with the row's time (CLOCK_REALTIME) given, NULL for now. */
struct timespec;
void ha_dumplog_row(const char *path, uint64_t seq, const uint64_t t[2], const char *file,
		    const char *reason, const struct timespec *at);

/* ---- mmap_hook.c ----------------------------------------------------------
 * (ha_prof_mmap_counts, ha_prof_mapped, ha_prof_unmapped: alloc/hooks.h) */
void ha_mmaps_reset(void);        /* a new session: no mapping recorded */
void ha_mmaps_lock(void);         /* fork */
void ha_mmaps_unlock(void);
void ha_mmaps_postfork_child(void);

/* ---- gzip.c -------------------------------------------------------------- */
/* Load zlib (once; call with no profiler lock held): a dump entry point
 * calls it first, so that dlopen never runs under ha_prof_dump_lock. */
void ha_gzip_load(void);
/* gzip data[0..n) to dst: straight to its fd when it has one, else appended
 * to its memory; uncompressed when zlib cannot be (or was not yet) loaded.
 * 0 or errno. */
int ha_gzip_to(ha_out *dst, const char *data, size_t n);
/* gzip data[0..n) into path via path.tmp + rename (ha_write_file); 0 or
 * errno. */
int ha_gzip_file(const char *path, const char *data, size_t n);

/* ---- pprof.c, pprof_named.c (and mappings.c; prof/output/pprof.h: theirs) ------ */
/* Write the profile as gzipped profile.proto to path via path.tmp + rename.
 * 0 or errno. */
int ha_pprof_file(const char *path, int64_t r);
int ha_pprof_file_from(const char *path, int64_t r, const ha_lineset *set);
/* How a served profile differs from a dump's (prof/serve/http_request.c). */
typedef struct ha_pprof_how {
	int alloc_default;        /* default sample type alloc_space, not inuse_space */
	int64_t duration_ns;      /* a delta's window (duration_nanos), 0 none */
	uint32_t gen;             /* set's buckets belong to this ha_prof_generation, 0 any */
} ha_pprof_how;
/* The profile of set's lines (NULL: the live table; how may be NULL)
 * appended gzipped to gz, a memory sink (fd -1; ha_dump_mem memory, so the
 * caller raw-frees gz->buf), with function names, file:line and inlined
 * frames filled in (libheapalloc-sym.so, loaded by prof/output/sym_loader.c; addresses
 * only when it cannot be loaded, or under HEAP_PROFILE_SYMBOLIZE=0).  Takes the names lock and
 * ha_prof_dump_lock itself: call it with no profiler or allocator lock held,
 * from the helper thread or an API call, never inside malloc.  0, ENOENT
 * when profiling is off, or errno. */
int ha_pprof_mem_named(ha_out *gz, int64_t r, const ha_lineset *set, const ha_pprof_how *how);

/* ---- sym_loader.c ------------------------------------------------------ */
/* The symboliser plugin's lock: held around every call into it, taken
 * before ha_prof_dump_lock and never while holding an allocator lock. */
void ha_names_lock(void);
void ha_names_unlock(void);
/* The plugin's interface (prof/sym_abi.h), loaded the first time (one
 * stderr line if it cannot be); NULL when unavailable.  Caller holds the
 * names lock. */
struct ha_sym_ops;
const struct ha_sym_ops *ha_names_ops(void);
void ha_names_postfork_child(void);

/* ---- calibrate.c --------------------------------------------------------- */
/* What a sampled profile's values were scaled to, for its comments. */
enum { HA_CALIB_EXACT, HA_CALIB_BOUNDED, HA_CALIB_UNSAMPLED };
typedef struct ha_calib {
	int64_t r;                /* the sampling interval */
	int scaled;               /* values scaled to the books (else pprof's estimates, or raw when all are recorded) */
	int inuse;                /* HA_CALIB_EXACT: in use is the books' figure; BOUNDED: an estimate within bounds; UNSAMPLED: in use but none of it sampled, so none shown */
	uint64_t books[2];        /* the books since the start: allocated, in use */
	uint64_t bound;           /* at most this much of the session's blocks is in use */
	double est[4];            /* sums of the unsampled estimates, pprof's value order */
	double rse[2];            /* relative standard error of est[1], est[3] */
	double factor[2];         /* alloc, in-use scale factors */
	uint64_t total[4];        /* sums of the values returned */
} ha_calib;
/* The values to write for lines[0..n) at interval r: v[4 * i + k], k in
 * pprof's order (alloc objects, alloc bytes, in-use objects, in-use bytes),
 * unsampled and scaled to the books' totals, adding up to them (set: its
 * own books); NULL when not calibrated (all recorded, switched off, a saved set
 * without books, nothing sampled, or no memory): write the raw lines.
 * ha_dump_mem memory (ha_dump_mem_free it).  c says what was done. */
uint64_t *ha_calib_values(const ha_line *lines, size_t n, int64_t r, const ha_lineset *set,
			  ha_calib *c);
/* Line i of the profile's comments (i = 0, 1, ...) into buf; -1 past the last. */
int ha_calib_comment(const ha_calib *c, int i, char *buf, size_t cap);
/* Relative standard error of a site's estimate from c samples of b bytes. */
double ha_calib_rse(uint64_t c, uint64_t b, int64_t r);
/* The totals (allocated, freed) the dump being written prints, so that its
 * files add up to them; NULL after it. */
void ha_calib_hold(const uint64_t t[2]);

/* ---- session.c ------------------------------------------------------------- */
extern pthread_mutex_t ha_prof_dump_lock;
extern HA_TLS int ha_prof_busy;       /* re-entrancy guard of this thread */
/* Start profiling with prefix (copied).  from_env: naming/cleanup rules of
 * the HEAPPROFILE start.  0 or errno (EBUSY when running). */
int ha_prof_start(const char *prefix, int from_env);
void ha_prof_stop(void);
int ha_prof_running(void);
/* Running, and not the always-on sampling alone (what the API reports). */
int ha_prof_running_api(void);
/* Start the always-on sampling unless something runs or it is switched
 * off (HEAP_PROFILE_SAMPLE_INTERVAL=0). */
void ha_prof_background(void);
/* The mean sampling interval: the one home of the rate, set by a session's
 * start (or probe-only sampling's, usdt.c) from HEAP_PROFILE_SAMPLE_INTERVAL
 * before sampling switches on; what the sampler draws with and every
 * profile is written with.  1: every allocation is recorded (requested
 * bytes, no unsampling), decided here alone (ha_prof_records_all). */
extern HA_HIDDEN int64_t ha_prof_r;
static inline int64_t ha_prof_rate(void)
{
	return __atomic_load_n(&ha_prof_r, __ATOMIC_RELAXED);
}
static inline int ha_prof_records_all(void)
{
	return ha_rate_records_all(ha_prof_rate());
}
/* The session counts requested bytes (HEAP_PROFILE_EXACT_TOTALS). */
int ha_prof_compat(void);
/* Bumped by every start: a bucket seen under one value is alive while it
 * holds (a served delta's check that the session did not restart). */
uint32_t ha_prof_generation(void);
uint64_t ha_prof_dumps(void);
uint64_t ha_prof_samples(void);
/* (ha_prof_prefork, ha_prof_postfork: alloc/hooks.h) */

/* ---- dump.c ---------------------------------------------------------------- */
/* Dump now, reason for the stderr line.  0 or errno. */
int ha_prof_dump(const char *reason, int automatic);
/* ha_prof_dump(reason, 0) for a caller that holds ha_prof_dump_lock (the
 * session's gzip library loaded at its start). */
int ha_prof_dump_held(const char *reason);
/* fn() with ha_prof_dump_lock held, this thread's allocations unsampled
 * meanwhile (ha_prof_busy). */
void ha_prof_dump_holding(void (*fn)(void));
/* An automatic dump whose writer memory comes from reserve first. */
int ha_prof_dump_reserved(const char *reason, void *reserve, size_t cap);
/* The helper's time dump, when due; *next: when to look again. */
void ha_prof_time_dump(int64_t interval, struct timespec *next);
/* Timeline rows (HEAP_PROFILE_TIMELINE_MS) are written in this mode, and
 * the helper thread writes one now (when the heap moved). */
int ha_prof_timeline_on(void);
void ha_prof_timeline_row(void);
void ha_prof_timeline_end(void);   /* the exit dump: no row after it */

/* ---- triggers.c ------------------------------------------------------------ */
/* Write the threshold dump queued for the helper, if any (helper thread). */
void ha_prof_write_pending(void);
/* Threshold dumps queued or being written by the helper (0..2). */
uint64_t ha_prof_queued(void);
/* Exact totals since profiling started: alloc bytes/count, free bytes/count. */
void ha_prof_totals(uint64_t out[2]);
/* Its formula, shared with a reader outside (tools/profile.c): rec, the
 * bytes recorded and freed when every allocation is recorded (not
 * compatibility), else NULL; b, q: ha_books then; base, base_req: the
 * session's at its start; compat: HEAP_PROFILE_EXACT_TOTALS. */
static inline void ha_totals_of(const uint64_t *rec, const uint64_t b[2], const uint64_t q[2],
				const uint64_t base[2], const uint64_t base_req[2], int compat,
				uint64_t out[2])
{
	if (rec) {
		out[0] = rec[0];
		out[1] = rec[1] < rec[0] ? rec[1] : rec[0];
	} else if (compat) {
		for (int i = 0; i < 2; i++)
			out[i] = q[i] > base_req[i] ? q[i] - base_req[i] : 0;
	} else {
		uint64_t alloc = b[0] > base[0] ? b[0] - base[0] : 0;
		uint64_t inuse = b[1] > base[1] ? b[1] - base[1] : 0;
		out[0] = alloc;
		out[1] = alloc - (inuse < alloc ? inuse : alloc);
	}
}
/* In use of totals t (allocated, freed). */
static inline uint64_t ha_inuse_of(const uint64_t t[2])
{
	return t[0] > t[1] ? t[0] - t[1] : 0;
}

/* ---- hooks.c ---------------------------------------------------------------
 * (ha_prof_sample_distance, ha_prof_sampled, ha_prof_on_free,
 * ha_prof_check, ...: alloc/hooks.h) */

/* ---- usdt.c ---------------------------------------------------------------
 * (ha_prof_poll: alloc/hooks.h) */
/* A tracer is attached to otel_memory:alloc / :free: its semaphore is
 * nonzero (never in a build without <sys/sdt.h>, HA_USDT 0).  Called on
 * sampled paths only. */
extern HA_HIDDEN volatile unsigned short *const ha_usdt_sem[2];
#ifndef HA_USDT
#define HA_USDT 0     /* a build outside configure's flags (the fuzzers) */
#endif
static inline int ha_usdt_alloc_on(void)
{
	return HA_USDT && *ha_usdt_sem[0];
}
static inline int ha_usdt_free_on(void)
{
	return HA_USDT && *ha_usdt_sem[1];
}
/* Allocation bytes between two looks at the semaphore while sampling runs
 * for the probes alone (the off-profiling poll's distance). */
#define HA_USDT_CHECK ((int64_t)16 << 20)
/* Fire otel_memory:alloc for a recorded sample of `size` bytes (the
 * profile's unit) at mean interval r; req: the bytes requested. */
void ha_usdt_alloc(void *p, size_t req, size_t size, int64_t r);
/* Fire otel_memory:free. */
HA_NOINLINE void ha_usdt_fire_free(void *p);
/* A sample with no session: fire the alloc probe; 1 when fired (the free
 * must be reported; kept: the record to keep in the block). */
int ha_usdt_sampled(void *p, size_t req, size_t size, uint32_t *kept);
/* A threshold check with no session: 1 (budget[0] set) while sampling runs
 * for the probes alone, which it switches off once they are detached. */
int ha_usdt_check(int64_t budget[2]);
/* A session starts: it takes over the sampling (caller holds
 * ha_prof_dump_lock). */
void ha_usdt_session_start(void);
/* Sampling runs for the probes alone; allocations it sampled. */
int ha_usdt_sampling(void);
uint64_t ha_usdt_samples(void);

/* ---- remote.c ------------------------------------------------------------
 * The exported root (prof/root.h).  Fill its fixed part (constructor). */
void ha_remote_init(void);
/* A start or stop is about to change the session and the table (odd seq),
 * and has changed them (even seq; the session part copied again). */
void ha_remote_begin(void);
void ha_remote_end(void);

/* ---- helper.c ------------------------------------------------------------ */
/* 0 or errno.  queue: the helper also writes queued threshold dumps. */
int ha_helper_start(int64_t time_interval, int signo, int queue);
void ha_helper_postfork_child(void);
/* Dump every signal delivered and not yet dumped (the helper, the exit
 * dump); _held: the caller holds ha_prof_dump_lock (ha_prof_stop). */
void ha_helper_flush(void);
void ha_helper_flush_held(void);
/* Wake this process's helper to write a queued dump: 0, or ESRCH when it
 * has none (the caller writes the dump itself).  Never blocks; keeps errno. */
int ha_helper_wake(void);

/* ---- http_*.c -------------------------------------------------------------- */
/* HEAP_PROFILE_HTTP: bind and listen on addr (no lock held, before the
 * helper starts); 0, or an errno after one stderr line. */
int ha_http_start(const char *addr);
/* The helper's poll loop: up to HA_HTTP_NFDS descriptors into p (their
 * count), *to_ms lowered to the nearest deadline; then the results. */
#define HA_HTTP_NFDS 9
struct pollfd;
int ha_http_poll_set(struct pollfd *p, int max, int64_t *to_ms);
void ha_http_poll_done(const struct pollfd *p, int n);
void ha_http_postfork_child(void);   /* the child does not serve */
void ha_http_exit(void);             /* remove a unix socket we bound */

/* ---- memwatch.c ---------------------------------------------------------- */
/* At profiling start (no lock held): read the options, the start RSS and
 * the memory limits; 1 when the helper must poll (ha_memwatch_poll). */
int ha_memwatch_start(void);
/* The helper's poll period in ms, -1 when there is nothing to watch. */
int ha_memwatch_period_ms(void);
/* One check, on the helper thread: RSS growth and the limit. */
void ha_memwatch_poll(void);
/* Address space and resident set of this process in bytes, from
 * /proc/self/statm; 0, or -1 when unreadable. */
int ha_proc_statm(uint64_t *as, uint64_t *rss);

#endif
