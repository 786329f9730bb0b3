/* prof/session/api.c — heapalloc's public profiler/statistics API and the
 * gperftools heap-profiler API (<gperftools/heap-profiler.h>).
 *
 * Thin wrappers over session.c, dump.c and pprof_named.c.  GetHeapProfile and heapalloc_profile_pprof
 * are the places that return memory from the public malloc (the caller frees
 * it): the profile is built in raw memory under ha_prof_dump_lock, then
 * copied with no profiler lock held.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "prof/prof.h"
#include "heapalloc.h"

#include "config.h"

HA_EXPORT const char *heapalloc_version(void)
{
	return PACKAGE_VERSION;
}

static void fill_stats(heapalloc_stats *out)
{
	memset(out, 0, sizeof *out);
	ha_alloc_stats(out);           /* the allocator's half (alloc/entry.c) */
	uint64_t t[2];
	ha_prof_totals(t);
	out->prof_alloc_bytes = t[0];
	out->prof_free_bytes = t[1];
	out->prof_samples = ha_prof_samples();
	uint64_t buckets, tmem, drops, objs, omem;
	ha_table_stats(&buckets, &tmem, &drops);
	ha_objmap_stats(&objs, &omem);
	out->prof_buckets = buckets;
	out->prof_memory = tmem + omem + ha_frame_memory();
	out->prof_dumps = ha_prof_dumps();
	if (ha_prof_running())
		ha_peak_see(t[0] - t[1]);
	out->prof_peak_inuse = ha_peak_high();
	out->prof_dumps_queued = ha_prof_queued();
	out->prof_probe_sampling = (uint64_t)ha_usdt_sampling();
	out->prof_probe_samples = ha_usdt_samples();
}

HA_EXPORT void heapalloc_get_stats_size(heapalloc_stats *out, size_t size)
{
	heapalloc_stats st;
	fill_stats(&st);
	memcpy(out, &st, size < sizeof st ? size : sizeof st);
}

/* the first published struct ended at prof_dumps */
HA_EXPORT void (heapalloc_get_stats)(heapalloc_stats *out)
{
	heapalloc_get_stats_size(out, offsetof(heapalloc_stats, prof_peak_inuse));
}

HA_EXPORT int heapalloc_profile_start(const char *prefix)
{
	return ha_prof_start(prefix, 0);
}

/* A stop ends what a start (or HEAPPROFILE, or the endpoint) began, and
 * the always-on sampling takes over again; the always-on sampling itself
 * is not stopped by the API (HEAP_PROFILE_SAMPLE_INTERVAL=0 is its switch). */
static void stop(void)
{
	if (!ha_prof_running_api())
		return;
	ha_prof_stop();
	ha_prof_background();
}

HA_EXPORT void heapalloc_profile_stop(void)
{
	stop();
}

HA_EXPORT int heapalloc_profile_dump(const char *reason)
{
	return ha_prof_dump(reason, 0);
}

HA_EXPORT int heapalloc_profile_running(void)
{
	return ha_prof_running_api();
}

HA_EXPORT void HeapProfilerStart(const char *prefix)
{
	ha_prof_start(prefix, 0);
}

HA_EXPORT void HeapProfilerStop(void)
{
	stop();
}

HA_EXPORT void HeapProfilerDump(const char *reason)
{
	ha_prof_dump(reason, 0);
}

HA_EXPORT int IsHeapProfilerRunning(void)
{
	return ha_prof_running_api();
}

HA_EXPORT char *GetHeapProfile(void)
{
	ha_out o = { NULL, 0, 0, -1, 0 };
	int busy = ha_prof_busy;
	ha_prof_busy = 1;
	ha_lock(&ha_prof_dump_lock);
	if (ha_prof_running_api())     /* the always-on sampling: read from outside */
		ha_writer_profile(&o, ha_prof_rate());
	ha_unlock(&ha_prof_dump_lock);
	ha_prof_busy = busy;
	char *s = malloc(o.len + 1);  /* public malloc: no profiler lock held */
	if (s) {
		if (o.len)
			memcpy(s, o.buf, o.len);
		s[o.len] = 0;
	}
	if (o.buf)
		ha_raw_free(o.buf);
	return s;
}

HA_EXPORT int heapalloc_profile_pprof(void **buf, size_t *len)
{
	if (!buf || !len)
		return EINVAL;
	*buf = NULL;
	*len = 0;
	if (!ha_prof_running_api())
		return ENOENT;            /* the always-on sampling: read from outside */
	ha_out gz = { NULL, 0, 0, -1, 0 };
	int busy = ha_prof_busy;
	ha_prof_busy = 1;
	int err = ha_pprof_mem_named(&gz, ha_prof_rate(), NULL, NULL);
	ha_prof_busy = busy;
	if (!err) {
		void *p = malloc(gz.len);  /* public malloc: no profiler lock held */
		if (p) {
			memcpy(p, gz.buf, gz.len);
			*buf = p;
			*len = gz.len;
		} else {
			err = ENOMEM;
		}
	}
	if (gz.buf)
		ha_raw_free(gz.buf);
	return err;
}
