/* prof/profiler.c — the profiler's state: start/stop, the allocator hooks,
 * dump thresholds, file naming and fork.
 *
 * Owns: ha_prof_on_alloc / ha_prof_on_free (alloc/hooks.h), the file
 * counter, the threshold baselines, the process-naming rules, the start
 * from HEAPPROFILE (constructor) and the exit dump (atexit).
 *
 * Countdown protocol (alloc/hooks.h): when a thread's countdown does not
 * cover an allocation the allocator calls ha_prof_due() with what was left
 * (before) and the allocation's charge, so the bytes consumed since our
 * last return are  armed - before + charge.  We return (>= 0; 0 marks the
 * next byte)
 *     min(distance to the next sample, bytes to the next threshold check)
 * and remember how much of it was sampling distance (ts.sdist), so the
 * sampling stays exactly the exponential process of sampler.c while a
 * single thread still sees allocation / in-use dumps at the exact byte.
 * With several threads a thread's check budget is the remaining distance
 * divided by the number of threads.  Frees reach us through the
 * allocator's freed-bytes budget (ha_prof_check).
 *
 * Totals come from the allocator's books (ha_books): the allocated unit in
 * the default mode, requested bytes in compatibility mode.
 *
 * Threshold dumps: in the default mode the crossing thread only queues the
 * dump (P.pending, under thr_lock) and wakes the helper thread, which
 * writes it, so malloc never waits for a dump; a crossing while one is
 * queued folds into it (P.folded).  Without a helper of this process (not
 * started yet, a fork child's first crossing, pthread_create failed) and in
 * compatibility mode the crossing thread writes the dump itself, as
 * gperftools does.  Every other dump writes a queued one first.
 *
 * Never unwinds while holding a lock; never calls the public malloc while
 * holding one; a thread inside the profiler (ha_prof_busy) is never sampled.
 * Lock order and fork rules: prof/prof.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "prof/prof.h"

extern char **environ;

pthread_mutex_t ha_prof_dump_lock = PTHREAD_MUTEX_INITIALIZER;
HA_TLS int ha_prof_busy;

#define PREFIX_MAX 4000

static struct {
	int running;
	int use_pid;              /* HEAPPROFILE_USE_PID applied to this start */
	pid_t root_pid;           /* the process that writes PREFIX.NNNN.heap */
	pid_t cur_pid;
	int64_t r;                /* mean sampling interval */
	int64_t a_int, d_int, i_int;
	uint64_t base[2], base_req[2];  /* the books when profiling started */
	uint64_t last_alloc, last_free, high_water; /* baselines, relative */
	struct timespec last_time;
	uint64_t ndumps;          /* file counter; carries on across stop/start */
	uint64_t written;         /* profiles written */
	uint64_t samples;
	uint32_t gen;             /* bumped by every start */
	int64_t share;            /* a thread's check budget at the last check */
	int compat;               /* HEAP_PROFILE_EXACT_TOTALS for this start */
	int64_t keep;             /* HEAP_PROFILE_KEEP for this start */
	int64_t min_ns;           /* HEAP_PROFILE_MIN_SECONDS, in ns; 0 off */
	int64_t last_thr;         /* CLOCK_MONOTONIC ns of the last threshold dump, -1 none */
	uint64_t folded;          /* crossings held back since the last dump */
	int pending;              /* a threshold dump is queued for the helper (atomic) */
	uint64_t qfolded;         /* crossings its dump names: replaced in the
				   * queue, or held back before it was queued */
	int writing;              /* a queued dump is being written (atomic) */
	char pending_reason[128];
	char prefix[PREFIX_MAX + 1];
} P;

/* The threshold books: P.last_alloc, last_free, high_water, last_thr,
 * folded, pending, qfolded and pending_reason, and P.running's changes.
 * Short (no dump is ever written under it), taken after ha_prof_dump_lock,
 * so a crossing thread can queue a dump while the helper is writing one. */
static ha_plock thr_lock = HA_PLOCK_INIT;

/* HEAP_PROFILE_KEEP's books: the dumps this process wrote that are still
 * on disk, oldest first, each (number << 2 | HA_FORMAT_* bits written),
 * but for the first, which stays.  Only what is listed here is ever
 * removed, so files of other runs and processes (even under a number this
 * process failed to write) are never touched.  Raw memory, grown under
 * ha_prof_dump_lock up to keep + 1 entries; a fork child starts empty. */
static struct {
	uint64_t *ring;
	size_t cap, head, n;
	int have_first;
} K;

static HA_TLS int fork_window;  /* this thread holds every lock (prefork) */

/* per-thread view of the countdown */
static HA_TLS struct {
	uint32_t gen;
	int64_t armed;            /* the countdown we last returned */
	int64_t sdist;            /* of it, bytes to the next sample */
	int64_t tbudget;          /* allocation bytes until the next check */
	int64_t fbudget;          /* freed bytes until the next check */
} ts;


/* ------------------------------------------------------------------ */
/* totals and thresholds                                               */

/* Since profiling started: out[0] bytes allocated, out[1] bytes freed.
 * Default mode: the books' allocated unit, freed = allocated - in use;
 * compatibility mode: requested bytes. */
