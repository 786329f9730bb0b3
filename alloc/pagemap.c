/* alloc/pagemap.c — page number -> span record and free's entry (the
 * span's class and first object), for any pointer, in O(1).
 *
 * Two levels over the 48-bit address space with 4 KiB pages: a 2^22-entry
 * root (32 MiB of BSS, one touched page per 32 GiB in use) of 2^14-entry
 * leaves (2 x 128 KiB each, from meta.c, one per 64 MiB of address space
 * that holds spans).  free's fast path reads the entry, not the span: the
 * class names its block-start check and its list (ha_pm.cl), so a remote
 * free waits for one line of the map, not for the map and then the span
 * record (google/tcmalloc's page map holds the size class for the same
 * reason).  A root entry is its leaf's distance from ha_pm.none, a
 * leaf of zeros that is never written (reads of it find the zero page),
 * and a leaf entry its span's distance from ha_pm.nospan, a span of zeros
 * that no pointer is a plain block of: a page without a span, or without
 * a leaf, reads 0 and so nospan, and free's lookup needs no branch.  Leaves are never freed (readers take no
 * lock), so they are kept small: as mimalloc's mappings drift over a long
 * run, each new 64 MiB region costs 256 KiB, not 4 MiB.
 * Readers never lock: a leaf, once published, stays; entries are written
 * before the span's objects are handed out and cleared only after every
 * object of the span is back.  Large blocks from mimalloc have no entry
 * (NULL), which is how free() tells them apart.
 * A leaf's part (512 pages: 2 MiB of address, a page of each array) goes
 * back to the kernel at the decay step (ha_pagemap_decay) that finds no
 * span naming a page of it: a reader then finds zeros, which is "no span",
 * what it held.  Writers count themselves in (users) before writing and the
 * give-back claims a part at users 0, so no entry written is lost to it.
 */
#include "alloc/internal.h"
#include "alloc/debug.h"
#include <errno.h>
#include <sched.h>
#include <stddef.h>

ha_pagemap ha_pm;
static pthread_mutex_t leaf_lock = PTHREAD_MUTEX_INITIALIZER;
static ha_pmleaf *leaves;      /* every leaf, under leaf_lock */
static int leaves_idle;        /* a leaf's users fell to 0 (atomic) */
#define HA_PM_DISCARDING 0x80000000u

_Static_assert(sizeof(ha_pent) == sizeof(uintptr_t), "one index for both arrays of a leaf");
_Static_assert(sizeof(ha_pmclass) == 1u << HA_TL_SHIFT, "a page's coff indexes ha_pm.cl too");

static ha_pmleaf *leaf_at(intptr_t off)
{
	return (ha_pmleaf *)((uintptr_t)ha_pm.none.span + (uintptr_t)off * sizeof(uintptr_t));
}

void ha_pagemap_init(void)
{
	for (unsigned c = 1; c < HA_NCLASSES; c++) {
		ha_pm.cl[c].inv = (uint32_t)ha_class_inv[c];
		ha_pm.cl[c].ror = ha_class_ror[c];
		ha_pm.cl[c].lim = ha_class_span_bytes[c] / ha_class_size[c];
	}
}

static ha_pmleaf *leaf_for(uintptr_t pg)
{
	size_t r = pg >> HA_PM_LEAF_BITS;
	intptr_t off = __atomic_load_n(&ha_pm.root[r], __ATOMIC_ACQUIRE);
	if (off)
		return leaf_at(off);
	ha_lock(&leaf_lock);
	off = ha_pm.root[r];
	if (!off) {
		/* page-aligned, so that each part's pages are its own */
		char *raw = ha_meta_alloc(sizeof(ha_pmleaf) + HA_PAGE_SIZE);
		ha_pmleaf *leaf = raw ? (ha_pmleaf *)(((uintptr_t)raw + HA_PAGE_SIZE - 1) & ~(HA_PAGE_SIZE - 1)) : NULL;
		if (leaf) {
			leaf->next = leaves;
			leaves = leaf;
			/* leaves are word-aligned: the distance is whole entries */
			off = (intptr_t)((uintptr_t)leaf - (uintptr_t)ha_pm.none.span) /
			      (intptr_t)sizeof(uintptr_t);
			__atomic_store_n(&ha_pm.root[r], off, __ATOMIC_RELEASE);
		}
	}
	ha_unlock(&leaf_lock);
	return off ? leaf_at(off) : NULL;
}

/* A writer counts itself into part k of leaf l, waiting while its pages
 * are being given back (a madvise of two pages). */
