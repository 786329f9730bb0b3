/* alloc/log.h — stderr messages and formatting that never allocate
 * (alloc/log.c): safe inside allocator paths, the profiler and after fork. */
#ifndef HA_ALLOC_LOG_H
#define HA_ALLOC_LOG_H
#include <stddef.h>

/* printf subset: %s %d %i %u %ld %lu %lld %llu %zu %zd %x %lx %p %c %%. */
void ha_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int ha_snprintf(char *buf, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
__attribute__((noreturn)) void ha_fatal(const char *what, const void *p);

#endif
