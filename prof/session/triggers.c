/* prof/session/triggers.c — when a dump is due: the totals since the start, the
 * threshold books (allocation, deallocation and in-use intervals,
 * HEAP_PROFILE_MIN_SECONDS) and the threshold dump they queue.
 *
 * Totals come from the allocator's books (ha_books): the allocated unit in
 * the default mode, requested bytes in compatibility mode.
 *
 * Threshold dumps: in the default mode the crossing thread only queues the
 * dump (ha_session.pending, under the threshold lock) and wakes the helper
 * thread, which writes it, so malloc never waits for a dump; a crossing
 * while one is queued folds into it (ha_session.folded).  Without a helper
 * of this process (not started yet, a fork child's first crossing,
 * pthread_create failed) and in compatibility mode the crossing thread
 * writes the dump itself, as gperftools does.  Every other dump writes a
 * queued one first.
 *
 * Owns the threshold lock (ha_prof_thr_lock): short, never held while a
 * dump is written.  Never unwinds; never calls the public malloc.  Lock
 * order: prof/prof.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>
#include <time.h>

#include "prof/session/session.h"

ha_plock ha_prof_thr_lock = HA_PLOCK_INIT;

/* Since profiling started: out[0] bytes allocated, out[1] bytes freed.
 * Default mode: the books' allocated unit, freed = allocated - in use;
 * compatibility mode: requested bytes; recording every allocation:
 * requested bytes of the blocks recorded and freed, the unit of the lines
 * (hooks.c), exact for every block the session recorded. */
void ha_prof_totals(uint64_t out[2])
{
	uint64_t b[2], r[2];
	if (ha_prof_records_all() && !ha_session.compat) {
		uint64_t rec[2] = { __atomic_load_n(&ha_session.rec[0], __ATOMIC_RELAXED),
				    __atomic_load_n(&ha_session.rec[1], __ATOMIC_RELAXED) };
		ha_totals_of(rec, NULL, NULL, NULL, NULL, 0, out);
		return;
	}
	ha_books(b, r);
	ha_totals_of(NULL, b, r, ha_session.base, ha_session.base_req, ha_session.compat, out);
}

/* Bytes of allocation after which a threshold may fire (>= 0), from t. */
int64_t ha_prof_alloc_room(const uint64_t t[2])
{
	int64_t room = INT64_MAX;
	if (ha_session.a_int > 0) {
		int64_t r = (int64_t)(ha_session.last_alloc + (uint64_t)ha_session.a_int - t[0]) - 1;
		room = r < room ? r : room;
	}
	if (ha_session.i_int > 0) {
		int64_t r = (int64_t)(ha_session.high_water + (uint64_t)ha_session.i_int) -
			    (int64_t)ha_inuse_of(t);
		room = r < room ? r : room;
	}
	int64_t pr = ha_peak_room(ha_inuse_of(t));
	room = pr < room ? pr : room;
	return room < 0 ? 0 : room;
}