void ha_prof_totals(uint64_t out[2])
{
	uint64_t b[2], r[2];
	ha_books(b, r);
	if (P.compat) {
		for (int i = 0; i < 2; i++)
			out[i] = r[i] > P.base_req[i] ? r[i] - P.base_req[i] : 0;
		return;
	}
	uint64_t alloc = b[0] > P.base[0] ? b[0] - P.base[0] : 0;
	uint64_t inuse = b[1] > P.base[1] ? b[1] - P.base[1] : 0;
	if (inuse > alloc)
		inuse = alloc;
	out[0] = alloc;
	out[1] = alloc - inuse;
}

static uint64_t inuse_of(const uint64_t t[2])
{
	return t[0] > t[1] ? t[0] - t[1] : 0;
}

/* A new in-use high is due for the peak copy: taken once this thread's
 * allocation is in the table (after its sample is recorded, if any). */
static HA_TLS int peak_pending;
/* This thread's last try at the copy found a dump being written: it tries
 * again after PEAK_RETRY bytes, not at every allocation (alloc_room). */
static HA_TLS int peak_deferred;
#define PEAK_RETRY (256 * 1024)

/* Bytes of allocation after which a threshold may fire (>= 0), from t. */
static int64_t alloc_room(const uint64_t t[2])
{
	int64_t room = INT64_MAX;
	if (P.a_int > 0) {
		int64_t r = (int64_t)(P.last_alloc + (uint64_t)P.a_int - t[0]) - 1;
		room = r < room ? r : room;
	}
	if (P.i_int > 0) {
		int64_t r = (int64_t)(P.high_water + (uint64_t)P.i_int) - (int64_t)inuse_of(t);
		room = r < room ? r : room;
	}
	int64_t pr = ha_peak_room(inuse_of(t));
	if (pr == 0 && peak_deferred)
		pr = PEAK_RETRY;
	room = pr < room ? pr : room;
	return room < 0 ? 0 : room;
}

static int64_t free_room(const uint64_t t[2])
{
	if (P.d_int <= 0)
		return INT64_MAX;
	int64_t r = (int64_t)(P.last_free + (uint64_t)P.d_int - t[1]) - 1;
	return r < 0 ? 0 : r;
}

static int64_t per_thread(int64_t room)
{
	if (room == INT64_MAX || room == 0)
		return room;
	unsigned n = ha_alloc_threads();
	return n > 1 ? room / (int64_t)n : room;
}

static void mb_reason(char *buf, size_t cap, const char *what, uint64_t v, uint64_t inuse)
{
	ha_snprintf(buf, cap, "%llu MB %s cumulatively, %llu MB currently in use",
		    (unsigned long long)(v >> 20), what, (unsigned long long)(inuse >> 20));
}

static int dump_locked(const char *reason, uint64_t folded);


static void take_peak(void)
{
	if (!ha_trylock(&ha_prof_dump_lock)) {
		peak_deferred = 1;    /* a dump is being written: a little later */
		return;
	}
	peak_pending = peak_deferred = 0;
	if (P.running) {
		uint64_t t[2];
		ha_prof_totals(t);
		ha_peak_check(inuse_of(t));
	}
	ha_unlock(&ha_prof_dump_lock);
}

