/* prof/session/peak.c — the profile as it stood when the heap was fullest.
 *
 * The copy is taken at the turn: once the books' in-use total has climbed
 * to the last copy's plus a step (ha_peak_arm, at a threshold check), the
 * allocator is asked to report the next free that may lower it
 * (ha_alloc_watch_frees); that free calls ha_prof_turn before its block
 * leaves the profile or the books, and the stack table is copied then, at
 * the high itself.  With every allocation recorded the copy is exact at
 * the turn it is taken; sampled, it is the samples live then.
 *
 * The first copy is due once in use reaches HEAP_PROFILE_PEAK_INTERVAL (a
 * program that never holds 16 MiB has no peak file), each later one a
 * step past the last turn's copy (step_mark): max(64 KiB, mark / 128).  A heap
 * that wavers upward is copied at most every 0.8% of its height (about 89
 * copies per doubling, each a pass over the buckets into a reused buffer),
 * and a turn less than a step above the last copy leaves the copy within
 * 0.8% of the true peak.  A dump past the first copy's threshold copies
 * whenever in use exceeds the copy's, so the peak is never below a dump.
 * The highest in use the books saw (ha_peak_high) is what the message and
 * the dump log report as the peak.
 *
 * Recording every allocation (not in compatibility mode) the copy is an
 * image kept bucket by bucket instead: a change to a bucket marks it
 * (ha_peak_touch), the turn rereads the marked buckets only, so a turn can
 * copy at every new high and the copy is the peak exactly, for a heap that
 * climbs in small teeth too.  The writer writes a snapshot of the image.
 *
 * Owns peak_lock: taken by the freeing thread at the turn, by a dump, and
 * by the peak's writer only to pick up and hand back a copy (lock order
 * in prof/prof.h: after the dump lock, before the table lock).  Two copy
 * buffers: the writer writes one while a turn fills the other.  Never
 * calls the public malloc (raw memory); the buckets a copy points to live
 * until the table is destroyed, which drops the copies first.
 */
#include "prof/prof.h"
#include <sched.h>
#include <string.h>

typedef struct copy {
	size_t cap, n;            /* lines room, lines filled */
	uint64_t books[2];        /* ha_prof_totals at the copy: allocated, freed */
	ha_line v[];
} copy;

/* Sampled, a check (a walk over every thread's books) comes at most every
 * PEAK_GAP_RATES sampling intervals of allocation (2 MiB at 512 KiB): a
 * heap hovering just under the next step would otherwise be checked every
 * few KiB (larson: 34,000 checks, +47% instructions, against 200).  A
 * crossing is then seen up to that much late, so a bump narrower than it
 * can be missed; recording everything, the checks follow the step. */
#define PEAK_GAP_RATES 4
/* The smallest step between copies: 1/128 of the heap is less below 8 MiB. */
#define PEAK_MIN_STEP ((uint64_t)64 << 10)

static ha_plock peak_lock = HA_PLOCK_INIT;

int ha_peak_inc;                  /* the image is kept by marks (atomic) */
/* Marked buckets, idx + 1 each, in the order marked; raw memory allocated
 * once and never freed (a marking thread may be inside it at a stop).  A
 * full list, or a slot whose marker never came back (a fork), has the next
 * turn reread every bucket. */
#define MARKS_CAP ((size_t)1 << 16)
static struct {
	uint32_t *list;
	uint64_t n;               /* slots taken (atomic) */
	uint64_t done;            /* slots read back (peak_lock) */
	int over;                 /* reread everything (atomic) */
} marks;

static struct {
	uint64_t first;           /* HEAP_PROFILE_PEAK_INTERVAL; 0: off */
	uint64_t gap;             /* allocation between checks, at least */
	uint64_t mark;            /* in use at the copy */
	uint64_t step_mark;       /* in use at the last turn's copy, which the steps
				   * count from (atomic: read by the checks); a
				   * dump's copy does not move it, so a dump just
				   * below the high cannot keep the turn from
				   * copying the high itself */
	copy *cur, *spare;        /* the copy, and a buffer for the next */
	copy *writing;            /* being written (ha_peak_write) */
	uint64_t version, written;
	struct timespec at;       /* when the copy was taken, and ha_prof_totals then */
	uint64_t at_t[2];
	uint64_t high;            /* highest in use seen (atomic); kept past a stop */
	int armed;                /* the turn is watched for (atomic) */
	int live;                 /* a table to copy: from reset to drop */
	int image_ok;             /* peak.cur is the image, up to date but marks */
} peak;

/* In use past which a copy is due: the first at HEAP_PROFILE_PEAK_INTERVAL
 * (mark 0: no copy yet), then a step over the last. */
