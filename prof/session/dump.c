/* prof/session/dump.c — writing a numbered dump: PREFIX.NNNN.heap and/or .pb.gz,
 * its stats sidecar, the peak profile and the dump log's line (the names,
 * and HEAP_PROFILE_KEEP's removals, are naming.c's); and the entry points
 * that ask for one (the API, the helper's time dump, the pre-OOM dump from
 * a reserve).
 *
 * Every dump is written under ha_prof_dump_lock, with the thread's
 * re-entrancy guard set so that nothing it allocates is sampled; the
 * threshold lock is taken only briefly, never across the writing.  Never
 * calls the public malloc (raw memory, or the reserve); never takes the
 * process down: a failed write logs one line and carries on.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prof/session/session.h"

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

int ha_prof_timeline_on(void)
{
	return !ha_prof_opt.exact_totals && ha_prof_opt.timeline_ms > 0 && !ha_session.nofiles;
}

/* A row of the dump log between dumps, from the helper thread: the totals
 * and RSS now, when the heap moved since the last row, so that the log
 * charts the whole run.  A heap that moves again after standing still first
 * gets a row of the old totals at the previous tick, so a chart holds the
 * level flat instead of sloping across the pause.  Its seq is the last
 * dump's number.  Skipped while a dump is being written (which writes a
 * row of its own).  A peak copy taken since the last tick gets a row of its
 * own, at its moment, before the tick's. */
static struct {
	uint64_t last[2];         /* the totals of the last row */
	pid_t pid;                /* the process they are of */
	int still;                /* the heap has not moved since that row */
	struct timespec prev;     /* the last tick */
	uint64_t peak_version;    /* the peak copy the timeline has a row of */
} row;

/* The heap moves again (or a dump comes) after standing still: the old
 * level at the last tick.  Caller holds ha_prof_dump_lock. */
static void timeline_hold(const char *lp, uint64_t seq)
{
	if (row.still && row.pid == getpid())
		ha_dumplog_row(lp, seq, row.last, NULL, "timeline", &row.prev);
	row.still = 0;
}

/* A peak copy taken since the last row: a row at its moment, so that the
 * timeline's highest point is the peak, not the nearest tick.  1 if one
 * was written.  Caller holds ha_prof_dump_lock. */
static int peak_row(const char *lp, uint64_t seq)
{
	struct timespec at;
	uint64_t t[2];
	if (!ha_prof_timeline_on() || !ha_peak_taken(&row.peak_version, &at, t) ||
	    at.tv_sec < row.prev.tv_sec ||
	    (at.tv_sec == row.prev.tv_sec && at.tv_nsec <= row.prev.tv_nsec))
		return 0;
	timeline_hold(lp, seq);
	ha_dumplog_row(lp, seq, t, NULL, "timeline", &at);
	row.prev = at;
	return 1;
}

/* Set by the exit dump: a tick after it writes no row, so the exit dump is
 * the log's last line (a slow exit, e.g. under qemu-user, left one after). */
static int timeline_ended;

void ha_prof_timeline_end(void)
{
	__atomic_store_n(&timeline_ended, 1, __ATOMIC_RELEASE);
}

void ha_prof_timeline_row(void)
{
	if (!ha_prof_running() || !ha_trylock(&ha_prof_dump_lock))
		return;
	if (__atomic_load_n(&timeline_ended, __ATOMIC_ACQUIRE)) {
		ha_unlock(&ha_prof_dump_lock);
		return;
	}
	char lp[HA_PREFIX_MAX + 64];
	ha_naming_log(lp, sizeof lp);
	if (row.pid != getpid()) {
		row.pid = getpid();
		row.still = 0;
		row.last[0] = row.last[1] = ~(uint64_t)0;
	}
	if (peak_row(lp, ha_session.ndumps))
		row.last[0] = row.last[1] = ~(uint64_t)0;   /* the tick's row follows */
	uint64_t t[2];
	ha_prof_totals(t);
	ha_peak_see(ha_inuse_of(t));   /* a row's in use is a height the books saw */
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	if (t[0] != row.last[0] || t[1] != row.last[1]) {
		timeline_hold(lp, ha_session.ndumps);
		row.last[0] = t[0];
		row.last[1] = t[1];
		ha_dumplog_row(lp, ha_session.ndumps, t, NULL, "timeline", &now);
	} else {
		row.still = 1;
	}
	row.prev = now;
	ha_unlock(&ha_prof_dump_lock);
}

