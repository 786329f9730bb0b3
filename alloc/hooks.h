/* alloc/hooks.h — the only calls the allocator makes into the profiler.
 *
 * The allocator never includes dump/; dump/ implements these.  They are
 * called only from allocator slow paths, with no allocator lock held.
 *
 * Contract of the profiling path (ha_prof_active != 0):
 *   - every allocation subtracts its requested size from ha_tc.sample_left
 *     and adds it to ha_tc.prof_alloc_bytes/count; when sample_left drops
 *     below zero the allocator calls ha_prof_on_alloc() after the block is
 *     ready (its size recorded), and stores the returned countdown;
 *   - if ha_prof_on_alloc() sets *sampled, the allocator marks the block and
 *     calls ha_prof_on_free() when it is freed (or realloc'ed away), before
 *     the memory is reused; unsampled frees never call the profiler;
 *   - frees of blocks allocated while profiling add their requested size to
 *     the thread's record (exact); small blocks keep their size in a
 *     16-byte header before the program's pointer (alloc/entry.c), large
 *     and huge ones in their block header.
 * The profiler must not call malloc through the public entry points while it
 * holds one of its own locks; it uses ha_raw_malloc/ha_raw_free.
 */
#ifndef HA_ALLOC_HOOKS_H
#define HA_ALLOC_HOOKS_H
#include <stddef.h>
#include <stdint.h>

/* A countdown expired (went below 0, or a 0-byte request met a countdown
 * of 0).  p: the new block, req: requested bytes; ha_tc.sample_left still
 * holds the value from before this allocation.  Returns the next countdown
 * in bytes (>= 0; 0 marks the next byte).  A new thread starts at 0. */
int64_t ha_prof_on_alloc(void *p, size_t req, int *sampled);
/* A sampled block is being freed; req is its requested size. */
void ha_prof_on_free(void *p, size_t req);
/* fork: take / release every profiler lock; child also renames itself. */
void ha_prof_prefork(void);
void ha_prof_postfork(int child);

#endif