static uint64_t due(uint64_t mark)
{
	if (!mark)
		return peak.first;
	if (__atomic_load_n(&ha_peak_inc, __ATOMIC_RELAXED))
		return mark + 1;      /* the image: every new high */
	uint64_t rel = mark >> 7;
	return mark + (rel > PEAK_MIN_STEP ? rel : PEAK_MIN_STEP);
}

static void disarm(void)
{
	if (__atomic_exchange_n(&peak.armed, 0, __ATOMIC_ACQ_REL))
		ha_alloc_watch_frees(0);
}

void ha_peak_reset(int64_t interval, int64_t rate)
{
	ha_peak_drop();
	ha_plock_lock(&peak_lock);
	peak.first = interval > 0 ? (uint64_t)interval : 0;
	peak.gap = !ha_rate_records_all(rate) ? PEAK_GAP_RATES * (uint64_t)rate : 0;
	peak.version = peak.written = 0;
	__atomic_store_n(&peak.high, 0, __ATOMIC_RELAXED);
	peak.live = 1;
	peak.image_ok = 0;
	if (ha_rate_records_all(rate) && !ha_prof_compat() && peak.first && !marks.list)
		marks.list = ha_raw_malloc(MARKS_CAP * sizeof *marks.list);
	if (ha_rate_records_all(rate) && !ha_prof_compat() && peak.first && marks.list) {
		memset(marks.list, 0, MARKS_CAP * sizeof *marks.list);
		__atomic_store_n(&marks.n, 0, __ATOMIC_RELAXED);
		marks.done = 0;
		__atomic_store_n(&marks.over, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&ha_peak_inc, 1, __ATOMIC_RELEASE);
	}
	ha_plock_unlock(&peak_lock);
}

