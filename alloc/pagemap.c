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
 */
#include "alloc/internal.h"
#include "alloc/debug.h"
#include <errno.h>

ha_pagemap ha_pm;
static pthread_mutex_t leaf_lock = PTHREAD_MUTEX_INITIALIZER;

_Static_assert(sizeof(ha_pent) == sizeof(uintptr_t), "one index for both arrays of a leaf");

static ha_pmleaf *leaf_at(intptr_t off)
{
	return (ha_pmleaf *)((uintptr_t)ha_pm.none.span + (uintptr_t)off * sizeof(uintptr_t));
}

void ha_pagemap_init(void)
{
	for (unsigned c = 1; c < HA_NCLASSES; c++) {
		ha_pm.cl.inv[c] = (uint32_t)ha_class_inv[c];
		ha_pm.cl.ror[c] = ha_class_ror[c];
		ha_pm.cl.lim[c] = ha_class_span_bytes[c] / ha_class_size[c];
		ha_pm.cl.key[c] = ha_tl_key(c);
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
		ha_pmleaf *leaf = ha_meta_alloc(sizeof(ha_pmleaf));
		if (leaf) {
			/* leaves are word-aligned: the distance is whole entries */
			off = (intptr_t)((uintptr_t)leaf - (uintptr_t)ha_pm.none.span) /
			      (intptr_t)sizeof(uintptr_t);
			__atomic_store_n(&ha_pm.root[r], off, __ATOMIC_RELEASE);
		}
	}
	ha_unlock(&leaf_lock);
	return off ? leaf_at(off) : NULL;
}

int ha_pagemap_set(uintptr_t start, size_t bytes, ha_span *s)
{
	HA_ASSERT(bytes > 0 && (start & (HA_PAGE_SIZE - 1)) == 0);
	uintptr_t pg = start >> HA_PAGE_SHIFT, end = (start + bytes - 1) >> HA_PAGE_SHIFT;
	if (end >> (HA_PM_ROOT_BITS + HA_PM_LEAF_BITS))
		return ENOMEM;
	uint32_t base_lo = s ? (uint32_t)s->base : 0;
	uint32_t cls = s && s->plain_max ? s->cls : 0;
	for (; pg <= end; pg++) {
		ha_pmleaf *leaf = leaf_for(pg);
		if (!leaf)
			return ENOMEM;
		ha_pent *e = &leaf->ent[pg & HA_PM_LEAF_MASK];
		__atomic_store_n(&e->base_lo, base_lo, __ATOMIC_RELAXED);
		__atomic_store_n(&e->cls, cls, __ATOMIC_RELEASE);
		__atomic_store_n(&leaf->span[pg & HA_PM_LEAF_MASK],
				 s ? (uintptr_t)s - (uintptr_t)&ha_pm.nospan : 0, __ATOMIC_RELEASE);
		/* the lock-free reader sees what was stored, on every page */
		HA_ASSERT(ha_pagemap_get((const void *)(pg << HA_PAGE_SHIFT)) == s);
	}
	return 0;
}

void ha_pagemap_mark(const ha_span *s)
{
	uint32_t cls = __atomic_load_n(&s->plain_max, __ATOMIC_RELAXED) ? s->cls : 0;
	uintptr_t pg = s->base >> HA_PAGE_SHIFT;
	uintptr_t end = (s->base + ha_class_span_bytes[s->cls] - 1) >> HA_PAGE_SHIFT;
	for (; pg <= end; pg++) {
		ha_pmleaf *leaf = leaf_at(ha_pagemap_index(pg) - (intptr_t)(pg & HA_PM_LEAF_MASK));
		__atomic_store_n(&leaf->ent[pg & HA_PM_LEAF_MASK].cls, cls, __ATOMIC_RELEASE);
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
