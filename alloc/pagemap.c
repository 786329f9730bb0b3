/* alloc/pagemap.c — page number -> span record, for any pointer, in O(1).
 *
 * Two levels over the 48-bit address space with 4 KiB pages: a 2^22-entry
 * root (32 MiB of BSS, one touched page per 32 GiB in use) of 2^14-entry
 * leaves (128 KiB each, from meta.c, one per 64 MiB of address space that
 * holds spans).  Leaves are never freed (readers take no lock), so they are
 * kept small: as mimalloc's mappings drift over a long run, each new 64 MiB
 * region costs 128 KiB, not 2 MiB.
 * Readers never lock: a leaf, once published, stays; entries are written
 * before the span's objects are handed out and cleared only after every
 * object of the span is back.  Large blocks from mimalloc have no entry
 * (NULL), which is how free() tells them apart.
 */
#include "alloc/internal.h"
#include "alloc/debug.h"
#include <errno.h>

ha_span **ha_pagemap_root[1u << HA_PM_ROOT_BITS];
static pthread_mutex_t leaf_lock = PTHREAD_MUTEX_INITIALIZER;

static ha_span **leaf_for(uintptr_t pg)
{
	size_t r = pg >> HA_PM_LEAF_BITS;
	ha_span **leaf = __atomic_load_n(&ha_pagemap_root[r], __ATOMIC_ACQUIRE);
	if (leaf)
		return leaf;
	ha_lock(&leaf_lock);
	leaf = ha_pagemap_root[r];
	if (!leaf) {
		leaf = ha_meta_alloc(sizeof(ha_span *) << HA_PM_LEAF_BITS);
		if (leaf)
			__atomic_store_n(&ha_pagemap_root[r], leaf, __ATOMIC_RELEASE);
	}
	ha_unlock(&leaf_lock);
	return leaf;
}

int ha_pagemap_set(uintptr_t start, size_t bytes, ha_span *s)
{
	HA_ASSERT(bytes > 0 && (start & (HA_PAGE_SIZE - 1)) == 0);
	uintptr_t pg = start >> HA_PAGE_SHIFT, end = (start + bytes - 1) >> HA_PAGE_SHIFT;
	if (end >> (HA_PM_ROOT_BITS + HA_PM_LEAF_BITS))
		return ENOMEM;
	for (; pg <= end; pg++) {
		ha_span **leaf = leaf_for(pg);
		if (!leaf)
			return ENOMEM;
		__atomic_store_n(&leaf[pg & ((1u << HA_PM_LEAF_BITS) - 1)], s, __ATOMIC_RELEASE);
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
