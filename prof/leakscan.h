/* prof/leakscan.h — the conservative mark of a leak scan (prof/output/leakscan.c),
 * shared by `heapalloc leaks PID`'s scanner (tools/leakscan.c, from outside)
 * and the at-exit check (prof/output/leaks.c, in the process).  Standalone: only
 * <stdint.h> and <stddef.h>. */
#ifndef HA_PROF_LEAKSCAN_H
#define HA_PROF_LEAKSCAN_H
#include <stddef.h>
#include <stdint.h>

#define HA_LEAK_CHUNK ((size_t)4 << 20)      /* bytes read at a time */
#define HA_LEAK_THREADS 4096                  /* stack pointers kept at most */

typedef struct ha_leak_block {
	uint64_t lo, hi;          /* [lo, hi): a pointer anywhere in it reaches it */
	uint32_t line;            /* the caller's number for it */
	uint32_t marked;          /* reached (out) */
} ha_leak_block;

typedef struct ha_leak_range {
	uint64_t lo, hi;
} ha_leak_range;

typedef struct ha_leak_scan {
	ha_leak_block *b;         /* the candidates, sorted by ha_leak_run */
	size_t n;
	uint32_t *work;           /* room for n indices */
	unsigned char *chunk;     /* HA_LEAK_CHUNK + 8 bytes */
	const uint64_t *roots;    /* values that count as pointers (registers) */
	size_t nroots;
	const uint64_t *sps;      /* known stack pointers: a stack is read from one up */
	int nsps;
	int blocked;              /* also the SP of each thread blocked in a system call */
	ha_leak_range *skips;     /* never read: the allocator's own records (their
				   * stale slots hold handed-out blocks' addresses),
				   * the in-process caller's own memory and the
				   * allocator's free memory; sorted and
				   * merged in place by ha_leak_run */
	size_t nskips;
	uint64_t bytes;           /* out: bytes read */
} ha_leak_scan;

/* Mark every candidate a pointer reaches in process pid's readable and
 * writable memory, read through memfd (its /proc/PID/mem; a process may
 * read its own).  0, or an errno when its maps cannot be read.  Never
 * allocates. */
int ha_leak_run(ha_leak_scan *s, int pid, int memfd);

#endif
