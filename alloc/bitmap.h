/* alloc/bitmap.h — the huge-block regions' page bitmaps (alloc/huge.c: a
 * busy and a dirty bit per 4 KiB page): set, clear and count a run of bits,
 * and find the next bit of a value.  Bit i is bit i & 63 of word i >> 6.
 * Pure functions over caller memory; tests/unit/alloc_units checks them
 * against a bit-at-a-time reference. */
#ifndef HA_ALLOC_BITMAP_H
#define HA_ALLOC_BITMAP_H
#include <stddef.h>
#include <stdint.h>

/* Bits [i, i + n) set / cleared / counted. */
static inline void ha_bits_set(uint64_t *b, size_t i, size_t n)
{
	for (size_t end = i + n; i < end;) {
		size_t k = 64 - (i & 63) < end - i ? 64 - (i & 63) : end - i;
		b[i >> 6] |= (k == 64 ? ~(uint64_t)0 : (((uint64_t)1 << k) - 1)) << (i & 63);
		i += k;
	}
}

static inline void ha_bits_clear(uint64_t *b, size_t i, size_t n)
{
	for (size_t end = i + n; i < end;) {
		size_t k = 64 - (i & 63) < end - i ? 64 - (i & 63) : end - i;
		b[i >> 6] &= ~((k == 64 ? ~(uint64_t)0 : (((uint64_t)1 << k) - 1)) << (i & 63));
		i += k;
	}
}

static inline size_t ha_bits_count(const uint64_t *b, size_t i, size_t n)
{
	size_t c = 0;
	for (size_t end = i + n; i < end;) {
		size_t k = 64 - (i & 63) < end - i ? 64 - (i & 63) : end - i;
		uint64_t m = (k == 64 ? ~(uint64_t)0 : (((uint64_t)1 << k) - 1)) << (i & 63);
		c += (size_t)__builtin_popcountll(b[i >> 6] & m);
		i += k;
	}
	return c;
}

/* First index in [i, end) whose bit is `want`, else end. */
static inline size_t ha_bits_next(const uint64_t *b, size_t i, size_t end, int want)
{
	while (i < end) {
		uint64_t w = want ? b[i >> 6] : ~b[i >> 6];
		w &= ~(uint64_t)0 << (i & 63);
		if (w) {
			size_t r = (i & ~(size_t)63) + (size_t)__builtin_ctzll(w);
			return r < end ? r : end;
		}
		i = (i | 63) + 1;
	}
	return end;
}

#endif
