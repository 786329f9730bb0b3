/* prof/serve/remote.c — heapalloc_root: the one object a reader outside the
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

#include "prof/session/session.h"
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

/* Layout 1 as readers outside know it (docs/reference.md's table, and
 * every reader built against an older root.h): each field's offset and
 * width, each part's size.  A field inserted, widened or moved fails here
 * instead of being misread silently; growing the root at its end adds rows
 * and changes only the root's size (a reader takes what `size` covers);
 * anything else is a new HA_ROOT_LAYOUT.  The Python reader's offsets are
 * generated from root.h at build time (tools/gen-layout, tools/ha_layout.py). */
#define AT(type, field, off, width)                                              \
	_Static_assert(offsetof(struct type, field) == (off) &&                  \
		       sizeof ((struct type *)0)->field == (width),              \
		       #type "." #field ": layout 1 has it at " #off ", " #width " bytes")
#define SIZE(type, n) _Static_assert(sizeof(struct type) == (n), #type ": layout 1 size " #n)
AT(ha_root, magic, 0, 8);          AT(ha_root, layout, 8, 4);
AT(ha_root, size, 12, 4);          AT(ha_root, version, 16, 32);
AT(ha_root, seq, 48, 8);           AT(ha_root, pid, 56, 8);
AT(ha_root, session, 64, 80);      AT(ha_root, table, 144, 80);
AT(ha_root, objmap, 224, 32);      AT(ha_root, books, 256, 48);
AT(ha_root, meta, 304, 24);        SIZE(ha_root, 328);

AT(ha_root_session, running, 0, 8);   AT(ha_root_session, flags, 8, 8);
AT(ha_root_session, rate, 16, 8);     AT(ha_root_session, base, 24, 16);
AT(ha_root_session, base_req, 40, 16); AT(ha_root_session, rec, 56, 8);
AT(ha_root_session, samples, 64, 8);  AT(ha_root_session, gen, 72, 8);
SIZE(ha_root_session, 80);

AT(ha_root_table, index, 0, 8);       AT(ha_root_table, count, 8, 8);
AT(ha_root_table, chunks, 16, 8);     AT(ha_root_table, drops, 24, 8);
AT(ha_root_table, max, 32, 4);        AT(ha_root_table, depth_max, 36, 4);
AT(ha_root_table, chunk_bytes, 40, 4); AT(ha_root_table, chunk_next, 44, 2);
AT(ha_root_table, chunk_used, 46, 2); AT(ha_root_table, chunk_mem, 48, 2);
AT(ha_root_table, b_size, 50, 2);     AT(ha_root_table, b_hash, 52, 2);
AT(ha_root_table, b_alloc_count, 54, 2); AT(ha_root_table, b_alloc_bytes, 56, 2);
AT(ha_root_table, b_free_count, 58, 2); AT(ha_root_table, b_free_bytes, 60, 2);
AT(ha_root_table, b_skey, 62, 2);     AT(ha_root_table, b_depth, 64, 2);
AT(ha_root_table, b_idx, 66, 2);      AT(ha_root_table, b_pcs, 68, 2);
AT(ha_root_table, b_life, 70, 2);     AT(ha_root_table, life_bins, 72, 2);
AT(ha_root_table, pad_, 74, 2);       SIZE(ha_root_table, 80);

AT(ha_root_objmap, stripes, 0, 8);    AT(ha_root_objmap, nstripes, 8, 4);
AT(ha_root_objmap, stripe_size, 12, 4); AT(ha_root_objmap, s_slots, 16, 2);
AT(ha_root_objmap, s_n, 18, 2);       AT(ha_root_objmap, s_used, 20, 2);
AT(ha_root_objmap, slot_size, 22, 2); AT(ha_root_objmap, addr_bits, 24, 2);
AT(ha_root_objmap, slot_time, 26, 2); SIZE(ha_root_objmap, 32);

AT(ha_root_books, registry, 0, 8);    AT(ha_root_books, retired, 8, 8);
AT(ha_root_books, own, 16, 8);        AT(ha_root_books, node_size, 24, 2);
AT(ha_root_books, node_next, 26, 2);  AT(ha_root_books, node_live, 28, 2);
AT(ha_root_books, node_alloc, 30, 2); AT(ha_root_books, node_net, 32, 2);
AT(ha_root_books, node_big, 34, 2);   AT(ha_root_books, node_cached, 36, 2);
AT(ha_root_books, node_req_alloc, 38, 2); AT(ha_root_books, node_req_free, 40, 2);
AT(ha_root_books, pad_, 42, 6);       SIZE(ha_root_books, 48);

AT(ha_root_meta, ranges, 0, 8);       AT(ha_root_meta, count, 8, 8);
AT(ha_root_meta, max, 16, 4);         AT(ha_root_meta, pad_, 20, 4);
SIZE(ha_root_meta, 24);
#undef AT
#undef SIZE

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