/* With every dump: the peak profile, when it changed since it was written. */
static void write_peak(int fmt)
{
	char text[HA_PREFIX_MAX + 64], pb[HA_PREFIX_MAX + 64];
	ha_naming_peak(text, pb, sizeof text);
	int n;
	int e = ha_peak_write(text, pb, fmt, ha_prof_rate(), &n);
	if (n) {
		/* the peak the books saw; the copy is at it or within a step */
		uint64_t high = ha_peak_high(), copy = ha_peak_inuse();
		high = high > copy ? high : copy;
		const char *f = fmt & HA_FORMAT_TEXT ? text : pb;
		ha_log("Writing the peak heap profile to %s (%llu MB in use at the peak)\n", f,
		       (unsigned long long)(high >> 20));
		char lp[HA_PREFIX_MAX + 64];
		ha_naming_log(lp, sizeof lp);
		ha_dumplog_peak(lp, f, high, copy);
	}
	if (e)
		ha_log("Failed writing the peak heap profile %s: %s (errno %d)\n",
		       fmt & HA_FORMAT_TEXT ? text : pb, errno_name(e), e);
}

/* Write the next numbered dump.  folded: threshold crossings that got no
 * dump of their own (HEAP_PROFILE_MIN_SECONDS held them back, or they came
 * while a dump was queued), named in the reason. */
int ha_prof_dump_locked(const char *reason, uint64_t folded)
{
	char with_folded[1024];
	if (folded) {
		ha_snprintf(with_folded, sizeof with_folded, "%s; %llu crossing%s folded", reason,
			    (unsigned long long)folded, folded == 1 ? "" : "s");
		reason = with_folded;
	}
	pid_t pid = getpid();
	if (pid != ha_session.cur_pid) {       /* a fork child numbers its own files */
		ha_session.cur_pid = pid;
		ha_session.ndumps = 0;
		ha_kept_dumps.n = ha_kept_dumps.head = 0;     /* the parent's files are not ours to remove */
		ha_kept_dumps.have_first = 0;
	}
	char path[HA_PREFIX_MAX + 64];
	ha_naming_file(path, sizeof path, ++ha_session.ndumps);
	/* HEAP_PROFILE_FORMAT: PREFIX.NNNN.heap and/or PREFIX.NNNN.pb.gz */
	int fmt = (int)ha_prof_opt.format & (HA_FORMAT_TEXT | HA_FORMAT_PPROF), err = 0;
	if (!fmt)
		fmt = HA_FORMAT_TEXT;
	char pb[HA_PREFIX_MAX + 64];
	const char *written = NULL;   /* the log names the first file written */
	int ok = 0;                   /* HA_FORMAT_* bits written */
	ha_naming_pb(pb, path);
	/* one reading of the books for the files, the stats and the log, so
	 * that a calibrated profile adds up to the figure printed beside it */
	uint64_t t[2];
	ha_prof_totals(t);
	/* and one snapshot of the table for both files: the program allocates
	 * on while the helper writes.  Recording everything, the figure is
	 * the snapshot's own sum, so that the files add up to it exactly. */
	size_t nl = 0;
	int own = 0;
	const ha_line *snap = ha_lines_of(NULL, &nl, &own);
	if (snap && ha_prof_records_all() && !ha_session.compat) {
		t[0] = t[1] = 0;
		for (size_t i = 0; i < nl; i++)
			if (snap[i].alloc_count && snap[i].b->depth) {
				t[0] += snap[i].alloc_bytes;
				t[1] += snap[i].free_bytes;
			}
	}
	ha_lineset set = { snap, nl, 1, { t[0], t[1] }, 1 };
	ha_calib_hold(t);
	for (int k = HA_FORMAT_TEXT; k <= HA_FORMAT_PPROF; k <<= 1) {
		if (!(fmt & k))
			continue;
		const char *f = k == HA_FORMAT_TEXT ? path : pb;
		ha_log("Dumping heap profile to %s (%s)\n", f, reason);
		int e;
		if (!snap && nl)      /* no memory for the snapshot: from the table */
			e = k == HA_FORMAT_TEXT ? ha_writer_file(f, ha_prof_rate())
						: ha_pprof_file(f, ha_prof_rate());
		else
			e = k == HA_FORMAT_TEXT ? ha_writer_file_from(f, ha_prof_rate(), &set)
						: ha_pprof_file_from(f, ha_prof_rate(), &set);
		if (e)
			ha_log("Failed dumping heap profile to %s: %s (errno %d)\n", f,
			       errno_name(e), e);
		else
			ok |= k;
		if (!e && !written)
			written = f;
		err = err ? err : e;
	}
	ha_calib_hold(NULL);
	if (snap && own)
		ha_dump_mem_free((void *)snap);
	if (!err)
		ha_session.written++;
	ha_peak_dump(t);   /* never below a dump's in use */
	if (ha_prof_opt.stats && !err) {
		char sp[HA_PREFIX_MAX + 64];
		ha_naming_stats(sp, path);
		int e = ha_stats_file(sp, written, reason, ha_inuse_of(t), ha_peak_inuse());
		if (e)
			ha_log("Failed writing heap statistics to %s: %s (errno %d)\n", sp,
			       errno_name(e), e);
	}
	write_peak(fmt);
	char lp[HA_PREFIX_MAX + 64];
	ha_naming_log(lp, sizeof lp);
	timeline_hold(lp, ha_session.ndumps - 1);   /* rows before this dump */
	peak_row(lp, ha_session.ndumps - 1);
	ha_dumplog_line(lp, ha_session.ndumps, t, written, reason);
	ha_naming_retain(ha_session.ndumps, ok);
	clock_gettime(CLOCK_MONOTONIC, &ha_session.last_time);
	return err;
}

