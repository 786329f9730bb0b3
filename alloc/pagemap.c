/* alloc/pagemap.c — page number -> span record, for any pointer, in O(1).
 *
 * Two levels over the 48-bit address space with 4 KiB pages: a 2^22-entry
 * root (32 MiB of BSS, one touched page per 32 GiB in use) of 2^14-entry
 * leaves (128 KiB each, from meta.c, one per 64 MiB of address space that
 * holds spans).  A root entry is its leaf's distance from ha_pm.none, a
 * leaf of zeros that is never written (reads of it find the zero page),
 * and a leaf entry its span's distance from ha_pm.nospan, a span of zeros
 * that no pointer is a plain block of: a page without a span, or without
 * a leaf, reads 0 and so nospan, and free's lookup needs no branch.  Leaves are never freed (readers take no
 * lock), so they are kept small: as mimalloc's mappings drift over a long
 * run, each new 64 MiB region costs 128 KiB, not 2 MiB.
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

static uintptr_t *leaf_at(intptr_t off)
{
	return (uintptr_t *)((uintptr_t)ha_pm.none + (uintptr_t)off * sizeof(uintptr_t));
}

static uintptr_t *leaf_for(uintptr_t pg)
{
	size_t r = pg >> HA_PM_LEAF_BITS;
	intptr_t off = __atomic_load_n(&ha_pm.root[r], __ATOMIC_ACQUIRE);
	if (off)
		return leaf_at(off);
	ha_lock(&leaf_lock);
	off = ha_pm.root[r];
	if (!off) {
		uintptr_t *leaf = ha_meta_alloc(sizeof(uintptr_t) << HA_PM_LEAF_BITS);
		if (leaf) {
			/* leaves are word-aligned: the distance is whole entries */
			off = (intptr_t)((uintptr_t)leaf - (uintptr_t)ha_pm.none) /
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
	for (; pg <= end; pg++) {
		uintptr_t *leaf = leaf_for(pg);
		if (!leaf)
			return ENOMEM;
		__atomic_store_n(&leaf[pg & HA_PM_LEAF_MASK],
				 s ? (uintptr_t)s - (uintptr_t)&ha_pm.nospan : 0, __ATOMIC_RELEASE);
		/* the lock-free reader sees what was stored, on every page */
		HA_ASSERT(ha_pagemap_get((const void *)(pg << HA_PAGE_SHIFT)) == s);
	}
	return 0;
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
