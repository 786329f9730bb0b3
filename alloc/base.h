/* alloc/base.h — the compiler attributes every heapalloc file uses.
 * Included by the allocator and the profiler alike; declares nothing else. */
#ifndef HA_ALLOC_BASE_H
#define HA_ALLOC_BASE_H

#define HA_HIDDEN __attribute__((visibility("hidden")))
#define HA_EXPORT __attribute__((visibility("default")))
#define HA_LIKELY(x) __builtin_expect(!!(x), 1)
#define HA_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HA_NOINLINE __attribute__((noinline))
#define HA_COLD __attribute__((cold, noinline))
/* initial-exec: a TLS access is one load off %fs, never a call into the
 * loader (which may allocate) */
#define HA_TLS __thread __attribute__((tls_model("initial-exec")))

#endif
