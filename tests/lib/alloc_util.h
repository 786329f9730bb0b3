/* tests/lib/alloc_util.h — helpers shared by the alloc_* tests: a position- and
 * seed-dependent byte pattern (a block copied to the wrong offset, or two
 * blocks overlapping, cannot verify), and the process's resident set size. */
#ifndef HA_TESTS_ALLOC_UTIL_H
#define HA_TESTS_ALLOC_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include "heapalloc.h"

/* Top byte of a Weyl sequence: depends on the position (no short period) and
 * on the seed; cheap enough for the compiler to vectorise. */
static inline unsigned char pat_byte(uint32_t seed, size_t i)
{
	return (unsigned char)(((uint32_t)i * 0x9E3779B1u + seed * 0x85EBCA77u + (uint32_t)(i >> 32)) >> 24);
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
	for (size_t at = 0; at < n; at += 4096) {
		size_t end = n - at < 4096 ? n : at + 4096;
		unsigned char diff = 0;
		for (size_t i = at; i < end; i++) /* branch-free: vectorises */
			diff |= (unsigned char)(c[i] ^ pat_byte(seed, i));
		if (diff)
			for (size_t i = at; i < end; i++)
				if (c[i] != pat_byte(seed, i))
					return i;
	}
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

/* A number field of /proc/self/status ("VmRSS:", "Threads:"), or -1. */
static inline long proc_status(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	size_t n = strlen(key);
	long v = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, key, n)) {
			v = atol(line + n);
			break;
		}
	fclose(f);
	return v;
}

/* VmRSS in KiB, or -1. */
static inline long rss_kib(void)
{
	return proc_status("VmRSS:");
}

/* Threads of this process, or -1. */
static inline long threads_now(void)
{
	return proc_status("Threads:");
}

/* The heap's own footprint in KiB, from heapalloc_get_stats (looked up, so
 * that a test still runs under another allocator): small spans held, large
 * blocks, heapalloc's metadata; -1 without heapalloc.  Under qemu-user,
 * where VmRSS holds the emulator's memory too (translated code, and state
 * for every thread it has run), the tests measure this instead. */
static inline long heap_footprint_kib(void)
{
	static void (*stats)(heapalloc_stats *);
	if (!stats)
		stats = (void (*)(heapalloc_stats *))dlsym(RTLD_DEFAULT, "heapalloc_get_stats");
	if (!stats)
		return -1;
	heapalloc_stats s;
	stats(&s);
	return (long)((s.small_span_bytes + s.large_bytes + s.metadata_bytes) / 1024);
}
#endif
