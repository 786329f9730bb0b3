/* alloc/retain.c — the retention policy's rules (alloc/retain.h says what
 * they are and why): the shared bound, the idle floor, huge pages' budget,
 * the reuse learned, and the decaying cache both the span pool and the
 * large cache are.  The *_of forms are the rules on given figures
 * (tests/unit/alloc_units checks them); the others read the caches now.
 */
#include "alloc/internal.h"

size_t ha_keep_cap_of(uint64_t live, uint64_t held, uint64_t own, uint64_t learned, size_t hot_max)
{
	uint64_t cap = HA_KEEP_FLOOR + live / HA_KEEP_SHARE + learned;
	uint64_t others = held > own ? held - own : 0;
	cap = cap > others ? cap - others : 0;
	return cap < hot_max ? (size_t)cap : hot_max;
}

size_t ha_idle_floor_of(uint64_t held, uint64_t own)
{
	uint64_t others = held > own ? held - own : 0;
	return others < HA_IDLE_KEEP ? (size_t)(HA_IDLE_KEEP - others) : 0;
}

size_t ha_huge_dirty_max(size_t peak, size_t use)
{
	size_t top = peak * 2;
	size_t b = top > use ? top - use : 0;
	return b < HA_HUGE_DIRTY_MIN ? HA_HUGE_DIRTY_MIN : b > HA_HUGE_DIRTY_MAX ? HA_HUGE_DIRTY_MAX : b;
}

size_t ha_huge_budget(size_t peak, size_t use, size_t last_freed, size_t keep)
{
	size_t b = ha_huge_dirty_max(peak, use);
	size_t cap = keep + (last_freed < HA_HUGE_REUSE_MAX ? last_freed : HA_HUGE_REUSE_MAX) + use;
	return cap < b ? cap : b;
}

/* Reuse learned (ha_keep_refault): bytes the bound grows by, and the ms
 * clock of the last give-back the bound forced; both atomic. */
static uint64_t learned;
static uint32_t forced_at;

static uint64_t held_now(void)
{
	return ha_central_held_bytes() + ha_arena_held_bytes() + ha_huge_held_bytes();
}

size_t ha_keep_cap(uint64_t own, size_t hot_max)
{
	if (ha_purge_running())
		return hot_max;
	uint64_t live = ha_central_live_bytes() + ha_arena_live_bytes() + ha_huge_live_bytes();
	return ha_keep_cap_of(live, held_now(), own, __atomic_load_n(&learned, __ATOMIC_RELAXED), hot_max);
}

size_t ha_idle_floor(uint64_t own)
{
	return ha_idle_floor_of(held_now(), own);
}

void ha_keep_forced(uint32_t now)
{
	__atomic_store_n(&forced_at, now | 1, __ATOMIC_RELAXED);
}

void ha_keep_refault(size_t bytes)
{
	uint32_t at = __atomic_load_n(&forced_at, __ATOMIC_RELAXED);
	if (!at || (uint32_t)(ha_now_ms() - at) > HA_REFAULT_MS)
		return;
	uint64_t l = __atomic_load_n(&learned, __ATOMIC_RELAXED) + bytes;
	__atomic_store_n(&learned, l < HA_KEEP_LEARN_MAX ? l : HA_KEEP_LEARN_MAX, __ATOMIC_RELAXED);
}

void ha_keep_forget(void)
{
	__atomic_store_n(&learned, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&forced_at, 0, __ATOMIC_RELAXED);
}

void ha_keep_fade(uint32_t now)
{
	uint64_t l = __atomic_load_n(&learned, __ATOMIC_RELAXED);
	if (l && (uint32_t)(now - __atomic_load_n(&forced_at, __ATOMIC_RELAXED)) > HA_DECAY_MS)
		__atomic_store_n(&learned, l / 2, __ATOMIC_RELAXED);
}

void ha_hot_push(ha_hot_cache *c, unsigned list, ha_hot_entry *e, size_t bytes, uint32_t since)
{
	ha_hot_list *l = &c->lists[list];
	e->since = since;
	e->prev = NULL;
	e->next = l->head;
	if (e->next)
		e->next->prev = e;
	else
		l->tail = e;
	l->head = e;
	__atomic_store_n(&c->hot, c->hot + bytes, __ATOMIC_RELAXED);
}

void ha_hot_unlink(ha_hot_cache *c, unsigned list, ha_hot_entry *e, size_t bytes)
{
	ha_hot_list *l = &c->lists[list];
	if (e->prev)
		e->prev->next = e->next;
	else
		l->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		l->tail = e->prev;
	e->next = e->prev = NULL;
	__atomic_store_n(&c->hot, c->hot - bytes, __ATOMIC_RELAXED);
}

void ha_hot_decay(ha_hot_cache *c, uint32_t now, size_t cap)
{
	int idle = (uint32_t)(now - __atomic_load_n(&c->checked, __ATOMIC_RELAXED)) >= HA_DECAY_MS / 8;
	if (!idle && ha_hot_bytes(c) <= cap)
		return;
	if (idle)
		__atomic_store_n(&c->checked, now, __ATOMIC_RELAXED);
	int forced = 0;
	size_t floor = idle ? ha_idle_floor(ha_hot_bytes(c)) : 0;
	for (;;) {
		ha_hot_entry *got[8];
		unsigned at[8], n = 0;
		ha_lock(c->lock);
		while (n < 8) {
			unsigned o = c->nlists;   /* the list whose oldest is the oldest */
			for (unsigned i = 0; i < c->nlists; i++)
				if (c->lists[i].tail && (o == c->nlists || (uint32_t)(now - c->lists[i].tail->since) >
							 (uint32_t)(now - c->lists[o].tail->since)))
					o = i;
			if (o == c->nlists)
				break;
			ha_hot_entry *e = c->lists[o].tail;
			if (c->hot > cap)
				forced = 1;
			else if (!(idle && c->hot > floor && (uint32_t)(now - e->since) >= HA_DECAY_MS))
				break;
			ha_hot_unlink(c, o, e, c->size(c, o, e));
			at[n] = o;
			got[n++] = e;
		}
		ha_unlock(c->lock);
		for (unsigned k = 0; k < n; k++)
			c->cool(c, at[k], got[k]);
		if (forced && cap)
			ha_keep_forced(now);
		if (n < 8)
			return;
	}
}