static void part_enter(ha_pmleaf *l, unsigned k)
{
	uint32_t u = __atomic_load_n(&l->users[k], __ATOMIC_ACQUIRE);
	for (;;) {
		if (HA_UNLIKELY(u & HA_PM_DISCARDING)) {
			sched_yield();
			u = __atomic_load_n(&l->users[k], __ATOMIC_ACQUIRE);
			continue;
		}
		if (__atomic_compare_exchange_n(&l->users[k], &u, u + 1, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			break;
	}
	if (!(__atomic_load_n(&l->dirty, __ATOMIC_RELAXED) & (1u << k)))
		__atomic_fetch_or(&l->dirty, 1u << k, __ATOMIC_RELAXED);
}

static void part_leave(ha_pmleaf *l, unsigned k)
{
	/* the flag's line is every thread's: written only when it changes */
	if (__atomic_sub_fetch(&l->users[k], 1, __ATOMIC_RELEASE) == 0 &&
	    !__atomic_load_n(&leaves_idle, __ATOMIC_RELAXED))
		__atomic_store_n(&leaves_idle, 1, __ATOMIC_RELEASE);
}

/* The pages [pg, end] name s (NULL: nothing), part by part: a span counts
 * as a user of every part it has a page in, from its set to its clear. */
int ha_pagemap_set(uintptr_t start, size_t bytes, ha_span *s)
{
	HA_ASSERT(bytes > 0 && (start & (HA_PAGE_SIZE - 1)) == 0);
	uintptr_t pg = start >> HA_PAGE_SHIFT, end = (start + bytes - 1) >> HA_PAGE_SHIFT;
	const uintptr_t part_mask = ((uintptr_t)1 << HA_PM_PART_BITS) - 1;
	if (end >> (HA_PM_ROOT_BITS + HA_PM_LEAF_BITS))
		return ENOMEM;
	if (s)   /* every leaf first: a failure leaves nothing half set */
		for (uintptr_t q = pg; q <= end; q = (q | HA_PM_LEAF_MASK) + 1)
			if (!leaf_for(q))
				return ENOMEM;
	uint32_t base_lo = s ? (uint32_t)s->base : 0;
	uint32_t coff = s && s->plain_max ? s->cls << HA_TL_SHIFT : 0;
	while (pg <= end) {
		ha_pmleaf *leaf = leaf_for(pg);
		uintptr_t last = (pg | part_mask) < end ? (pg | part_mask) : end;
		unsigned k = (unsigned)((pg & HA_PM_LEAF_MASK) >> HA_PM_PART_BITS);
		if (HA_UNLIKELY(!leaf))
			return ENOMEM;   /* clearing pages no span was ever set on */
		if (s)
			part_enter(leaf, k);
		for (; pg <= last; pg++) {
			ha_pent *e = &leaf->ent[pg & HA_PM_LEAF_MASK];
			__atomic_store_n(&e->base_lo, base_lo, __ATOMIC_RELAXED);
			__atomic_store_n(&e->coff, coff, __ATOMIC_RELEASE);
			__atomic_store_n(&leaf->span[pg & HA_PM_LEAF_MASK],
					 s ? (uintptr_t)s - (uintptr_t)&ha_pm.nospan : 0, __ATOMIC_RELEASE);
			/* the lock-free reader sees what was stored, on every page */
			HA_ASSERT(ha_pagemap_get((const void *)(pg << HA_PAGE_SHIFT)) == s);
		}
		if (!s)
			part_leave(leaf, k);
	}
	return 0;
}

int ha_pagemap_decay(uint32_t now)
{
	(void)now;
	if (!__atomic_load_n(&leaves_idle, __ATOMIC_ACQUIRE))
		return 0;
	__atomic_store_n(&leaves_idle, 0, __ATOMIC_RELAXED);
	const size_t n = (size_t)1 << HA_PM_PART_BITS;
	ha_lock(&leaf_lock);
	for (ha_pmleaf *l = leaves; l; l = l->next)
		for (unsigned k = 0; k < HA_PM_PARTS; k++) {
			uint32_t u = 0;
			if (!(__atomic_load_n(&l->dirty, __ATOMIC_RELAXED) & (1u << k)) ||
			    !__atomic_compare_exchange_n(&l->users[k], &u, HA_PM_DISCARDING, 0,
							 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				continue;
			ha_sys_discard(&l->span[k * n], n * sizeof l->span[0]);
			ha_sys_discard(&l->ent[k * n], n * sizeof l->ent[0]);
			__atomic_fetch_and(&l->dirty, ~(1u << k), __ATOMIC_RELAXED);
			__atomic_store_n(&l->users[k], 0, __ATOMIC_RELEASE);
		}
	ha_unlock(&leaf_lock);
	return 0;
}

void ha_pagemap_mark(const ha_span *s)
{
	uint32_t coff = __atomic_load_n(&s->plain_max, __ATOMIC_RELAXED) ? s->cls << HA_TL_SHIFT : 0;
	uintptr_t pg = s->base >> HA_PAGE_SHIFT;
	uintptr_t end = (s->base + ha_class_span_bytes[s->cls] - 1) >> HA_PAGE_SHIFT;
	for (; pg <= end; pg++) {
		ha_pmleaf *leaf = leaf_at(ha_pagemap_index(pg) - (intptr_t)(pg & HA_PM_LEAF_MASK));
		__atomic_store_n(&leaf->ent[pg & HA_PM_LEAF_MASK].coff, coff, __ATOMIC_RELEASE);
	}
}

void ha_pagemap_prefork(void)
{
	ha_lock(&leaf_lock);
}

void ha_pagemap_postfork(int child)
{
	if (child)
		pthread_mutex_init(&leaf_lock, NULL);
	else
		ha_unlock(&leaf_lock);
}
