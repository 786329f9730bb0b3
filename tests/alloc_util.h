/* tests/alloc_util.h — helpers shared by the alloc_* tests: a position- and
 * seed-dependent byte pattern (a block copied to the wrong offset, or two
 * blocks overlapping, cannot verify), and the process's resident set size. */
#ifndef HA_TESTS_ALLOC_UTIL_H
#define HA_TESTS_ALLOC_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline unsigned char pat_byte(uint32_t seed, size_t i)
{
	uint32_t h = seed * 0x9E3779B1u + (uint32_t)i + (uint32_t)(i >> 32);
	h ^= h >> 15;
	h *= 0x85EBCA77u;
	return (unsigned char)(h ^ (h >> 13));
}

static inline void pat_fill(void *p, size_t n, uint32_t seed)
{
	unsigned char *c = (unsigned char *)p;
	for (size_t i = 0; i < n; i++)
		c[i] = pat_byte(seed, i);
}

/* Index of the first byte that differs from the pattern, or (size_t)-1. */
static inline size_t pat_check(const void *p, size_t n, uint32_t seed)
{
	const unsigned char *c = (const unsigned char *)p;
	for (size_t i = 0; i < n; i++)
		if (c[i] != pat_byte(seed, i))
			return i;
	return (size_t)-1;
}

/* Index of the first non-zero byte, or (size_t)-1. */
static inline size_t zero_check(const void *p, size_t n)
{
	const unsigned char *c = (const unsigned char *)p;
	for (size_t i = 0; i < n; i++)
		if (c[i])
			return i;
	return (size_t)-1;
}

/* VmRSS in KiB, or -1. */
static inline long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "VmRSS:", 6)) {
			kib = atol(line + 6);
			break;
		}
	fclose(f);
	return kib;
}
#endif
