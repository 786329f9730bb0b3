/* alloc/thread_cache.c — the front-end: per-thread free stacks.
 *
 * The fast paths (pop in malloc, push in free) live in fastpath.h as inline
 * code on ha_tc, an initial-exec TLS struct: no lock, no atomic.  Each
 * class's stack is an array of block pointers in the thread's slab (one
 * mapping per thread record, internal.h), so a block freed here that
 * another thread allocated (or the reverse) is never read or written by
 * the allocator: its cache line stays where the program last had it.
 * This file has their slow paths:
 *   refill    an empty stack takes blocks from the central cache: up to
 *             `max` below a batch, else whole batches, half of `max`
 *             and at most HA_MOVE_BATCHES, under one lock hold;
 *   overflow  a stack fuller than its max gives back as many from its top
 *             (whole batches, or what it holds below one);
 *   slow start  max starts at 0, a class's first refill sets it to one
 *             line group (ha_class_line_group: 1 block from 128 B on) and
 *             each refill or overflow doubles it up to 4 batches (64 KiB),
 *             so a thread that allocates little — above all one whose
 *             first allocation comes in the last round of TSD destructors,
 *             which never sees our destructor — strands at most a few
 *             blocks, and one that exits soon (threads retired and
 *             replaced) hands few back to their spans one by one;
 *   first free  of a class the thread has not allocated from yet (max 0)
 *             sends the block to its span and sets max to 4 (or two line
 *             groups, if more: carving takes whole ones), so that the
 *             first refill leaves it last: a block of another thread's,
 *             reused at once here, would share cache lines with the blocks
 *             that thread writes;
 *   growth    past that, a stack that runs empty again grows by a batch,
 *             up to 2048 blocks or 256 KiB (ha_tl_cap), while the cache's
 *             maxes stay within half its budget: bursts of hundreds of
 *             blocks of one class then fit; one that overflows again grows
 *             so too, up to 2 x HA_MOVE_BATCHES batches (a thread that
 *             frees what another allocates then hands them over in bulk);
 *   budget    when the whole cache holds more than its share of
 *             HA_TC_TOTAL (divided among live threads, between 64 KiB and
 *             4 MiB), checked on every refill and overflow, every stack
 *             gives back half — so 64 threads keep about 32 MiB in caches,
 *             not 64 x 4 MiB;
 *   exit      the pthread key destructor hands every stack back.
 * A thread that has exited (state 2) keeps working: its stacks point at
 * the read-only guard with room 0, so every free goes straight to the
 * central cache and every malloc takes a single block — frees from later
 * TLS destructors stay correct.
 *
 * The registry of threads is a list of ha_tnode records in meta memory
 * (see internal.h); its lock is taken on thread start and exit and by
 * readers of statistics.
 */
#define _GNU_SOURCE 1
#include "alloc/internal.h"
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HA_TC_TOTAL ((uint64_t)32 << 20)
#define HA_TC_MIN ((uint64_t)64 << 10)
#define HA_TC_MAX ((uint64_t)4 << 20)
static unsigned live_threads __attribute__((aligned(64)));   /* atomic */

static uint64_t budget(void)
{
	unsigned n = __atomic_load_n(&live_threads, __ATOMIC_RELAXED);
	uint64_t b = HA_TC_TOTAL / (n ? n : 1);
	return b < HA_TC_MIN ? HA_TC_MIN : b > HA_TC_MAX ? HA_TC_MAX : b;
}

/* Every stack starts (and ends, at thread exit) on the guard: empty for
 * malloc, room 0 for free, so both go slow until the thread attaches. */
void *const ha_tl_guard[2];
#define GUARD ((void **)&ha_tl_guard[1])
HA_TLS ha_tcache ha_tc = { .list = { [0 ... HA_NCLASSES - 1] = { .top = GUARD } } };

uint32_t ha_tl_cap[HA_NCLASSES];
uint32_t ha_tl_off[HA_NCLASSES];
size_t ha_tl_slab_bytes;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static ha_tnode *registry;