static int64_t free_room(const uint64_t t[2])
{
	if (ha_session.d_int <= 0)
		return INT64_MAX;
	int64_t r = (int64_t)(ha_session.last_free + (uint64_t)ha_session.d_int - t[1]) - 1;
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

static int64_t mono_ns(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

/* HEAP_PROFILE_MIN_SECONDS: a threshold crossing less than min_ns after
 * the last threshold dump is held back and counted (ha_session.folded) for the
 * next dump's reason; the baselines move as if it had been dumped, so the
 * count is what the dump numbers would have been. */
static int hold_back(void)
{
	if (ha_session.min_ns <= 0)
		return 0;
	int64_t now = mono_ns();
	if (ha_session.last_thr >= 0 && now - ha_session.last_thr < ha_session.min_ns)
		return 1;
	ha_session.last_thr = now;
	return 0;
}

/* Write the queued threshold dump, if any.  Caller holds ha_prof_dump_lock. */
void ha_prof_write_pending_locked(void)
{
	char reason[sizeof ha_session.pending_reason];
	uint64_t folded = 0;
	ha_plock_lock(&ha_prof_thr_lock);
	int due = ha_session.pending;
	if (due) {
		memcpy(reason, ha_session.pending_reason, sizeof reason);
		folded = ha_session.qfolded;
		ha_session.qfolded = 0;
		__atomic_store_n(&ha_session.writing, 1, __ATOMIC_SEQ_CST);   /* before pending drops */
		__atomic_store_n(&ha_session.pending, 0, __ATOMIC_SEQ_CST);
	}
	ha_plock_unlock(&ha_prof_thr_lock);
	if (due) {
		ha_prof_dump_locked(reason, folded);
		__atomic_store_n(&ha_session.writing, 0, __ATOMIC_SEQ_CST);
	}
}

/* gperftools' MaybeDumpProfileLocked: at most one dump per check, in this
 * order of reasons; an automatic dump resets every baseline.  The dump is
 * queued for the helper (default mode) or written here (compatibility
 * mode, or no helper to write it). */
ha_budgets ha_prof_check_thresholds(void)
{
	ha_budgets bud = { INT64_MAX, INT64_MAX };
	uint64_t t[2];
	ha_prof_totals(t);
	if (ha_session.running)
		ha_peak_arm(ha_inuse_of(t));   /* past a step: the next free copies */
	if (ha_prof_alloc_room(t) > 0 && free_room(t) > 0 && ha_session.running) {
		bud.alloc = per_thread(ha_prof_alloc_room(t));
		bud.freed = per_thread(free_room(t));
		return bud;
	}
	int sync = ha_session.compat;
	if (sync)
		ha_lock(&ha_prof_dump_lock);
	ha_plock_lock(&ha_prof_thr_lock);
	int queued = 0;
	if (ha_session.running) {
		char reason[sizeof ha_session.pending_reason];
		reason[0] = 0;
		ha_prof_totals(t);
		uint64_t inuse = ha_inuse_of(t);
		ha_peak_arm(inuse);
		if (ha_session.a_int > 0 && t[0] >= ha_session.last_alloc + (uint64_t)ha_session.a_int)
			mb_reason(reason, sizeof reason, "allocated", t[0], inuse);
		else if (ha_session.d_int > 0 && t[1] >= ha_session.last_free + (uint64_t)ha_session.d_int)
			mb_reason(reason, sizeof reason, "freed", t[1], inuse);
		else if (ha_session.i_int > 0 && inuse > ha_session.high_water + (uint64_t)ha_session.i_int)
			ha_snprintf(reason, sizeof reason, "%llu MB currently in use",
				    (unsigned long long)(inuse >> 20));
		if (reason[0]) {
			if (hold_back()) {
				ha_session.folded++;
			} else {
				/* the crossings held back before this one, and the
				 * queued one it replaces, are named by its dump */
				ha_session.qfolded += ha_session.folded + (ha_session.pending ? 1 : 0);
				ha_session.folded = 0;
				memcpy(ha_session.pending_reason, reason, sizeof reason);
				__atomic_store_n(&ha_session.pending, 1, __ATOMIC_SEQ_CST);
				queued = 1;
			}
			ha_session.last_alloc = t[0];
			ha_session.last_free = t[1];
			if (inuse > ha_session.high_water)
				ha_session.high_water = inuse;
		}
		bud.alloc = per_thread(ha_prof_alloc_room(t));
		bud.freed = per_thread(free_room(t));
	}
	ha_plock_unlock(&ha_prof_thr_lock);
	if (queued && !sync && ha_helper_wake() != 0) {
		sync = 1;                 /* nobody to write it: write it here */
		ha_lock(&ha_prof_dump_lock);
	}
	if (sync) {
		ha_prof_write_pending_locked();
		ha_unlock(&ha_prof_dump_lock);
	}
	return bud;
}

/* The helper's half: write the queued threshold dump. */
void ha_prof_write_pending(void)
{
	ha_prof_dump_holding(ha_prof_write_pending_locked);
}

uint64_t ha_prof_queued(void)
{
	/* pending first: a dump is marked writing before it stops pending */
	int p = __atomic_load_n(&ha_session.pending, __ATOMIC_SEQ_CST);
	return (uint64_t)p + (uint64_t)__atomic_load_n(&ha_session.writing, __ATOMIC_SEQ_CST);
}
