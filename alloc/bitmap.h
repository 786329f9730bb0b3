/* alloc/bitmap.h — the huge-block regions' page bitmaps (alloc/huge.c: a
 * busy and a dirty bit per 4 KiB page): set, clear and count a run of bits,
 * count clear bits up to a bound, and find the next bit of a value.  Bit i
 * is bit i & 63 of word i >> 6.
 * Pure functions over caller memory; tests/unit/alloc_units checks them
 * against a bit-at-a-time reference. */
#ifndef HA_ALLOC_BITMAP_H
#define HA_ALLOC_BITMAP_H
#include <stddef.h>
#include <stdint.h>

/* A word's set bits; without -mpopcnt (baseline x86-64) the builtin is a
 * call into libgcc, which the huge allocator's window search paid for every
 * word it counted. */
static inline unsigned ha_popcount64(uint64_t x)
{
#ifdef __POPCNT__
	return (unsigned)__builtin_popcountll(x);
#else
	x -= (x >> 1) & 0x5555555555555555ull;
	x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return (unsigned)((x * 0x0101010101010101ull) >> 56);
#endif
}

/* The mask of bits [i & 63, (i & 63) + k) of word i >> 6, k <= 64 - (i & 63). */
static inline uint64_t ha_bits_mask(size_t i, size_t k)
{
	return (k == 64 ? ~(uint64_t)0 : (((uint64_t)1 << k) - 1)) << (i & 63);
}

/* Bits [i, i + n) set / cleared, a word at a time. */
static inline void ha_bits_set(uint64_t *b, size_t i, size_t n)
{
	for (size_t end = i + n; i < end;) {
		size_t k = 64 - (i & 63) < end - i ? 64 - (i & 63) : end - i;
		b[i >> 6] |= ha_bits_mask(i, k);
		i += k;
	}
}

static inline void ha_bits_clear(uint64_t *b, size_t i, size_t n)
{
	for (size_t end = i + n; i < end;) {
		size_t k = 64 - (i & 63) < end - i ? 64 - (i & 63) : end - i;
		b[i >> 6] &= ~ha_bits_mask(i, k);
		i += k;
	}
}

/* Set bits in [i, i + n). */
static inline size_t ha_bits_count(const uint64_t *b, size_t i, size_t n)
{
	size_t c = 0;
	for (size_t end = i + n; i < end;) {
		size_t k = 64 - (i & 63) < end - i ? 64 - (i & 63) : end - i;
		c += ha_popcount64(b[i >> 6] & ha_bits_mask(i, k));
		i += k;
	}
	return c;
}

/* Clear bits in [i, i + n), counted only until they pass `limit`: the
 * result is exact when <= limit, else some value > limit.  The window
 * search stops a candidate once it is worse than the best so far. */
static inline size_t ha_bits_count_clear_upto(const uint64_t *b, size_t i, size_t n, size_t limit)
{
	size_t c = 0;
	for (size_t end = i + n; i < end && c <= limit;) {
		size_t k = 64 - (i & 63) < end - i ? 64 - (i & 63) : end - i;
		c += ha_popcount64(~b[i >> 6] & ha_bits_mask(i, k));
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