static int64_t mono_ns(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* HEAP_PROFILE_MIN_SECONDS: a threshold crossing less than min_ns after
 * the last threshold dump is held back and counted (P.folded) for the
 * next dump's reason; the baselines move as if it had been dumped, so the
 * count is what the dump numbers would have been. */
static int hold_back(void)
{
	if (P.min_ns <= 0)
		return 0;
	int64_t now = mono_ns();
	if (P.last_thr >= 0 && now - P.last_thr < P.min_ns)
		return 1;
	P.last_thr = now;
	return 0;
}

/* Write the queued threshold dump, if any.  Caller holds ha_prof_dump_lock. */
static void write_pending_locked(void)
{
	char reason[sizeof P.pending_reason];
	uint64_t folded = 0;
	ha_plock_lock(&thr_lock);
	int due = P.pending;
	if (due) {
		memcpy(reason, P.pending_reason, sizeof reason);
		folded = P.qfolded;
		P.qfolded = 0;
		__atomic_store_n(&P.writing, 1, __ATOMIC_SEQ_CST);   /* before pending drops */
		__atomic_store_n(&P.pending, 0, __ATOMIC_SEQ_CST);
	}
	ha_plock_unlock(&thr_lock);
	if (due) {
		dump_locked(reason, folded);
		__atomic_store_n(&P.writing, 0, __ATOMIC_SEQ_CST);
	}
}

/* gperftools' MaybeDumpProfileLocked: at most one dump per check, in this
 * order of reasons; an automatic dump resets every baseline.  The dump is
 * queued for the helper (default mode) or written here (compatibility
 * mode, or no helper to write it). */
static void check_thresholds(void)
{
	uint64_t t[2];
	ha_prof_totals(t);
	if (P.running)
		ha_peak_see(inuse_of(t));
	if (alloc_room(t) > 0 && free_room(t) > 0 && P.running) {
		ts.tbudget = per_thread(alloc_room(t));
		ts.fbudget = per_thread(free_room(t));
		__atomic_store_n(&P.share, ts.tbudget, __ATOMIC_RELAXED);
		return;
	}
	int sync = P.compat;
	if (sync)
		ha_lock(&ha_prof_dump_lock);
	ha_plock_lock(&thr_lock);
	int queued = 0;
	if (P.running) {
		char reason[sizeof P.pending_reason];
		reason[0] = 0;
		ha_prof_totals(t);
		uint64_t inuse = inuse_of(t);
		if (ha_peak_room(inuse) == 0)
			peak_pending = 1;
		if (P.a_int > 0 && t[0] >= P.last_alloc + (uint64_t)P.a_int)
			mb_reason(reason, sizeof reason, "allocated", t[0], inuse);
		else if (P.d_int > 0 && t[1] >= P.last_free + (uint64_t)P.d_int)
			mb_reason(reason, sizeof reason, "freed", t[1], inuse);
		else if (P.i_int > 0 && inuse > P.high_water + (uint64_t)P.i_int)
			ha_snprintf(reason, sizeof reason, "%llu MB currently in use",
				    (unsigned long long)(inuse >> 20));
		if (reason[0]) {
			if (hold_back()) {
				P.folded++;
			} else {
				/* the crossings held back before this one, and the
				 * queued one it replaces, are named by its dump */
				P.qfolded += P.folded + (P.pending ? 1 : 0);
				P.folded = 0;
				memcpy(P.pending_reason, reason, sizeof reason);
				__atomic_store_n(&P.pending, 1, __ATOMIC_SEQ_CST);
				queued = 1;
			}
			P.last_alloc = t[0];
			P.last_free = t[1];
			if (inuse > P.high_water)
				P.high_water = inuse;
		}
		ts.tbudget = per_thread(alloc_room(t));
		ts.fbudget = per_thread(free_room(t));
		__atomic_store_n(&P.share, ts.tbudget, __ATOMIC_RELAXED);
	} else {
		ts.tbudget = ts.fbudget = INT64_MAX;
	}
	ha_plock_unlock(&thr_lock);
	if (queued && !sync && ha_helper_wake() != 0) {
		sync = 1;                 /* nobody to write it: write it here */
		ha_lock(&ha_prof_dump_lock);
	}
	if (sync) {
		write_pending_locked();
		ha_unlock(&ha_prof_dump_lock);
	}
}

/* The helper's half: write the queued threshold dump. */
void ha_prof_write_pending(void)
{
	int busy = ha_prof_busy;
	ha_prof_busy = 1;
	ha_lock(&ha_prof_dump_lock);
	write_pending_locked();
	ha_unlock(&ha_prof_dump_lock);
	ha_prof_busy = busy;
}

/* ------------------------------------------------------------------ */
/* the allocator hooks                                                 */

/* Inlined into ha_prof_on_alloc so that the unwinder is called from the
 * hook's own frame (prof/prof.h, stack capture).  kept: the allocator keeps
 * the record (the bucket's index + 1 goes there), else the object map. */
static inline __attribute__((always_inline)) void record_sample(void *p, size_t req, int *sampled,
								uint32_t *kept)
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
	uint64_t h = ha_table_hash(pcs, depth, req);
	/* the common case, a known stack: one stripe lock, no table lock */
	uint32_t idx = 0;
	int r = kept ? ha_objmap_count((uintptr_t)p, h, pcs, depth, req, &idx)
		     : ha_objmap_record((uintptr_t)p, h, pcs, depth, req);
	if (HA_LIKELY(r >= 0)) {
		if (r) {
			*sampled = 1;
			if (kept)
				*kept = idx + 1;
			__atomic_fetch_add(&P.samples, 1, __ATOMIC_RELAXED);
		}
		return;
	}
	ha_table_lock();
	ha_bucket *b = ha_table_record_hashed(h, pcs, depth, req);
	if (b && kept) {
		*sampled = 1;
		*kept = b->idx + 1;
		__atomic_fetch_add(&P.samples, 1, __ATOMIC_RELAXED);
	} else if (b) {
		if (ha_objmap_insert((uintptr_t)p, b, req) == 0) {
			*sampled = 1;
			__atomic_fetch_add(&P.samples, 1, __ATOMIC_RELAXED);
		} else {            /* no room to remember it: undo the count */
			__atomic_fetch_sub(&b->alloc_count, 1, __ATOMIC_RELAXED);
			__atomic_fetch_sub(&b->alloc_bytes, req, __ATOMIC_RELAXED);
		}
	}
	ha_table_unlock();
}

