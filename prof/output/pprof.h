/* prof/output/pprof.h — what the pprof writer's three files share (theirs only):
 *   mappings.c     the executable mappings of /proc/self/maps and their
 *                  GNU build IDs
 *   pprof.c        the encoder: samples, strings, mappings, locations
 *   pprof_named.c  in-process naming through the symboliser plugin, and
 *                  the served profile's three steps (ha_pprof_mem_named)
 * The public side (ha_pprof_file*, ha_pprof_mem_named) is in prof/prof.h.
 * Everything here lives in ha_dump_mem or raw memory, never the public
 * malloc.
 */
#ifndef HA_PROF_PPROF_H
#define HA_PROF_PPROF_H

#include "prof/prof.h"
#include "prof/pb.h"

/* ---- mappings.c ---------------------------------------------------------- */
#define HA_BUILD_ID_MAX 64

typedef struct ha_pmap {
	uintptr_t start, limit, offset;
	const char *path;         /* into the maps text, not terminated */
	size_t path_len;
	char perm_r, perm_x;
	uint64_t id;              /* mapping id, 0 when not executable */
	uint64_t path_str, bid_str;   /* string table indices, 0 none */
	unsigned char bid[HA_BUILD_ID_MAX];
	size_t bid_len;
} ha_pmap;

/* Read /proc/self/maps into mo (ha_dump_mem memory) and parse its lines
 * into *maps (ha_dump_mem, NULL when none), *nm of them; 0 or ENOMEM
 * (the caller frees what was set either way). */
int ha_mappings_read(ha_out *mo, ha_pmap **maps, size_t *nm);
/* Fill m's GNU build ID from its file's loaded ELF image (none: bid_len 0). */
void ha_mappings_build_id(const ha_pmap *maps, size_t nm, ha_pmap *m);
/* The executable mapping holding a: its index + 1, 0 none. */
size_t ha_mappings_find(const ha_pmap *maps, size_t nm, uintptr_t a);

/* ---- pprof.c ------------------------------------------------------------- */
/* Address -> location id (pprof.c's open-addressing table); by_id[id - 1]
 * is the address, in id order. */
typedef struct ha_loc_table {
	uintptr_t *addr;          /* slot -> address; 0 = empty */
	uint32_t *id;             /* slot -> id */
	uintptr_t *by_id;
	size_t mask, n;
	int err;                  /* ENOMEM once growing failed */
} ha_loc_table;

/* What the second half of the encoding (ha_pprof_tail) needs from the
 * first (ha_pprof_head): the memory map, its parse and the location
 * table.  ha_pprof_enc_free frees it. */
typedef struct ha_pprof_enc {
	ha_out mo;                /* /proc/self/maps text (maps[].path points into it) */
	ha_pmap *maps;
	size_t nm;
	ha_loc_table lt;
	uint64_t nstr;            /* strings written so far */
} ha_pprof_enc;

struct ha_pprof_names;
/* Encode the profile but its mappings, locations and functions into o
 * (memory), and hand e what ha_pprof_tail needs to add them (e must be
 * ha_pprof_enc_free'd in any case).  o->err on failure.  how: a served
 * profile's default sample type and window (NULL: a dump's). */
void ha_pprof_head(ha_out *o, int64_t r, const ha_lineset *set, const ha_pprof_how *how,
		   ha_pprof_enc *e);
/* The second half: mappings (with what their locations carry), locations
 * (with their lines when nm has names, else NULL) and the functions they
 * name. */
void ha_pprof_tail(ha_out *o, ha_pprof_enc *e, struct ha_pprof_names *nm);
void ha_pprof_enc_free(ha_pprof_enc *e);
/* Comment lines after the command's, NULL-ended: what a reader outside saw
 * while copying the tables (tools/profile.c); none in a process. */
#define HA_PPROF_NOTES 3
extern const char *ha_pprof_notes[HA_PPROF_NOTES];
/* Append message m (or string s[0..n)) as field `field` of the profile. */
void ha_pprof_emit(ha_out *o, unsigned field, const pb_buf *m);
void ha_pprof_emit_string(ha_out *o, const void *s, size_t n);

/* ---- pprof_named.c ------------------------------------------------------- */
/* Names of the locations, from the symboliser plugin: location k's lines
 * are fn/line[first[k] .. first[k + 1]), innermost first; flag[i] says
 * what mapping i's locations carry.  Raw memory. */
enum { HA_NAMED_FN = 1, HA_NAMED_DWARF = 2 };
struct ha_sym_ops;
typedef struct ha_pprof_names {
	const struct ha_sym_ops *ops;
	uint32_t *first, *fn, *line;
	size_t n, cap;
	unsigned char *flag;
	uint32_t nfn, nstr;       /* the plugin's id counts after the lookups */
	uint64_t *str_at;         /* plugin string id -> profile string index, 0 not yet */
	unsigned char *fn_done;   /* plugin function id -> written */
} ha_pprof_names;
/* Ready nm for writing (its string and function books); 0 or ENOMEM. */
int ha_pprof_names_ready(ha_pprof_names *nm);
/* Add location k's lines to its message m and write the functions they
 * name that are not written yet. */
void ha_pprof_names_lines(ha_out *o, ha_pprof_enc *e, ha_pprof_names *nm, size_t k,
			  pb_buf *m);

#endif