void ha_peak_see(uint64_t inuse)
{
	uint64_t h = __atomic_load_n(&peak.high, __ATOMIC_RELAXED);
	while (inuse > h &&
	       !__atomic_compare_exchange_n(&peak.high, &h, inuse, 1, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
}

uint64_t ha_peak_high(void)
{
	return __atomic_load_n(&peak.high, __ATOMIC_RELAXED);
}

void ha_peak_arm(uint64_t inuse)
{
	ha_peak_see(inuse);
	if (!peak.first || inuse < due(__atomic_load_n(&peak.step_mark, __ATOMIC_RELAXED)) ||
	    inuse <= __atomic_load_n(&peak.mark, __ATOMIC_RELAXED))
		return;
	if (!__atomic_exchange_n(&peak.armed, 1, __ATOMIC_ACQ_REL))
		ha_alloc_watch_frees(1);
}

/* Allocation bytes after which the next check is due (thresholds'
 * convention: it fires once more than this has been allocated), at least
 * the gap.  Armed, the turn is the frees' to find: the next crossing is a
 * step above. */
int64_t ha_peak_room(uint64_t inuse)
{
	if (!peak.first)
		return INT64_MAX;
	if (__atomic_load_n(&ha_peak_inc, __ATOMIC_RELAXED) && peak.cur)
		return INT64_MAX;     /* each record checks (prof/capture/hooks.c) */
	uint64_t mark = __atomic_load_n(&peak.step_mark, __ATOMIC_RELAXED);
	if (__atomic_load_n(&peak.armed, __ATOMIC_RELAXED) && inuse > mark)
		mark = inuse;
	uint64_t d = due(mark);
	uint64_t room = d > inuse ? d - inuse - 1 : 0;
	return (int64_t)(room > peak.gap ? room : peak.gap);
}

/* Copy the table into the spare buffer and make it the copy.  peak_lock
 * held.  0, or ENOMEM (the older copy stays). */
void ha_peak_touch_slow(ha_bucket *b)
{
	if (__atomic_exchange_n(&b->dirty, 1, __ATOMIC_ACQ_REL))
		return;
	uint64_t i = __atomic_fetch_add(&marks.n, 1, __ATOMIC_ACQ_REL);
	if (i < MARKS_CAP)
		__atomic_store_n(&marks.list[i], b->idx + 1, __ATOMIC_RELEASE);
	else
		__atomic_store_n(&marks.over, 1, __ATOMIC_RELEASE);
}

/* Reread bucket idx into the image: its mark cleared first, so a change
 * after the read marks it again. */
static void reread(copy *c, size_t idx)
{
	ha_bucket *b = ha_table_bucket_live((uint32_t)idx);
	if (!b)
		return;
	__atomic_store_n(&b->dirty, 0, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	ha_table_line(&c->v[idx], b);
}

/* The image brought up to date: the marked buckets, or all of them.
 * peak_lock held.  0, or ENOMEM. */
static int take_image(const uint64_t t[2])
{
	size_t nb = ha_table_count();
	copy *c = peak.cur;
	if (!c || c->cap < nb + 64) {
		size_t cap = nb + nb / 2 + 1024;
		copy *g = ha_raw_malloc(sizeof *g + cap * sizeof g->v[0]);
		if (!g)
			return ENOMEM;
		g->cap = cap;
		g->n = 0;
		if (c) {
			memcpy(g->v, c->v, c->n * sizeof c->v[0]);
			g->n = c->n;
			ha_raw_free(c);   /* never the writer's: it writes a snapshot */
		}
		peak.cur = c = g;
	}
	for (;;) {
		uint64_t n = __atomic_load_n(&marks.n, __ATOMIC_ACQUIRE);
		for (; marks.done < n && marks.done < MARKS_CAP; marks.done++) {
			uint32_t v;
			int spins = 0;
			while (!(v = __atomic_load_n(&marks.list[marks.done], __ATOMIC_ACQUIRE)) &&
			       ++spins < 1000)
				sched_yield();   /* its marker is between two stores */
			if (!v) {
				__atomic_store_n(&marks.over, 1, __ATOMIC_RELAXED);
				continue;
			}
			__atomic_store_n(&marks.list[marks.done], 0, __ATOMIC_RELAXED);
			if (v - 1 < c->cap) {
				for (size_t k = c->n; k < v - 1; k++)
					reread(c, k);   /* buckets made since */
				reread(c, v - 1);
				if (v > c->n)
					c->n = v;
			} else {
				__atomic_store_n(&marks.over, 1, __ATOMIC_RELAXED);
			}
		}
		uint64_t want = n;
		if (n >= MARKS_CAP)
			__atomic_store_n(&marks.over, 1, __ATOMIC_RELAXED);
		if (__atomic_compare_exchange_n(&marks.n, &want, 0, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			marks.done = 0;
			break;
		}
	}
	if (!peak.image_ok || __atomic_exchange_n(&marks.over, 0, __ATOMIC_ACQ_REL)) {
		nb = ha_table_count();
		if (nb > c->cap)
			nb = c->cap;
		for (size_t k = 0; k < nb; k++)
			reread(c, k);
		if (nb > c->n)
			c->n = nb;
		peak.image_ok = 1;
	}
	uint64_t inuse = ha_inuse_of(t);
	clock_gettime(CLOCK_REALTIME, &peak.at);
	peak.at_t[0] = t[0];
	peak.at_t[1] = t[1];
	c->books[0] = t[0];
	c->books[1] = t[0] > inuse ? t[0] - inuse : 0;
	__atomic_store_n(&peak.mark, inuse, __ATOMIC_RELAXED);
	peak.version++;
	return 0;
}

static int take(const uint64_t t[2])
{
	if (__atomic_load_n(&ha_peak_inc, __ATOMIC_RELAXED))
		return take_image(t);
	uint64_t inuse = ha_inuse_of(t);
	for (int tries = 0; tries < 4; tries++) {
		copy *c = peak.spare;
		ha_table_lock();
		size_t n = ha_table_copy(c ? c->v : NULL, c ? c->cap : 0);
		if (c && n <= c->cap) {
			ha_table_unlock();
			c->n = n;
			clock_gettime(CLOCK_REALTIME, &peak.at);
			peak.at_t[0] = t[0];
			peak.at_t[1] = t[1];
			c->books[0] = t[0];
			c->books[1] = t[0] > inuse ? t[0] - inuse : 0;
			peak.spare = peak.cur != peak.writing ? peak.cur : NULL;
			peak.cur = c;
			__atomic_store_n(&peak.mark, inuse, __ATOMIC_RELAXED);
			peak.version++;
			return 0;
		}
		ha_table_unlock();
		/* room for the buckets made meanwhile too */
		size_t cap = n + n / 8 + 64;
		copy *b = ha_raw_malloc(sizeof *b + cap * sizeof b->v[0]);
		if (!b)
			return ENOMEM;
		b->cap = cap;
		if (c)
			ha_raw_free(c);
		peak.spare = b;
	}
	return ENOMEM;
}

void ha_peak_turn(const uint64_t t[2])
{
	uint64_t inuse = ha_inuse_of(t);
	ha_plock_lock(&peak_lock);
	if (peak.live) {
		ha_peak_see(inuse);
		if (peak.first && inuse >= due(peak.step_mark) &&
		    (!peak.cur || inuse > peak.mark) && take(t) == 0)
			__atomic_store_n(&peak.step_mark, inuse, __ATOMIC_RELAXED);
	}
	disarm();
	ha_plock_unlock(&peak_lock);
}

void ha_peak_dump(const uint64_t t[2])
{
	uint64_t inuse = ha_inuse_of(t);
	ha_peak_see(inuse);
	if (!peak.first)
		return;
	ha_plock_lock(&peak_lock);
	if (peak.live && (!peak.cur ? inuse >= peak.first : inuse > peak.mark))
		take(t);
	ha_plock_unlock(&peak_lock);
}

uint64_t ha_peak_bytes(void)
{
	uint64_t b = 0;
	ha_plock_lock(&peak_lock);
	if (peak.cur)
		b += sizeof *peak.cur + peak.cur->cap * sizeof peak.cur->v[0];
	if (peak.spare)
		b += sizeof *peak.spare + peak.spare->cap * sizeof peak.spare->v[0];
	if (peak.writing && peak.writing != peak.cur)
		b += sizeof *peak.writing + peak.writing->cap * sizeof peak.writing->v[0];
	ha_plock_unlock(&peak_lock);
	return b;
}

uint64_t ha_peak_inuse(void)
{
	return peak.cur ? __atomic_load_n(&peak.mark, __ATOMIC_RELAXED) : 0;
}

/* Under ha_prof_dump_lock; the copy is written without peak_lock, so a turn
 * meanwhile fills the other buffer. */
int ha_peak_write(const char *path, const char *pb, int fmt, int64_t r, int *written)
{
	*written = 0;
	ha_plock_lock(&peak_lock);
	copy *c = peak.cur;
	uint64_t version = peak.version;
	if (!c || peak.written == version) {
		ha_plock_unlock(&peak_lock);
		return 0;
	}
	if (__atomic_load_n(&ha_peak_inc, __ATOMIC_RELAXED)) {
		/* the image changes under turns: write a snapshot of it */
		copy *w = peak.spare;
		if (!w || w->cap < c->n) {
			if (w)
				ha_raw_free(w);
			peak.spare = NULL;
			w = ha_raw_malloc(sizeof *w + (c->n + 64) * sizeof w->v[0]);
			if (!w) {
				ha_plock_unlock(&peak_lock);
				return ENOMEM;
			}
			w->cap = c->n + 64;
		}
		memcpy(w->v, c->v, c->n * sizeof c->v[0]);
		w->n = c->n;
		w->books[0] = c->books[0];
		w->books[1] = c->books[1];
		peak.spare = NULL;
		c = w;
	}
	peak.writing = c;
	ha_plock_unlock(&peak_lock);
	/* calibrated to the books at the copy, as a dump is to its own */
	ha_lineset set = { c->v, c->n, 1, { c->books[0], c->books[1] }, 0 };
	int err = 0;
	if (fmt & HA_FORMAT_TEXT) {
		int e = ha_writer_file_from(path, r, &set);
		err = e;
		*written += !e;
	}
	if (fmt & HA_FORMAT_PPROF) {
		int e = ha_pprof_file_from(pb, r, &set);
		err = err ? err : e;
		*written += !e;
	}
	ha_plock_lock(&peak_lock);
	peak.writing = NULL;
	if (c != peak.cur) {             /* replaced while written: a spare again */
		if (!peak.spare)
			peak.spare = c;
		else
			ha_raw_free(c);
	}
	if (!err)
		peak.written = version;
	ha_plock_unlock(&peak_lock);
	return err;
}

/* Under ha_prof_dump_lock (so nothing is being written), never under the
 * table lock. */
void ha_peak_drop(void)
{
	ha_plock_lock(&peak_lock);
	__atomic_store_n(&ha_peak_inc, 0, __ATOMIC_RELEASE);
	peak.image_ok = 0;
	peak.live = 0;
	disarm();
	if (peak.cur)
		ha_raw_free(peak.cur);
	if (peak.spare)
		ha_raw_free(peak.spare);
	peak.cur = peak.spare = peak.writing = NULL;
	__atomic_store_n(&peak.mark, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&peak.step_mark, 0, __ATOMIC_RELAXED);
	peak.version++;
	ha_plock_unlock(&peak_lock);
}

void ha_peak_prefork(void)
{
	ha_plock_lock(&peak_lock);
}

void ha_peak_postfork(int child)
{
	if (child)
		ha_plock_init(&peak_lock);
	else
		ha_plock_unlock(&peak_lock);
}

int ha_peak_taken(uint64_t *version, struct timespec *at, uint64_t t[2])
{
	int fresh = 0;
	ha_plock_lock(&peak_lock);
	if (peak.cur && peak.version != *version) {
		*version = peak.version;
		*at = peak.at;
		t[0] = peak.at_t[0];
		t[1] = peak.at_t[1];
		fresh = 1;
	}
	ha_plock_unlock(&peak_lock);
	return fresh;
}