/* reason NULL: a time dump, whose reason needs the last dump's time,
 * read under the lock.  reserve: the writer's memory comes from there
 * first (ha_dump_mem), set only while this dump holds the lock. */
static int dump_locked(const char *reason, int automatic, void *reserve, size_t cap)
{
	int err = EINVAL;
	if (ha_session.running && !ha_session.nofiles) {   /* the endpoint's session names no file */
		ha_prof_write_pending_locked();   /* a queued threshold dump keeps its number */
		char buf[64];
		if (!reason) {
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			long long secs = (long long)(now.tv_sec - ha_session.last_time.tv_sec) +
					 (now.tv_nsec >= ha_session.last_time.tv_nsec ? 0 : -1);
			ha_snprintf(buf, sizeof buf, "%lld sec since the last dump", secs);
			reason = buf;
		}
		uint64_t t[2];
		ha_prof_totals(t);
		ha_plock_lock(&ha_prof_thr_lock);
		uint64_t folded = ha_session.folded;
		ha_session.folded = 0;
		ha_plock_unlock(&ha_prof_thr_lock);
		if (reserve)
			ha_dump_mem_reserve(reserve, cap);
		err = ha_prof_dump_locked(reason, folded);
		if (reserve)
			ha_dump_mem_reserve(NULL, 0);
		if (automatic) {
			ha_plock_lock(&ha_prof_thr_lock);
			ha_session.last_alloc = t[0];
			ha_session.last_free = t[1];
			if (ha_inuse_of(t) > ha_session.high_water)
				ha_session.high_water = ha_inuse_of(t);
			ha_plock_unlock(&ha_prof_thr_lock);
		}
	}
	return err;
}

static int dump_now(const char *reason, int automatic, void *reserve, size_t cap)
{
	if (ha_prof_opt.format & HA_FORMAT_PPROF)
		ha_gzip_load();   /* the first time: dlopen, no lock held */
	int busy = ha_prof_busy;
	ha_prof_busy = 1;
	ha_lock(&ha_prof_dump_lock);
	int err = dump_locked(reason, automatic, reserve, cap);
	ha_unlock(&ha_prof_dump_lock);
	ha_prof_busy = busy;
	return err;
}

int ha_prof_dump_held(const char *reason)
{
	return dump_locked(reason, 0, NULL, 0);
}

void ha_prof_dump_holding(void (*fn)(void))
{
	int busy = ha_prof_busy;
	ha_prof_busy = 1;
	ha_lock(&ha_prof_dump_lock);
	fn();
	ha_unlock(&ha_prof_dump_lock);
	ha_prof_busy = busy;
}

int ha_prof_dump(const char *reason, int automatic)
{
	return dump_now(reason ? reason : "", automatic, NULL, 0);
}

int ha_prof_dump_reserved(const char *reason, void *reserve, size_t cap)
{
	return dump_now(reason, 1, reserve, cap);
}

/* gperftools' rule: a time dump once the last dump of any kind is interval
 * seconds old, so a dump in between (a threshold, a scrape's start) moves
 * the next one; *next is when to look again */
void ha_prof_time_dump(int64_t interval, struct timespec *next)
{
	ha_lock(&ha_prof_dump_lock);
	struct timespec last = ha_session.last_time;
	int running = ha_session.running;
	ha_unlock(&ha_prof_dump_lock);
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	int64_t ns = (int64_t)(now.tv_sec - last.tv_sec) * 1000000000 + (now.tv_nsec - last.tv_nsec);
	if (running && ns < interval * 1000000000) {
		*next = last;
		next->tv_sec += interval;
		return;
	}
	dump_now(NULL, 1, NULL, 0);
	clock_gettime(CLOCK_MONOTONIC, next);
	next->tv_sec += interval;
}
