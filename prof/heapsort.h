/* prof/heapsort.h — an in-place heap sort for the profiler's arrays that
 * are sorted where nothing may allocate (a dump under the profiler's
 * locks, the leak scan inside the process at exit): glibc's qsort may
 * malloc a buffer.  O(n log n), no recursion, elements of up to 64 bytes.
 * before(x, y): x sorts before y. */
#ifndef HA_PROF_HEAPSORT_H
#define HA_PROF_HEAPSORT_H
#include <stddef.h>
#include <string.h>

static inline void ha_hs_swap(char *a, char *b, size_t size)
{
	char t[64];
	memcpy(t, a, size);
	memcpy(a, b, size);
	memcpy(b, t, size);
}

static inline void ha_hs_sift(char *v, size_t i, size_t n, size_t size,
			      int (*before)(const void *, const void *))
{
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			return;
		if (c + 1 < n && before(v + c * size, v + (c + 1) * size))
			c++;
		if (!before(v + i * size, v + c * size))
			return;
		ha_hs_swap(v + i * size, v + c * size, size);
		i = c;
	}
}

static inline void ha_heapsort(void *base, size_t n, size_t size,
			       int (*before)(const void *, const void *))
{
	char *v = base;
	for (size_t i = n / 2; i-- > 0;)
		ha_hs_sift(v, i, n, size, before);
	for (size_t k = n; k-- > 1;) {
		ha_hs_swap(v, v + k * size, size);
		ha_hs_sift(v, 0, k, size, before);
	}
}

#endif
