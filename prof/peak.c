/* prof/peak.c — the profile as it stood when the heap was fullest.
 *
 * A copy of the stack table's counters (ha_table_snapshot) is taken each
 * time the books' in-use total reaches the last copy's plus the interval
 * (HEAP_PROFILE_PEAK_INTERVAL), so the copy trails the true peak by less
 * than one interval; a copy costs one pass over the buckets, far less than
 * the interval's allocations.  Checked where the
 * thresholds are (never on the fast path); written as PREFIX.peak.heap
 * with the dumps, only when it changed since the last write.  The buckets
 * it points to live until the table is destroyed, which drops it first.
 * Everything here runs under ha_prof_dump_lock, but the in-use high
 * (ha_peak_see), which the lock-free threshold checks raise too.
 */
#include "prof/prof.h"

static struct {
	int64_t interval;         /* 0: off */
	uint64_t mark;            /* in use at the copy */
	ha_line *lines;           /* raw memory */
	size_t n;
	uint64_t version, written;
	uint64_t high;            /* highest in use seen (atomic); kept past a stop */
} K;

void ha_peak_reset(int64_t interval)
{
	ha_peak_drop();
	K.interval = interval > 0 ? interval : 0;
	K.mark = 0;
	K.version = K.written = 0;
	__atomic_store_n(&K.high, 0, __ATOMIC_RELAXED);
}

void ha_peak_see(uint64_t inuse)
{
	uint64_t h = __atomic_load_n(&K.high, __ATOMIC_RELAXED);
	while (inuse > h &&
	       !__atomic_compare_exchange_n(&K.high, &h, inuse, 1, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
}

uint64_t ha_peak_high(void)
{
	return __atomic_load_n(&K.high, __ATOMIC_RELAXED);
}

/* Allocation bytes after which the copy is due (thresholds' convention:
 * the check fires once more than this has been allocated). */
int64_t ha_peak_room(uint64_t inuse)
{
	if (!K.interval)
		return INT64_MAX;
	uint64_t due = K.mark + (uint64_t)K.interval;
	return due > inuse ? (int64_t)(due - inuse) - 1 : 0;
}

void ha_peak_check(uint64_t inuse)
{
	ha_peak_see(inuse);
	if (!K.interval || inuse < K.mark + (uint64_t)K.interval)
		return;
	size_t n = 0;
	ha_table_lock();
	ha_line *lines = ha_table_snapshot(&n);
	ha_table_unlock();
	if (!lines)
		return;               /* no memory: keep the older copy */
	if (K.lines)
		ha_dump_mem_free(K.lines);
	K.lines = lines;
	K.n = n;
	K.mark = inuse;
	K.version++;
}

uint64_t ha_peak_bytes(void)
{
	return K.lines ? (uint64_t)K.n * sizeof *K.lines : 0;
}

uint64_t ha_peak_inuse(void)
{
	return K.lines ? K.mark : 0;
}

int ha_peak_write(const char *path, const char *pb, int fmt, int64_t r, int *written)
{
	*written = 0;
	if (!K.lines || K.written == K.version)
		return 0;
	ha_lineset set = { .v = K.lines, .n = K.n };   /* no books: written raw */
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
	if (!err)
		K.written = K.version;
	return err;
}

void ha_peak_drop(void)
{
	if (K.lines)
		ha_dump_mem_free(K.lines);
	K.lines = NULL;
	K.n = 0;
	K.mark = 0;
	K.version++;
}
