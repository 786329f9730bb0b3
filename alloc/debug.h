/* alloc/debug.h — HA_ASSERT, internal assertions checked in debug builds.
 *
 * configure --enable-debug puts -DHA_DEBUG=1 on every compile line; then a
 * false HA_ASSERT(cond) writes one line to stderr,
 *     heapalloc: assertion failed: COND at FILE:LINE
 * and abort()s.  The line is one string literal built by the preprocessor
 * and sent with a single write(2): it never allocates and takes no lock, so
 * it is safe inside allocator paths, signal handlers and after fork.
 * Otherwise HA_ASSERT compiles to nothing, yet its expression is still
 * type-checked (sizeof never evaluates it), so assertions cannot rot.
 * Code that must branch on the build uses `if (HA_DEBUG)` (always 0 or 1),
 * which keeps both branches compiling.
 * Self-contained: needs neither config.h nor alloc/internal.h.
 */
#ifndef HA_DEBUG_H
#define HA_DEBUG_H

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#ifndef HA_DEBUG
#define HA_DEBUG 0
#endif

#define HA_DEBUG_STR2(x) #x
#define HA_DEBUG_STR(x) HA_DEBUG_STR2(x)

#if HA_DEBUG
/* out of line and cold: the check at each site is one compare and branch */
__attribute__((noreturn, cold, noinline, unused))
static void ha_assert_fail(const char *line, size_t len)
{
	while (len > 0) {
		ssize_t n = write(2, line, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		line += n;
		len -= (size_t)n;
	}
	abort();
}

#define HA_ASSERT(cond) \
	(__builtin_expect(!!(cond), 1) ? (void)0 : ha_assert_fail( \
		"heapalloc: assertion failed: " #cond " at " __FILE__ ":" HA_DEBUG_STR(__LINE__) "\n", \
		sizeof("heapalloc: assertion failed: " #cond " at " __FILE__ ":" HA_DEBUG_STR(__LINE__) "\n") - 1))
#else
#define HA_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

#endif