int ha_prof_due(int64_t before, size_t charge, int64_t *next)
{
	*next = 0;                /* by default: call back at the next allocation */
	if (HA_UNLIKELY(ha_stack_calibrating()))
		return 1;         /* ha_prof_sampled learns the frames */
	if (!P.running)
		return 0;   /* stopped (a malloc racing the stop): call back next time,
			     * never leave a countdown a new session would inherit */
	if (ha_prof_busy)               /* our own allocation: never sampled, */
		return 0;               /* and the next one calls us again */
	ha_prof_busy = 1;
	ha_helper_ensure();
	int64_t consumed;
	uint32_t gen = __atomic_load_n(&P.gen, __ATOMIC_ACQUIRE);
	if (ts.gen != gen) {          /* this thread's first call of the session */
		ts.gen = gen;
		ts.sdist = ha_sampler_next(P.r);
		ts.tbudget = __atomic_load_n(&P.share, __ATOMIC_RELAXED);
		consumed = (int64_t)charge;
	} else {
		consumed = ts.armed - before + (int64_t)charge;
	}
	if (consumed < (int64_t)charge)
		consumed = (int64_t)charge;
	int sample = 0;
	if (consumed > ts.sdist) {
		sample = 1;
		ts.sdist = ha_sampler_next(P.r);
	} else {
		ts.sdist -= consumed;
	}
	ts.tbudget -= consumed;
	if (ts.tbudget < 0)
		check_thresholds();
	if (HA_UNLIKELY(peak_pending) && !sample)
		take_peak();
	int64_t c = ts.sdist < ts.tbudget ? ts.sdist : ts.tbudget;
	if (c < 0)
		c = 0;
	ts.armed = c;
	*next = c;
	ha_prof_busy = 0;
	return sample;
}

static inline __attribute__((always_inline)) int sampled(void *p, size_t req, size_t size,
							  uint32_t *kept)
{
	if (P.r <= 1)
		size = req;
	if (HA_UNLIKELY(ha_stack_calibrating())) {
		ha_stack_calibrate_frame();
		return 0;
	}
	if (!P.running || ha_prof_busy)
		return 0;
	ha_prof_busy = 1;
	int done = 0;
	record_sample(p, size, &done, kept);
	if (HA_UNLIKELY(peak_pending))
		take_peak();
	ha_prof_busy = 0;
	return done;
}

/* A sampled block's line counts `size` (the allocated unit: pprof's
 * unsampling then stays unbiased, the chance of a sample following the
 * countdown's charge); recording every allocation needs no unsampling and
 * counts requested bytes. */
int ha_prof_sampled(void *p, size_t req, size_t size)
{
	return sampled(p, req, size, NULL);
}

uint32_t ha_prof_sampled_kept(void *p, size_t req, size_t size)
{
	uint32_t kept = 0;
	sampled(p, req, size, &kept);
	return kept;
}

void ha_prof_on_free(void *p)
{
	/* forget the object even when this thread is inside the profiler
	 * (its address may come back, and a stale entry would stay "in use"
	 * forever); only the fork window, where we hold every lock, skips */
	if (HA_UNLIKELY(fork_window))
		return;
	ha_objmap_remove((uintptr_t)p);
}

void ha_prof_on_free_kept(void *p, uint32_t rec, size_t size, uint32_t session)
{
	if (HA_UNLIKELY(fork_window) || !rec)
		return;
	ha_objmap_free_kept((uintptr_t)p, rec - 1, size, session);
}

int64_t ha_prof_check(void)
{
	if (!P.running || P.d_int <= 0)
		return INT64_MAX;   /* frees matter only to the deallocation interval */
	if (ha_prof_busy || fork_window)
		return 0;
	ha_prof_busy = 1;
	if (ts.gen != __atomic_load_n(&P.gen, __ATOMIC_ACQUIRE))
		ts.tbudget = 0;   /* not started here yet: ha_prof_due sets it */
	check_thresholds();
	int64_t b = ts.fbudget;
	ha_prof_busy = 0;
	return b;
}

/* ------------------------------------------------------------------ */
/* naming and dumping                                                  */

static const char *errno_name(int e)
{
	switch (e) {
	case ENOENT: return "No such file or directory";
	case EACCES: return "Permission denied";
	case EPERM: return "Operation not permitted";
	case ENOSPC: return "No space left on device";
	case EDQUOT: return "Disk quota exceeded";
	case EROFS: return "Read-only file system";
	case ENOTDIR: return "Not a directory";
	case EISDIR: return "Is a directory";
	case ENAMETOOLONG: return "File name too long";
	case EMFILE: return "Too many open files";
	case ENOMEM: return "Cannot allocate memory";
	case EIO: return "Input/output error";
	default: return "error";
	}
}

/* PREFIX[_PID].NNNN.heap into buf. */
static void file_name(char *buf, size_t cap, uint64_t n)
{
	pid_t pid = getpid();
	int with_pid = P.use_pid || pid != P.root_pid;
	char num[24];
	int k = ha_snprintf(num, sizeof num, "%llu", (unsigned long long)n);
	char pad[8] = "";
	for (int i = k; i < 4; i++)
		pad[i - k] = '0';
	pad[k < 4 ? 4 - k : 0] = 0;
	if (with_pid)
		ha_snprintf(buf, cap, "%s_%d.%s%s.heap", P.prefix, (int)pid, pad, num);
	else
		ha_snprintf(buf, cap, "%s.%s%s.heap", P.prefix, pad, num);
}

