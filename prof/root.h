/* prof/root.h — the root a reader outside the process starts from: the
 * layout of the exported object `heapalloc_root` (prof/serve/remote.c fills it).
 *
 * Layout version 1.  Every field is little-endian (the machine's order) at
 * a fixed offset; addresses are the target's.  The structures the root
 * points to are described by offsets stored in the root, so that a reader
 * never assumes a struct layout of ours.  docs/reference.md ("Reading a
 * process from outside") is what a third-party reader needs: the fields,
 * the read protocol and what is seen mid-change.  Only ever grown at its
 * end within one layout version; any other change bumps HA_ROOT_LAYOUT.
 */
#ifndef HA_PROF_ROOT_H
#define HA_PROF_ROOT_H

#include <stdint.h>

#define HA_ROOT_MAGIC "HEAPALOC"   /* 8 bytes, no terminator */
#define HA_ROOT_LAYOUT 1

/* The stack table (stack_table.c). */
struct ha_root_table {
	uint64_t index;           /* address of the variable holding the bucket
				   * index (ha_bucket *[max], filled in order) */
	uint64_t count;           /* address of the uint64_t bucket count */
	uint64_t chunks;          /* address of the head of the chunk list */
	uint64_t drops;           /* address of the uint64_t drop count */
	uint32_t max;             /* buckets at most */
	uint32_t depth_max;       /* frames per bucket at most */
	uint32_t chunk_bytes;     /* a chunk's size */
	uint16_t chunk_next, chunk_used, chunk_mem;   /* offsets in a chunk */
	uint16_t b_size;          /* a bucket's header; pcs follow at b_pcs */
	uint16_t b_hash, b_alloc_count, b_alloc_bytes, b_free_count, b_free_bytes;
	uint16_t b_skey, b_depth, b_idx, b_pcs;   /* skey, depth: uint16_t; idx uint32_t */
	uint16_t b_life;          /* uint64_t[life_bins]: bytes of freed samples by
				   * lifetime (prof/capture/ages.c's bins); 0: none */
	uint16_t life_bins;
	uint16_t pad_;
};

/* The live-sample map (object_map.c): stripes of open-addressing slots,
 * {uint64_t key = address >> 4 | bucket index << 44, uint64_t bytes,
 * uint64_t at offset slot_time: allocated at (CLOCK_MONOTONIC ns) in bits
 * 0-62; bit 63 set when the allocator keeps the sample's record (the slot
 * is its time and the bytes asked for, not the bytes counted; its bucket
 * counts it all the same)}. */
struct ha_root_objmap {
	uint64_t stripes;         /* address of the stripe array */
	uint32_t nstripes, stripe_size;
	uint16_t s_slots, s_n, s_used;   /* offsets: slot *, size_t, size_t */
	uint16_t slot_size, addr_bits;
	uint16_t slot_time;       /* 0: slots without a time */
};

/* The session: copied here at every start and stop, under seq. */
struct ha_root_session {
	uint64_t running;         /* 1 while sampling */
	uint64_t flags;           /* HA_ROOT_* below */
	int64_t rate;             /* mean sampling interval; <= 1: every allocation */
	uint64_t base[2];         /* the books at the start: allocated, in use */
	uint64_t base_req[2];     /* compatibility mode: requested bytes */
	uint64_t rec;             /* address of uint64_t[2]: bytes recorded and
				   * freed when rate <= 1 (not compatibility) */
	uint64_t samples;         /* address of the uint64_t sample count */
	uint64_t gen;             /* bumped by every start */
};
#define HA_ROOT_BACKGROUND 1      /* the always-on sampling: nothing was set */
#define HA_ROOT_FILES 2           /* HEAPPROFILE or the API: dumps on disk */
#define HA_ROOT_COMPAT 4          /* HEAP_PROFILE_EXACT_TOTALS */
#define HA_ROOT_CALIBRATE 8       /* HEAP_PROFILE_CALIBRATE (the default) */

/* The books (alloc/books.c; alloc/hooks.h, ha_books_layout). */
struct ha_root_books {
	uint64_t registry, retired, own;
	uint16_t node_size, node_next, node_live, node_alloc, node_net, node_big,
		 node_cached, node_req_alloc, node_req_free;
	uint16_t pad_[3];
};

/* The allocator's own records (alloc/hooks.h, ha_meta_ranges), which a
 * leak scan skips: {uint64_t lo, hi} entries, the count stored after its
 * entry (read the count, then that many entries).  Since 0.1.0's second
 * root: a reader finds it when the root's size covers it. */
struct ha_root_meta {
	uint64_t ranges;          /* address of the entry array */
	uint64_t count;           /* address of the uint64_t entry count */
	uint32_t max;             /* entries at most */
	uint32_t pad_;
};

struct ha_root {
	char magic[8];            /* HA_ROOT_MAGIC */
	uint32_t layout;          /* HA_ROOT_LAYOUT */
	uint32_t size;            /* sizeof(struct ha_root) */
	char version[32];         /* heapalloc's version, NUL-terminated */
	uint64_t seq;             /* even: the session part is whole; odd: a
				   * start or stop is changing it and the table */
	uint64_t pid;             /* the process that filled the root */
	struct ha_root_session session;
	struct ha_root_table table;
	struct ha_root_objmap objmap;
	struct ha_root_books books;
	struct ha_root_meta meta;
};

#endif