static inline uint64_t rd(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* Fold a record's counters into retired and free the record.  Registry
 * lock held. */
static unsigned idle_slabs;   /* retired records whose slabs are resident (registry lock) */

static void retire_node(ha_tnode *nd)
{
	ha_books_retire(nd);
	if (nd->slab && !nd->slab_idle_since) {
		nd->slab_idle_since = ha_now_ms() | 1;
		__atomic_store_n(&idle_slabs, idle_slabs + 1, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&nd->live, 0, __ATOMIC_RELEASE);
	__atomic_fetch_sub(&live_threads, 1, __ATOMIC_RELAXED);
}

/* Give this thread its record's slab, mapped on the record's first use
 * (zero pages: every guard slot reads NULL; only the slots a stack reaches
 * become resident).  The stacks stay on the read-only guard until their
 * class's first refill or overflow (leave_guard): a thread that lives for
 * a few allocations sets up the classes it uses, not all of them.  Out of
 * memory every malloc and free goes to the central cache, one block at a
 * time, until a later refill maps it.  0 on failure. */
static int slab_attach(ha_tcache *tc)
{
	ha_tnode *nd = tc->node;
	if (!nd->slab) {
		int e = errno;
		void *m = ha_sys_mmap(NULL, ha_tl_slab_bytes, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		errno = e;
		if (m == MAP_FAILED)
			return 0;
		ha_meta_note(m, ha_tl_slab_bytes);
		nd->slab = m;
	}
	tc->slab = nd->slab;
	return 1;
}

/* Every list as a new thread's starts: on the guard, room 0, its class's
 * size for the countdown (ha_tcache_init fills it).  max[] and touched[]
 * of a thread that has not attached are zero already (TLS image). */
static ha_tlist fresh_lists[HA_NCLASSES];

static inline void touch(ha_tcache *tc, unsigned cls)
{
	tc->touched[cls >> 6] |= (uint64_t)1 << (cls & 63);
}

/* The next class after c whose max this thread has set, or 0. */
static inline unsigned next_touched(const ha_tcache *tc, unsigned c)
{
	c++;
	for (unsigned w = c >> 6; w < sizeof tc->touched / sizeof tc->touched[0]; w++) {
		uint64_t m = tc->touched[w];
		if (w == c >> 6)
			m &= ~(uint64_t)0 << (c & 63);
		if (m)
			return w * 64 + (unsigned)__builtin_ctzll(m);
	}
	return 0;
}

#define FOR_TOUCHED(tc, c) \
	for (unsigned c = next_touched(tc, 0); c; c = next_touched(tc, c))

ha_tcache *ha_tcache_attach(void)
{
	ha_tcache *tc = &ha_tc;
	if (tc->state != 0)
		return tc;
	ha_ensure_init();
	int tid = (int)syscall(SYS_gettid);
	ha_lock(&registry_lock);
	ha_tnode *nd = registry;
	while (nd && nd->live)
		nd = nd->next;
	if (!nd) {
		/* meta memory is 16-aligned: take a line more and align */
		char *raw = ha_meta_alloc(sizeof *nd + 64);
		nd = raw ? (ha_tnode *)(((uintptr_t)raw + 63) & ~(uintptr_t)63) : NULL;
		if (!nd) {
			ha_unlock(&registry_lock);
			ha_fatal("out of memory for a thread record", NULL);
		}
		nd->next = registry;
		registry = nd;
	}
	nd->tid = tid;
	nd->live = 1;
	if (nd->slab_idle_since) {
		nd->slab_idle_since = 0;
		__atomic_store_n(&idle_slabs, idle_slabs - 1, __ATOMIC_RELAXED);
	}
	__atomic_fetch_add(&live_threads, 1, __ATOMIC_RELAXED);
	ha_unlock(&registry_lock);
	/* max 0 until the class's first refill (or first free) */
	tc->max_bytes = 0;
	tc->node = nd;
	memcpy(tc->list, fresh_lists, sizeof fresh_lists);
	slab_attach(tc);
	tc->state = 1;
	pthread_setspecific(ha_thread_key, tc);
	return tc;
}

uint64_t ha_tcache_cached(const ha_tcache *tc)
{
	uint64_t b = 0;
	FOR_TOUCHED(tc, c)
		b += (uint64_t)ha_tl_len(tc, c) * ha_class_size[c];
	return b;
}


/* Slow start ends at 4 batches and, past one batch, at 64 KiB a list. */
static inline uint32_t list_cap(unsigned cls)
{
	uint32_t b = ha_class_batch[cls], bytes = 65536 / ha_class_size[cls];
	uint32_t cap = 4 * b < bytes ? 4 * b : bytes;
	return cap > b ? cap : b;
}

/* Past list_cap, a list that keeps running empty (a program that frees in
 * bursts of hundreds, then allocates them again) grows a batch per refill
 * up to HA_TL_DYN objects or HA_TL_DYN_BYTES, while the maxes of the whole
 * cache stay within half its budget (what they hold pins spans). */
#define HA_TL_DYN 2048
#define HA_TL_DYN_BYTES ((uint32_t)256 << 10)
static inline uint32_t dyn_cap(unsigned cls)
{
	uint32_t k = HA_TL_DYN_BYTES / ha_class_size[cls];
	return k < HA_TL_DYN ? k : HA_TL_DYN;
}

/* The slab's layout: each class an array of dyn_cap + 1 slots (the spare
 * takes an overflowing free's block) after a guard slot. */
void ha_tcache_init(void)
{
	uint32_t off = 0;
	for (unsigned c = 0; c < HA_NCLASSES; c++)
		fresh_lists[c] = (ha_tlist){ .top = GUARD, .size = c ? ha_class_size[c] : 0 };
	for (unsigned c = 1; c < HA_NCLASSES; c++) {
		ha_tl_cap[c] = dyn_cap(c);
		off += 1;               /* the guard */
		ha_tl_off[c] = off;
		off += ha_tl_cap[c] + 1;
	}
	ha_tl_slab_bytes = ((size_t)off * sizeof(void *) + HA_PAGE_SIZE - 1) & ~(HA_PAGE_SIZE - 1);
}

static void enforce_budget(ha_tcache *tc);

/* Objects a refill takes, or an overflow gives back, at once: whole
 * batches, half the list's max, at most HA_MOVE_BATCHES of them (one lock
 * hold for what took one per batch: a thread that only allocates or only
 * frees a class, fed by another, moves its blocks in bulk). */
static inline unsigned move_objs(const ha_tcache *tc, unsigned cls)
{
	uint32_t b = ha_class_batch[cls], k = tc->max[cls] / (2 * b);
	return b * (k < 1 ? 1 : k > HA_MOVE_BATCHES ? HA_MOVE_BATCHES : k);
}

/* Blocks given back ran out the freed-bytes budget: check the thresholds,
 * now that the cache and the books agree again. */
static inline void check_frees(ha_tcache *tc)
{
	if (HA_UNLIKELY(tc->free_check < 0))
		ha_books_check(tc);
}


static void set_max(ha_tcache *tc, unsigned cls, uint32_t max)
{
	uint32_t old = tc->max[cls];
	HA_ASSERT(max <= ha_tl_cap[cls]);
	touch(tc, cls);
	ha_tl_set_max(tc, cls, max);
	tc->max_bytes += (uint64_t)max * ha_class_size[cls];
	tc->max_bytes -= (uint64_t)old * ha_class_size[cls];
}

/* Slow start: double up to list_cap. */
static void grow(ha_tcache *tc, unsigned cls)
{
	uint32_t cap = list_cap(cls), old = tc->max[cls];
	if (old < cap)
		set_max(tc, cls, old * 2 < cap ? old * 2 : cap);
}

/* The list ran empty: slow start, then a batch more while the budget and
 * dyn_cap allow. */
static void grow_on_empty(ha_tcache *tc, unsigned cls)
{
	uint32_t old = tc->max[cls], b = ha_class_batch[cls];
	if (old < list_cap(cls)) {
		grow(tc, cls);
		return;
	}
	if (old + b <= dyn_cap(cls) &&
	    tc->max_bytes + (uint64_t)b * ha_class_size[cls] <= budget() / 2)
		set_max(tc, cls, old + b);
}

/* The list overflowed past slow start: a batch more while the list is
 * short of moving HA_MOVE_BATCHES at once (a thread that frees what
 * another allocates gives back in bulk), within dyn_cap and the budget.
 * Nonzero when it grew (the list then fits again). */
static int grow_on_full(ha_tcache *tc, unsigned cls)
{
	uint32_t old = tc->max[cls], b = ha_class_batch[cls];
	uint32_t cap = 2 * HA_MOVE_BATCHES * b < dyn_cap(cls) ? 2 * HA_MOVE_BATCHES * b : dyn_cap(cls);
	if (old + b > cap || tc->max_bytes + (uint64_t)b * ha_class_size[cls] > budget() / 2)
		return 0;
	set_max(tc, cls, old + b);
	return 1;
}

static void give_back(ha_tlist *l, unsigned cls, unsigned count, int to_spans);

/* A cache that went HA_DECAY_MS without a refill or an overflow has been
 * idle (its thread asleep, or living on what it holds): every stack but
 * cls's goes back to its spans, pooled as idle, so that a thread that
 * wakes after a burst keeps no more than it uses now.  One clock read a
 * slow path. */
static void scavenge_if_idle(ha_tcache *tc, unsigned cls)
{
	uint32_t now = ha_now_ms();
	/* used_at is now | 1 (0: never), so it may lie a ms ahead */
	if (tc->used_at && (int32_t)(now - tc->used_at) >= HA_DECAY_MS) {
		FOR_TOUCHED(tc, c)
			if (c != cls)
				give_back(&tc->list[c], c, ha_tl_len(tc, c), HA_TO_SPANS_IDLE);
		ha_purge_tick(now);   /* the decay step sees all of it */
	}
	tc->used_at = now | 1;
}

void *ha_tcache_refill(uintptr_t key, size_t n)
{
	unsigned cls = ha_tl_key_class(key);
	ha_tcache *tc = &ha_tc;
	if (HA_UNLIKELY(cls == 0)) {         /* tables not built yet */
		ha_ensure_init();
		return ha_alloc(n);
	}
	if (HA_UNLIKELY(tc->state == 0))
		ha_tcache_attach();
	ha_tlist *l = &tc->list[cls];
	int e = errno;   /* a success leaves the program's errno alone */
	__atomic_fetch_add(&ha_slow_allocs.v, 1, __ATOMIC_RELAXED);
	if (tc->state != 1 || (!tc->slab && !slab_attach(tc))) {
		/* exited, or no slab: one block, past the stack (it stays on
		 * the guard) */
		void *one = NULL;
		if (!ha_central_fetch(cls, 1, &one)) {
			ha_release_cached();
			if (!ha_central_fetch(cls, 1, &one)) {
				errno = ENOMEM;
				return NULL;
			}
		}
		errno = e;
		ha_books_net(tc, (int64_t)ha_class_size[cls]);
		return one;
	}
	if (l->top[-1]) {                     /* attach raced nothing: retry */
		void *p = *--l->top;
		l->room++;
		return p;
	}
	scavenge_if_idle(tc, cls);
	if (tc->max[cls] == 0)
		set_max(tc, cls, ha_class_line_group(cls));
	unsigned want = tc->max[cls] < ha_class_batch[cls] ? tc->max[cls] : move_objs(tc, cls);
	void **lo = ha_tl_lo(tc, cls);       /* the stack is empty: top == lo */
	unsigned got = ha_central_fetch(cls, want, lo);
	if (HA_UNLIKELY(!got)) {
		ha_release_cached();
		got = ha_central_fetch(cls, 1, lo);
		if (!got) {
			errno = ENOMEM;
			return NULL;
		}
	}
	errno = e;
	void *p = lo[got - 1];
	l->top = lo + got - 1;
	l->room -= (int32_t)(got - 1);
	ha_books_net(tc, (int64_t)got * ha_class_size[cls]);
	grow_on_empty(tc, cls);
	enforce_budget(tc);
	ha_books_sync(tc);
	ha_books_publish(tc, 0);
	check_frees(tc);
	return p;
}

/* Give back the `count` blocks at the top of l: to the transfer cache
 * while it has room (!to_spans), the rest to their spans. */
static void give_back(ha_tlist *l, unsigned cls, unsigned count, int to_spans)
{
	if (!count)
		return;
	ha_tcache *tc = &ha_tc;
	int64_t bytes = (int64_t)count * ha_class_size[cls];
	if (tc->state == 1 && ha_hot.prof_mode == HA_PROF_ON) {
		ha_books_turn();              /* the books still count them */
		tc->free_check -= bytes;      /* checked when the slow path ends */
	}
	ha_books_net(tc, -bytes);
	l->room += (int32_t)count;
	l->top -= count;
	ha_central_release(cls, l->top, count, to_spans);
}

/* Over its share of the total budget, the cache gives back half of every
 * list (and lowers their max) until it is under.  Every list holds at most
 * its max, so while the maxes add up to no more than the budget the count
 * (a pass over every class) is skipped but for every 64th call, which
 * keeps node->cached_bytes (statistics) fresh.  Past it, every 8th call
 * counts: frees fill the lists up to their maxes between slow paths
 * anyway, so a count at each one bounds nothing more, and with 40 classes
 * in use it was 40% of the allocator's instructions. */
static void enforce_budget(ha_tcache *tc)
{
	uint64_t b = budget(), have;
	if (++tc->budget_skips & (tc->max_bytes <= b ? 63 : 7))
		return;
	while ((have = ha_tcache_cached(tc)) > b) {
		FOR_TOUCHED(tc, c) {
			ha_tlist *l = &tc->list[c];
			uint32_t len = ha_tl_len(tc, c);
			give_back(l, c, len > 1 ? len / 2 : len, 1);
			uint32_t cut = tc->max[c] > ha_class_batch[c] ? ha_class_batch[c] : 0;
			ha_tl_set_max(tc, c, tc->max[c] - cut);
			tc->max_bytes -= (uint64_t)cut * ha_class_size[c];
			if (l->room < 0)   /* keep len <= max: max_bytes bounds */
				give_back(l, c, (uint32_t)-l->room, 1);
		}
	}
	if (tc->node)
		__atomic_store_n(&tc->node->cached_bytes, have, __ATOMIC_RELAXED);
}

void ha_tcache_overflow(void *p, uintptr_t key)
{
	unsigned cls = ha_tl_key_class(key);
	ha_tcache *tc = &ha_tc;
	ha_tlist *l = &tc->list[cls];
	if (HA_UNLIKELY(tc->state == 0)) {
		/* first call of this thread is a free: set the stacks up,
		 * then count p as the push did */
		ha_tcache_attach();
		l->room--;
	}
	if (tc->state != 1 || !tc->slab) {
		/* exited, or no slab: straight to its span */
		l->room++;
		ha_books_net(tc, -(int64_t)ha_class_size[cls]);
		ha_central_release(cls, &p, 1, 1);
		return;
	}
	if (l->top == GUARD)                  /* the class's first overflow */
		l->top = ha_tl_lo(tc, cls);
	*l->top++ = p;                        /* the spare slot: max + 1 at most */
	if (l->room >= 0)
		return;
	scavenge_if_idle(tc, cls);
	unsigned batch = ha_class_batch[cls];
	if (HA_UNLIKELY(tc->max[cls] == 0)) {
		/* the first free of a class this thread has not allocated
		 * from: another thread's block, which malloc here would hand
		 * out next, to be written beside that thread's blocks (passive
		 * false sharing).  It goes back to its span, and the first
		 * refill takes a few more: the block, first on its span's
		 * free list, ends up last in this stack. */
		give_back(l, cls, ha_tl_len(tc, cls), 1);
		uint32_t first = 2 * ha_class_line_group(cls);
		first = first > 4 ? first : 4;
		set_max(tc, cls, batch < first ? batch : first);
	} else {
		if (tc->max[cls] < list_cap(cls)) {
			grow(tc, cls);         /* slow start: keep more before giving back */
			if (l->room >= 0)
				return;
		} else if (grow_on_full(tc, cls)) {
			return;
		}
		uint32_t len = ha_tl_len(tc, cls), n = move_objs(tc, cls);
		if (len < batch)
			give_back(l, cls, len, 1);
		else
			give_back(l, cls, n <= len ? n : len / batch * batch, 0);
	}
	enforce_budget(tc);
	ha_books_sync(tc);
	ha_books_publish(tc, 0);
	check_frees(tc);
}

static void flush_all(ha_tcache *tc)
{
	FOR_TOUCHED(tc, c)
		give_back(&tc->list[c], c, ha_tl_len(tc, c), 1);
}

void ha_tcache_flush_self(void)
{
	if (ha_tc.state == 1)
		flush_all(&ha_tc);
}

void ha_tcache_free_ranges(ha_free_range_fn *add, void *ctx)
{
	const ha_tcache *tc = &ha_tc;
	if (tc->state != 1)
		return;
	FOR_TOUCHED(tc, c) {
		void *const *lo = ha_tl_lo(tc, c);
		uint32_t n = ha_tl_len(tc, c), size = ha_class_size[c];
		for (uint32_t i = 0; i < n; i++)
			add(ctx, (uintptr_t)lo[i], (uintptr_t)lo[i] + size);
	}
}

void ha_tcache_thread_exit(void *arg)
{
	ha_tcache *tc = &ha_tc;
	(void)arg;
	if (tc->state != 1)
		return;
	FOR_TOUCHED(tc, c)
		ha_tl_set_max(tc, c, 0);
	flush_all(tc);
	/* the slab goes with the record; the stacks rest on the guard */
	FOR_TOUCHED(tc, c) {
		tc->list[c].top = GUARD;
		tc->list[c].room = 0;
	}
	tc->slab = NULL;
	tc->max_bytes = 0;
	ha_books_publish(tc, 0);
	/* from here on every allocation goes slow and books to the retired
	 * sums (ha_books_alloc) */
	tc->state = 2;
	tc->compat = 0;
	tc->epoch = 0;
	tc->sample_left = tc->drawn = 0;
	ha_lock(&registry_lock);
	retire_node(tc->node);
	tc->node = NULL;
	ha_unlock(&registry_lock);
	ha_central_thread_exited();
}

/* Registry lock held: is the record's thread still there?  A thread that
 * died without our destructor is found here and retired. */
static int node_alive(ha_tnode *nd, int self)
{
	if (nd->tid == self)
		return 1;
	if (syscall(SYS_tgkill, getpid(), nd->tid, 0) == 0 || errno != ESRCH)
		return 1;
	retire_node(nd);
	return 0;
}

/* The decay step's part for exited threads: a record unused for
 * HA_DECAY_MS gives its slab's pages back (the next thread to take it
 * faults in what it uses), so that threads that have exited leave nothing
 * resident behind them once the program has gone quiet.  Under the
 * registry lock, which a thread takes to claim a record. */
int ha_tcache_decay(uint32_t now)
{
	if (!__atomic_load_n(&idle_slabs, __ATOMIC_RELAXED))
		return 0;
	int more = 0, saved = errno;
	ha_lock(&registry_lock);
	for (ha_tnode *nd = registry; nd; nd = nd->next) {
		if (nd->live || !nd->slab_idle_since)
			continue;
		if ((int32_t)(now - nd->slab_idle_since) < HA_DECAY_MS) {
			more = 1;
			continue;
		}
		ha_sys_discard(nd->slab, ha_tl_slab_bytes);
		nd->slab_idle_since = 0;
		idle_slabs--;
	}
	ha_unlock(&registry_lock);
	errno = saved;
	return more;
}

unsigned ha_tcache_live(void)
{
	return __atomic_load_n(&live_threads, __ATOMIC_RELAXED);
}

uint64_t ha_tcache_count(uint64_t *bytes)
{
	uint64_t b = 0, n = 0;
	int self = (int)syscall(SYS_gettid), saved = errno;
	ha_lock(&registry_lock);
	for (ha_tnode *nd = registry; nd; nd = nd->next)
		if (nd->live && node_alive(nd, self)) {
			n++;
			b += rd(&nd->cached_bytes);
		}
	ha_unlock(&registry_lock);
	errno = saved;
	*bytes = b;
	return n;
}

ha_tnode **ha_tcache_registry(void)
{
	return &registry;
}

void ha_tcache_sum(uint64_t out[6])
{
	for (int i = 0; i < 6; i++)
		out[i] = 0;
	ha_lock(&registry_lock);
	for (ha_tnode *nd = registry; nd; nd = nd->next)
		if (__atomic_load_n(&nd->live, __ATOMIC_ACQUIRE)) {
			out[0] += rd(&nd->alloc_bytes);
			out[1] += rd(&nd->net_bytes);
			out[2] += rd(&nd->big_bytes);
			out[3] += rd(&nd->cached_bytes);
			out[4] += rd(&nd->req_alloc_bytes);
			out[5] += rd(&nd->req_free_bytes);
		}
	ha_unlock(&registry_lock);
}

void ha_tcache_prefork(void)
{
	ha_lock(&registry_lock);
}

void ha_tcache_postfork(int child)
{
	if (!child) {
		ha_unlock(&registry_lock);
		return;
	}
	pthread_mutex_init(&registry_lock, NULL);
	/* Only the forking thread lives on: retire every other record (their
	 * cached objects are lost to the child, as with every thread-caching
	 * allocator).  The survivor's record gets its new tid. */
	if (child == HA_FORK_CHILD)
		for (ha_tnode *nd = registry; nd; nd = nd->next)
			if (nd->live && nd != ha_tc.node)
				retire_node(nd);
	if (ha_tc.node)
		ha_tc.node->tid = (int)syscall(SYS_gettid);
}
