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
/* A file's static that its unit test reaches: static in the library,
 * hidden but linkable in the unit tier's build of the file (-DHA_TESTING,
 * tests/unit/unit.am), which declares it in prof/unit.h. */
#ifdef HA_TESTING
#define HA_TESTABLE HA_HIDDEN
#else
#define HA_TESTABLE static
#endif

#endif
