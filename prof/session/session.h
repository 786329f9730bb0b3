/* prof/session/session.h — the profiling session's shared state, for the
 * files it is split into (session.c, triggers.c, hooks.c, dump.c,
 * naming.c) and two readers (remote.c copies it into the exported root;
 * usdt.c reads whether it runs) only: tests/unit/layering.sh fails on any
 * other includer.
 *
 * Owns the declarations of the session (ha_session), the books of the
 * dumps kept on disk (ha_kept_dumps) and the threshold lock.  Everything
 * here is hidden, so an access costs what it did when it was file-static.  Lock order and
 * fork rules: prof/prof.h.
 */
#ifndef HA_PROF_SESSION_H
#define HA_PROF_SESSION_H

#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "prof/prof.h"

#define HA_PREFIX_MAX 4000

/* The session: its settings (copied at start), the threshold books, the
 * queued dump and the counters.  Defined in session.c. */
struct ha_session {
	int running;
	int nofiles;              /* HEAP_PROFILE_HTTP alone: sampling, no files */
	int background;           /* the always-on sampling (nothing was set):
				   * no files, and not "running" to the API */
	int use_pid;              /* HEAPPROFILE_USE_PID applied to this start */
	pid_t root_pid;           /* the process that writes PREFIX.NNNN.heap */
	pid_t cur_pid;
	int64_t a_int, d_int, i_int;
	uint64_t base[2], base_req[2];  /* the books when profiling started */
	uint64_t rec[2];          /* R = 1: requested bytes recorded, freed (atomic) */
	uint64_t last_alloc, last_free, high_water; /* baselines, relative */
	struct timespec last_time;
	uint64_t ndumps;          /* file counter; carries on across stop/start */
	uint64_t written;         /* profiles written */
	uint64_t samples;
	uint32_t gen;             /* bumped by every start */
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
	char prefix[HA_PREFIX_MAX + 1];
};
extern HA_HIDDEN struct ha_session ha_session;

/* The threshold books: ha_session.last_alloc, last_free, high_water,
 * last_thr, folded, pending, qfolded and pending_reason, and
 * ha_session.running's changes.  Short (no dump is ever written under it),
 * taken after ha_prof_dump_lock, so a crossing thread can queue a dump
 * while the helper is writing one.  Defined in triggers.c. */
extern HA_HIDDEN ha_plock ha_prof_thr_lock;

/* HEAP_PROFILE_KEEP's books: the dumps this process wrote that are still
 * on disk, oldest first, each (number << 2 | HA_FORMAT_* bits written),
 * but for the first, which stays.  Only what is listed here is ever
 * removed, so files of other runs and processes (even under a number this
 * process failed to write) are never touched.  Raw memory, grown under
 * ha_prof_dump_lock up to keep + 1 entries; a fork child starts empty.
 * Defined in naming.c. */
struct ha_kept_dumps {
	uint64_t *ring;
	size_t cap, head, n;
	int have_first;
};
extern HA_HIDDEN struct ha_kept_dumps ha_kept_dumps;

/* This thread holds every lock (prefork); session.c. */
extern HA_TLS HA_HIDDEN int ha_prof_fork_window;

/* ---- triggers.c ---------------------------------------------------------- */
/* Bytes of allocation after which a threshold may fire (>= 0), from t. */
HA_HIDDEN int64_t ha_prof_alloc_room(const uint64_t t[2]);
/* The threshold check of an allocating or freeing thread; it returns the
 * thread's budgets: the bytes it may allocate, and free, before its next
 * check (INT64_MAX: none). */
typedef struct ha_budgets {
	int64_t alloc, freed;
} ha_budgets;
HA_HIDDEN ha_budgets ha_prof_check_thresholds(void);
/* Write the queued threshold dump, if any.  Caller holds ha_prof_dump_lock. */
HA_HIDDEN void ha_prof_write_pending_locked(void);

/* ---- dump.c -------------------------------------------------------------- */
/* Write the next numbered dump (caller holds ha_prof_dump_lock); folded:
 * crossings named in its reason.  0 or errno. */
HA_HIDDEN int ha_prof_dump_locked(const char *reason, uint64_t folded);

/* ---- naming.c ------------------------------------------------------------ */
/* PREFIX[_PID].NNNN.heap into buf. */
HA_HIDDEN void ha_naming_file(char *buf, size_t cap, uint64_t n);
/* PREFIX[_PID].peak.heap and .peak.pb.gz into text and pb. */
HA_HIDDEN void ha_naming_peak(char *text, char *pb, size_t cap);
/* PREFIX[_PID].log, the dump log's name for this process. */
HA_HIDDEN void ha_naming_log(char *buf, size_t cap);
/* PREFIX[_PID].NNNN.pb.gz / .stats from the .heap name of the same dump. */
HA_HIDDEN void ha_naming_pb(char *pb, const char *path);
HA_HIDDEN void ha_naming_stats(char *sp, const char *path);
/* HEAP_PROFILE_KEEP: dump n was written in the formats `written`. */
HA_HIDDEN void ha_naming_retain(uint64_t n, int written);
/* HEAP_PROFILE_CLEANUP: remove the files an earlier run left. */
HA_HIDDEN void ha_naming_cleanup(void);
/* Descendants name their files with their pid (HEAPPROFILE_USE_PID=1). */
HA_HIDDEN void ha_naming_mark_descendants(void);

#endif
