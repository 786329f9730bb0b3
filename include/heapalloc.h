/* heapalloc.h — the public API of heapalloc.
 *
 * heapalloc replaces the whole malloc family (and every C++ operator new/delete)
 * of the program it is linked into or preloaded into; nothing here is needed for
 * that.  This header adds heapalloc's own statistics and profiler control, and
 * declares the gperftools heap-profiler API (<gperftools/heap-profiler.h>) that
 * heapalloc implements, so programs written for gperftools link unchanged.
 */
#ifndef HEAPALLOC_H
#define HEAPALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define HEAPALLOC_API __attribute__((visibility("default")))
#else
#define HEAPALLOC_API
#endif

/* Allocator statistics: a consistent-enough snapshot, cheap to take. */
typedef struct heapalloc_stats {
	uint64_t mallocs;          /* slow-path refills+large allocations seen (grows with use) */
	uint64_t small_spans;      /* spans currently held for small size classes */
	uint64_t small_span_bytes; /* bytes in those spans */
	uint64_t small_free_bytes; /* bytes free inside spans (central lists + thread caches) */
	uint64_t large_blocks;     /* blocks > HEAPALLOC_SMALL_MAX currently allocated */
	uint64_t large_bytes;      /* their usable bytes */
	uint64_t thread_caches;    /* live thread caches */
	uint64_t thread_cache_bytes; /* bytes parked in thread caches */
	uint64_t metadata_bytes;   /* heapalloc's own bookkeeping (span records, page map) */
	/* profiler (all zero while it has never run) */
	uint64_t prof_alloc_bytes; /* exact requested bytes allocated while profiling */
	uint64_t prof_free_bytes;  /* exact requested bytes freed while profiling */
	uint64_t prof_samples;     /* sampled allocations recorded */
	uint64_t prof_buckets;     /* stack-table buckets in use */
	uint64_t prof_memory;      /* bytes the profiler itself holds */
	uint64_t prof_dumps;       /* profiles written */
	/* the highest in-use total (prof_alloc_bytes - prof_free_bytes) seen
	 * since profiling started: read at every dump, every threshold check and
	 * every heapalloc_get_stats, so it may trail a peak that came and went
	 * between two of those by less than HEAP_PROFILE_PEAK_INTERVAL (exact
	 * with HEAP_PROFILE_PEAK_INTERVAL=1) */
	uint64_t prof_peak_inuse;
	/* threshold dumps the profiler's helper thread has still to write (0,
	 * 1, or 2 when one is being written and the next is queued); a crossing
	 * while one is queued folds into it, so a program (a test) that waits
	 * for 0 after each allocation gets one dump per crossing */
	uint64_t prof_dumps_queued;
	/* sampling that runs, with no profiling session, because a tracer is
	 * attached to the otel_memory:alloc USDT probe (1 while it runs), and
	 * the allocations it has sampled (each fired at the probe while the
	 * tracer stays attached) */
	uint64_t prof_probe_sampling;
	uint64_t prof_probe_samples;
} heapalloc_stats;

/* Largest request served from size-class spans; larger ones are "large". */
#define HEAPALLOC_SMALL_MAX 32768

/* The struct only grows at its end, and the caller owns it: a program
 * built against a shorter one must not be written past its end.  So
 * heapalloc_get_stats fills the fields up to prof_dumps (the struct as
 * first published) and heapalloc_get_stats_size fills the first size bytes;
 * the macro has every program built against this header call the latter
 * with its own struct's size. */
HEAPALLOC_API void heapalloc_get_stats(heapalloc_stats *out);
HEAPALLOC_API void heapalloc_get_stats_size(heapalloc_stats *out, size_t size);
#define heapalloc_get_stats(out) heapalloc_get_stats_size((out), sizeof *(out))
/* The version string, e.g. "0.1.0". */
HEAPALLOC_API const char *heapalloc_version(void);

/* Profiler control.  prefix as for HEAPPROFILE; returns 0 or an errno value. */
HEAPALLOC_API int heapalloc_profile_start(const char *prefix);
HEAPALLOC_API void heapalloc_profile_stop(void);
/* Write the next numbered profile now; reason goes into the stderr line. */
HEAPALLOC_API int heapalloc_profile_dump(const char *reason);
HEAPALLOC_API int heapalloc_profile_running(void);
/* The profile now as gzipped profile.proto: the bytes a PREFIX.NNNN.pb.gz
 * dump holds (sample types alloc_objects, alloc_space, inuse_objects,
 * inuse_space, default inuse_space; period = the sampling interval;
 * mappings with build IDs), for `go tool pprof` or an HTTP handler.  On 0,
 * *buf (free it with free()) holds *len bytes; otherwise *buf is NULL and
 * the result is ENOENT (the profiler is not running), ENOMEM, or EINVAL
 * (buf or len NULL).  Writes no file and does not count as a dump. */
HEAPALLOC_API int heapalloc_profile_pprof(void **buf, size_t *len);

/* The gperftools heap-profiler API, same names and behaviour. */
HEAPALLOC_API void HeapProfilerStart(const char *prefix);
HEAPALLOC_API void HeapProfilerStop(void);
HEAPALLOC_API void HeapProfilerDump(const char *reason);
HEAPALLOC_API int IsHeapProfilerRunning(void);
HEAPALLOC_API char *GetHeapProfile(void);

#ifdef __cplusplus
}
#endif
#endif