/* PREFIX[_PID].peak.heap and .peak.pb.gz into text and pb. */
static void peak_names(char *text, char *pb, size_t cap)
{
	pid_t pid = getpid();
	if (P.use_pid || pid != P.root_pid) {
		ha_snprintf(text, cap, "%s_%d.peak.heap", P.prefix, (int)pid);
		ha_snprintf(pb, cap, "%s_%d.peak.pb.gz", P.prefix, (int)pid);
	} else {
		ha_snprintf(text, cap, "%s.peak.heap", P.prefix);
		ha_snprintf(pb, cap, "%s.peak.pb.gz", P.prefix);
	}
}

/* With every dump: the peak profile, when it changed since it was written. */
static void write_peak(int fmt)
{
	char text[PREFIX_MAX + 64], pb[PREFIX_MAX + 64];
	peak_names(text, pb, sizeof text);
	int n;
	int e = ha_peak_write(text, pb, fmt, P.r, &n);
	if (n)
		ha_log("Writing the peak heap profile to %s (%llu MB in use at the peak)\n",
		       fmt & HA_FORMAT_TEXT ? text : pb,
		       (unsigned long long)(ha_peak_inuse() >> 20));
	if (e)
		ha_log("Failed writing the peak heap profile %s: %s (errno %d)\n",
		       fmt & HA_FORMAT_TEXT ? text : pb, errno_name(e), e);
}

/* PREFIX[_PID].log, the dump log's name for this process. */
static void log_name(char *buf, size_t cap)
{
	pid_t pid = getpid();
	if (P.use_pid || pid != P.root_pid)
		ha_snprintf(buf, cap, "%s_%d.log", P.prefix, (int)pid);
	else
		ha_snprintf(buf, cap, "%s.log", P.prefix);
}

/* PREFIX[_PID].NNNN.pb.gz from the .heap name of the same dump. */
static void pb_name(char *pb, const char *path)
{
	size_t pl = strlen(path);
	memcpy(pb, path, pl - 5);
	memcpy(pb + pl - 5, ".pb.gz", 7);
}

/* PREFIX[_PID].NNNN.stats from the .heap name of the same dump. */
static void stats_name(char *sp, const char *path)
{
	size_t pl = strlen(path);
	memcpy(sp, path, pl - 5);
	memcpy(sp + pl - 5, ".stats", 7);
}

/* HEAP_PROFILE_KEEP: dump n was written in the formats `written`; remember
 * it and remove whatever falls out of the newest P.keep. */
static __attribute__((noinline)) void retain(uint64_t n, int written)
{
	if (P.keep <= 0 || !written)
		return;
	if (!K.have_first) {
		K.have_first = 1;
		return;
	}
	if (K.n == K.cap) {
		uint64_t want = K.cap ? (uint64_t)K.cap * 2 : 16;
		if (want > (uint64_t)P.keep + 1)
			want = (uint64_t)P.keep + 1;
		uint64_t *r = want > K.cap ? ha_raw_malloc(want * sizeof *r) : NULL;
		if (!r)
			return;   /* not remembered: this one is never removed */
		for (size_t i = 0; i < K.n; i++)
			r[i] = K.ring[(K.head + i) % K.cap];
		if (K.ring)
			ha_raw_free(K.ring);
		K.ring = r;
		K.cap = (size_t)want;
		K.head = 0;
	}
	K.ring[(K.head + K.n++) % K.cap] = n << 2 | (uint64_t)written;
	while (K.n > (uint64_t)P.keep) {
		uint64_t old = K.ring[K.head];
		K.head = (K.head + 1) % K.cap;
		K.n--;
		char path[PREFIX_MAX + 64], pb[PREFIX_MAX + 64];
		file_name(path, sizeof path, old >> 2);
		pb_name(pb, path);
		if (old & HA_FORMAT_TEXT)
			unlink(path);
		if (old & HA_FORMAT_PPROF)
			unlink(pb);
		stats_name(pb, path);   /* its stats sidecar, if any */
		unlink(pb);
	}
}

/* Write the next numbered dump.  folded: threshold crossings that got no
 * dump of their own (HEAP_PROFILE_MIN_SECONDS held them back, or they came
 * while a dump was queued), named in the reason. */
