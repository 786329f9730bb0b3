/* prof/remote.c — heapalloc_root: the one object a reader outside the
 * process looks up (by name, in the library's or the program's symbol
 * table) to find the stack table and the books (`heapalloc dump PID`).
 *
 * Owns the root (layout: prof/root.h; the protocol: docs/reference.md,
 * "Reading a process from outside").  Its fixed part is filled once, by
 * the constructor; its session part is copied by every start and stop,
 * between ha_remote_begin (seq odd) and ha_remote_end (seq even), which
 * run under ha_prof_dump_lock.  The root is plain data: nothing here runs
 * when a reader reads, nothing ever waits for one.  Never allocates.
 */
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "prof/session.h"
#include "prof/root.h"
#include "config.h"

HA_EXPORT struct ha_root heapalloc_root = {
	.magic = HA_ROOT_MAGIC,
	.layout = HA_ROOT_LAYOUT,
	.size = sizeof(struct ha_root),
	.version = PACKAGE_VERSION,
};

_Static_assert(sizeof HA_ROOT_MAGIC - 1 == sizeof heapalloc_root.magic, "8-byte magic");
_Static_assert(sizeof PACKAGE_VERSION <= sizeof heapalloc_root.version, "version fits");

static void copy_session(void)
{
	struct ha_root_session *s = &heapalloc_root.session;
	s->running = (uint64_t)ha_session.running;
	s->flags = (ha_session.background ? HA_ROOT_BACKGROUND : 0) |
		   (ha_session.running && !ha_session.nofiles ? HA_ROOT_FILES : 0) |
		   (ha_session.compat ? HA_ROOT_COMPAT : 0) |
		   (ha_prof_opt.calibrate ? HA_ROOT_CALIBRATE : 0);
	s->rate = ha_prof_rate();
	memcpy(s->base, ha_session.base, sizeof s->base);
	memcpy(s->base_req, ha_session.base_req, sizeof s->base_req);
	s->rec = (uint64_t)(uintptr_t)ha_session.rec;
	s->samples = (uint64_t)(uintptr_t)&ha_session.samples;
	s->gen = ha_session.gen;
	heapalloc_root.pid = (uint64_t)getpid();
}

void ha_remote_init(void)
{
	ha_table_root(&heapalloc_root.table);
	ha_objmap_root(&heapalloc_root.objmap);
	ha_books_layout b;
	ha_alloc_books_layout(&b);
	struct ha_root_books *r = &heapalloc_root.books;
	r->registry = b.registry;
	r->retired = b.retired;
	r->own = b.own;
	r->node_size = b.node_size;
	r->node_next = b.node_next;
	r->node_live = b.node_live;
	r->node_alloc = b.node_alloc;
	r->node_net = b.node_net;
	r->node_big = b.node_big;
	r->node_cached = b.node_cached;
	r->node_req_alloc = b.node_req_alloc;
	r->node_req_free = b.node_req_free;
	heapalloc_root.meta.ranges = (uint64_t)(uintptr_t)ha_meta_ranges;
	heapalloc_root.meta.count = (uint64_t)(uintptr_t)&ha_meta_nranges;
	heapalloc_root.meta.max = HA_META_RANGES;
	ha_remote_begin();
	ha_remote_end();
}

void ha_remote_begin(void)
{
	uint64_t s = __atomic_load_n(&heapalloc_root.seq, __ATOMIC_RELAXED);
	if (!(s & 1))
		__atomic_store_n(&heapalloc_root.seq, s + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);   /* odd before any change */
}

void ha_remote_end(void)
{
	copy_session();
	uint64_t s = __atomic_load_n(&heapalloc_root.seq, __ATOMIC_RELAXED);
	/* even after every change (a release store: the reader that sees it
	 * sees them) */
	__atomic_store_n(&heapalloc_root.seq, (s | 1) + 1, __ATOMIC_RELEASE);
}