static int dump_locked(const char *reason, uint64_t folded)
{
	char with_folded[1024];
	if (folded) {
		ha_snprintf(with_folded, sizeof with_folded, "%s; %llu crossing%s folded", reason,
			    (unsigned long long)folded, folded == 1 ? "" : "s");
		reason = with_folded;
	}
	pid_t pid = getpid();
	if (pid != P.cur_pid) {       /* a fork child numbers its own files */
		P.cur_pid = pid;
		P.ndumps = 0;
		K.n = K.head = 0;     /* the parent's files are not ours to remove */
		K.have_first = 0;
	}
	char path[PREFIX_MAX + 64];
	file_name(path, sizeof path, ++P.ndumps);
	/* HEAP_PROFILE_FORMAT: PREFIX.NNNN.heap and/or PREFIX.NNNN.pb.gz */
	int fmt = (int)ha_prof_opt.format & (HA_FORMAT_TEXT | HA_FORMAT_PPROF), err = 0;
	if (!fmt)
		fmt = HA_FORMAT_TEXT;
	char pb[PREFIX_MAX + 64];
	const char *written = NULL;   /* the log names the first file written */
	int ok = 0;                   /* HA_FORMAT_* bits written */
	pb_name(pb, path);
	for (int k = HA_FORMAT_TEXT; k <= HA_FORMAT_PPROF; k <<= 1) {
		if (!(fmt & k))
			continue;
		const char *f = k == HA_FORMAT_TEXT ? path : pb;
		ha_log("Dumping heap profile to %s (%s)\n", f, reason);
		int e = k == HA_FORMAT_TEXT ? ha_writer_file(f, P.r) : ha_pprof_file(f, P.r);
		if (e)
			ha_log("Failed dumping heap profile to %s: %s (errno %d)\n", f,
			       errno_name(e), e);
		else
			ok |= k;
		if (!e && !written)
			written = f;
		err = err ? err : e;
	}
	if (!err)
		P.written++;
	uint64_t t[2];
	ha_prof_totals(t);
	ha_peak_see(inuse_of(t));
	ha_peak_check(inuse_of(t));   /* a dump may see a high the checks have not */
	if (ha_prof_opt.stats && !err) {
		char sp[PREFIX_MAX + 64];
		stats_name(sp, path);
		int e = ha_stats_file(sp, written, reason, inuse_of(t), ha_peak_inuse());
		if (e)
			ha_log("Failed writing heap statistics to %s: %s (errno %d)\n", sp,
			       errno_name(e), e);
	}
	write_peak(fmt);
	char lp[PREFIX_MAX + 64];
	log_name(lp, sizeof lp);
	ha_dumplog_line(lp, P.ndumps, t, written, reason);
	retain(P.ndumps, ok);
	clock_gettime(CLOCK_MONOTONIC, &P.last_time);
	return err;
}

/* reason NULL: a time dump, whose reason needs the last dump's time,
 * read under the lock.  reserve: the writer's memory comes from there
 * first (ha_dump_mem), set only while this dump holds the lock. */
static int dump_now(const char *reason, int automatic, void *reserve, size_t cap)
{
	int busy = ha_prof_busy;
	ha_prof_busy = 1;
	ha_lock(&ha_prof_dump_lock);
	int err = EINVAL;
	if (P.running) {
		write_pending_locked();   /* a queued threshold dump keeps its number */
		char buf[64];
		if (!reason) {
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			long long secs = (long long)(now.tv_sec - P.last_time.tv_sec) +
					 (now.tv_nsec >= P.last_time.tv_nsec ? 0 : -1);
			ha_snprintf(buf, sizeof buf, "%lld sec since the last dump", secs);
			reason = buf;
		}
		uint64_t t[2];
		ha_prof_totals(t);
		ha_plock_lock(&thr_lock);
		uint64_t folded = P.folded;
		P.folded = 0;
		ha_plock_unlock(&thr_lock);
		if (reserve)
			ha_dump_mem_reserve(reserve, cap);
		err = dump_locked(reason, folded);
		if (reserve)
			ha_dump_mem_reserve(NULL, 0);
		if (automatic) {
			ha_plock_lock(&thr_lock);
			P.last_alloc = t[0];
			P.last_free = t[1];
			if (inuse_of(t) > P.high_water)
				P.high_water = inuse_of(t);
			ha_plock_unlock(&thr_lock);
		}
	}
	ha_unlock(&ha_prof_dump_lock);
	ha_prof_busy = busy;
	return err;
}

int ha_prof_dump(const char *reason, int automatic)
{
	return dump_now(reason ? reason : "", automatic, NULL, 0);
}

int ha_prof_dump_reserved(const char *reason, void *reserve, size_t cap)
{
	return dump_now(reason, 1, reserve, cap);
}

void ha_prof_time_dump(void)
{
	dump_now(NULL, 1, NULL, 0);
}

uint64_t ha_prof_queued(void)
{
	/* pending first: a dump is marked writing before it stops pending */
	int p = __atomic_load_n(&P.pending, __ATOMIC_SEQ_CST);
	return (uint64_t)p + (uint64_t)__atomic_load_n(&P.writing, __ATOMIC_SEQ_CST);
}

uint64_t ha_prof_dumps(void)
{
	return P.written;
}

uint64_t ha_prof_samples(void)
{
	return __atomic_load_n(&P.samples, __ATOMIC_RELAXED);
}

int ha_prof_running(void)
{
	return __atomic_load_n(&P.running, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------ */
/* start / stop                                                        */

/* Remove PREFIX.NNNN.heap and .pb.gz and PREFIX.peak.* (or PREFIX_PID.* when this process uses
 * the pid form) left by an earlier run.  getdents64: no opendir malloc. */
static void cleanup_old(void)
{
	char name[PREFIX_MAX + 32];
	if (P.use_pid)
		ha_snprintf(name, sizeof name, "%s_%d.", P.prefix, (int)getpid());
	else
		ha_snprintf(name, sizeof name, "%s.", P.prefix);
	char *slash = strrchr(name, '/');
	const char *base = slash ? slash + 1 : name;
	char dir[PREFIX_MAX + 32];
	if (slash) {
		size_t dl = (size_t)(slash - name);
		memcpy(dir, name, dl);
		dir[dl ? dl : 1] = 0;
		if (!dl)
			dir[0] = '/';
	} else {
		strcpy(dir, ".");
	}
	size_t bl = strlen(base);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	char buf[8192] __attribute__((aligned(8)));
	for (;;) {
		long n = syscall(SYS_getdents64, dfd, buf, sizeof buf);
		if (n <= 0)
			break;
		for (long off = 0; off < n;) {
			struct { uint64_t ino; int64_t off; unsigned short reclen;
				 unsigned char type; char name[]; } *d = (void *)(buf + off);
			off += d->reclen;
			const char *s = d->name;
			if (strncmp(s, base, bl) != 0)
				continue;
			s += bl;
			int digits = 0;
			while (*s >= '0' && *s <= '9')
				s++, digits++;
			if ((digits >= 4 && (strcmp(s, ".heap") == 0 || strcmp(s, ".pb.gz") == 0 ||
					     strcmp(s, ".stats") == 0)) ||
			    (!digits && (strcmp(s, "peak.heap") == 0 || strcmp(s, "peak.pb.gz") == 0)))
				unlinkat(dfd, d->name, 0);
		}
	}
	close(dfd);
}

/* Tell descendants they are not the root: add HEAPPROFILE_USE_PID=1 to the
 * live environment unless the user set the variable (then their value
 * rules).  ASCII only; no user variable changes; no malloc (raw memory,
 * leaked on purpose: environ may be read at any time). */
static void mark_descendants(void)
{
	static char var[] = "HEAPPROFILE_USE_PID=1";
	if (ha_prof_opt.use_pid_set || !environ)
		return;
	size_t n = 0;
	while (environ[n])
		n++;
	char **e = ha_raw_malloc((n + 2) * sizeof *e);
	if (!e)
		return;
	memcpy(e, environ, n * sizeof *e);
	e[n] = var;
	e[n + 1] = NULL;
	environ = e;
}

int ha_prof_start(const char *prefix, int from_env)
{
	if (!prefix || !*prefix)
		return EINVAL;
	size_t pl = strlen(prefix);
	if (pl > PREFIX_MAX) {
		ha_log("heapalloc: HEAPPROFILE prefix is too long (%zu bytes, at most %d); "
		       "not profiling\n", pl, PREFIX_MAX);
		return ENAMETOOLONG;
	}
	int busy = ha_prof_busy;
	ha_prof_busy = 1;
	ha_alloc_init();
	if (!ha_prof_opt_loaded)      /* an API start before our constructor */
		ha_options_load();
	ha_stack_init();              /* dl_iterate_phdr: before any lock */
	ha_objmap_init();
	/* the helper writes the default mode's threshold dumps: started before
	 * the books' baseline, so that its thread's own start-up memory is not
	 * part of the program's profile */
	int queue = !ha_prof_opt.exact_totals && (ha_prof_opt.alloc_interval > 0 ||
			ha_prof_opt.dealloc_interval > 0 || ha_prof_opt.inuse_interval > 0);
	if (queue && !ha_prof_running())
		ha_helper_start(ha_prof_opt.time_interval, (int)ha_prof_opt.signal, 1);
	ha_lock(&ha_prof_dump_lock);
	if (P.running) {
		ha_unlock(&ha_prof_dump_lock);
		ha_prof_busy = busy;
		return EBUSY;
	}
	int err = ha_table_init();
	if (err) {
		ha_unlock(&ha_prof_dump_lock);
		ha_prof_busy = busy;
		return err;
	}
	int use_pid = from_env ? (int)ha_prof_opt.use_pid : 0;
	if (strcmp(P.prefix, prefix) != 0 || use_pid != P.use_pid) {
		K.n = K.head = 0;     /* a new naming: the old files stay as they are */
		K.have_first = 0;
	}
	memcpy(P.prefix, prefix, pl + 1);
	P.use_pid = use_pid;
	P.keep = ha_prof_opt.keep;
	P.min_ns = ha_prof_opt.min_seconds > INT64_MAX / 1000000000 ? INT64_MAX
		   : ha_prof_opt.min_seconds * 1000000000;
	P.last_thr = -1;
	P.folded = P.qfolded = 0;
	__atomic_store_n(&P.pending, 0, __ATOMIC_SEQ_CST);
	P.root_pid = P.cur_pid = getpid();
	P.r = ha_prof_opt.sample_interval;
	P.a_int = ha_prof_opt.alloc_interval;
	P.d_int = ha_prof_opt.dealloc_interval;
	P.i_int = ha_prof_opt.inuse_interval;
	P.compat = ha_prof_opt.exact_totals != 0;
	ha_books(P.base, P.base_req);
	P.last_alloc = P.last_free = P.high_water = 0;
	P.samples = 0;
	ha_peak_reset(ha_prof_opt.peak_interval);
	ha_mmaps_reset();
	clock_gettime(CLOCK_MONOTONIC, &P.last_time);
	if (from_env && ha_prof_opt.cleanup)
		cleanup_old();
	char lp[PREFIX_MAX + 64];
	log_name(lp, sizeof lp);
	ha_dumplog_start(lp);
	uint64_t zero[2] = { 0, 0 };
	P.share = alloc_room(zero);
	__atomic_fetch_add(&P.gen, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&P.running, 1, __ATOMIC_RELEASE);
	ha_alloc_profiling(P.compat ? HA_PROF_COMPAT : HA_PROF_ON, P.r <= 1);
	ha_alloc_mmap_profiling(ha_prof_opt.mmap != 0);
	ha_log("Starting tracking the heap\n");
	ha_unlock(&ha_prof_dump_lock);
	if (ha_stack_calibrate(ha_prof_opt.mmap != 0)) {   /* static links only; no lock held */
		ha_lock(&ha_prof_dump_lock);
		ha_books(P.base, P.base_req);   /* the probe's blocks do not count */
		ha_unlock(&ha_prof_dump_lock);
	}
	/* the helper thread runs only when something needs it: time or signal
	 * dumps, RSS dumps, a memory limit to dump before, or (above) threshold
	 * dumps to write */
	if (ha_memwatch_start() || ha_prof_opt.time_interval > 0 || ha_prof_opt.signal > 0)
		ha_helper_start(ha_prof_opt.time_interval, (int)ha_prof_opt.signal, 0);
	ha_prof_busy = busy;
	return 0;
}

void ha_prof_stop(void)
{
	int busy = ha_prof_busy;
	ha_prof_busy = 1;
	ha_lock(&ha_prof_dump_lock);
	if (P.running) {
		write_pending_locked();
		ha_alloc_mmap_profiling(0);
		ha_alloc_profiling(HA_PROF_OFF, 0);
		ha_plock_lock(&thr_lock);
		__atomic_store_n(&P.running, 0, __ATOMIC_RELEASE);
		/* a crossing racing the stop */
		__atomic_store_n(&P.pending, 0, __ATOMIC_SEQ_CST);
		P.qfolded = 0;
		ha_plock_unlock(&thr_lock);
		ha_table_lock();
		ha_objmap_lock_all();
		ha_peak_drop();
		ha_objmap_destroy();
		ha_table_destroy();
		ha_objmap_unlock_all();
		ha_table_unlock();
	}
	ha_unlock(&ha_prof_dump_lock);
	ha_prof_busy = busy;
}

/* ------------------------------------------------------------------ */
/* fork                                                                */

void ha_prof_prefork(void)
{
	ha_prof_busy++;
	fork_window = 1;
	ha_stack_prefork();
	ha_lock(&ha_prof_dump_lock);
	ha_plock_lock(&thr_lock);
	ha_table_lock();
	ha_mmaps_lock();
	ha_objmap_lock_all();
}

void ha_prof_postfork(int child)
{
	if (child) {
		pthread_mutex_init(&ha_prof_dump_lock, NULL);
		ha_plock_init(&thr_lock);
		ha_table_postfork_child();
		ha_mmaps_postfork_child();
		ha_objmap_postfork_child();
		ha_helper_postfork_child();
		/* the parent's crossings and queued dump are the parent's to
		 * report and write */
		P.folded = P.qfolded = 0;
		__atomic_store_n(&P.pending, 0, __ATOMIC_SEQ_CST);
		P.last_thr = -1;
		/* the child keeps its parent's table (the objects are its own
		 * now too); P.cur_pid != getpid() renames it at its first dump */
	} else {
		ha_objmap_unlock_all();
		ha_mmaps_unlock();
		ha_table_unlock();
		ha_plock_unlock(&thr_lock);
		ha_unlock(&ha_prof_dump_lock);
	}
	/* the torn child's prefork ran none of this */
	ha_stack_postfork(child, child != HA_FORK_CHILD_TORN);
	if (child != HA_FORK_CHILD_TORN) {
		fork_window = 0;
		ha_prof_busy--;
	}
}

/* ------------------------------------------------------------------ */
/* process start and exit                                              */

static void exit_dump(void)
{
	if (!ha_prof_running())
		return;
	ha_helper_flush();        /* a signal just before exit keeps its dump */
	uint64_t t[2];
	ha_prof_totals(t);
	uint64_t inuse = inuse_of(t);
	char reason[64];
	if (inuse >> 20)
		ha_snprintf(reason, sizeof reason, "Exiting, %llu MB in use",
			    (unsigned long long)(inuse >> 20));
	else if (inuse >> 10)
		ha_snprintf(reason, sizeof reason, "Exiting, %llu kB in use",
			    (unsigned long long)(inuse >> 10));
	else
		ha_snprintf(reason, sizeof reason, "Exiting, %llu bytes in use",
			    (unsigned long long)inuse);
	ha_prof_dump(reason, 0);
}

__attribute__((constructor(201))) static void ha_prof_ctor(void)
{
	ha_options_load();
	atexit(exit_dump);
	if (!ha_prof_opt.prefix)
		return;
	if (getuid() != geteuid() || getgid() != getegid()) {
		ha_log("heapalloc: HEAPPROFILE ignored in a setuid/setgid program\n");
		return;
	}
	if (ha_prof_start(ha_prof_opt.prefix, 1) == 0)
		mark_descendants();
}
