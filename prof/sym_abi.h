/* prof/sym_abi.h — the interface between the profiler (prof/output/sym_loader.c) and
 * its symboliser plugin libheapalloc-sym.so (sym/plugin.c), which prof/
 * dlopens only when a profile with names is asked for, so libdw is never
 * a link dependency of libheapalloc.  Plain C types only: both sides
 * include it, neither includes the other's headers.
 *
 * Calls come from one thread at a time (prof/output/sym_loader.c's lock), with the
 * thread's profiling suppressed (ha_prof_busy), never from inside malloc.
 * Ids are the plugin's and stay valid while it is loaded (forget resets
 * them): a function id names (name, system name, file, start line) as
 * string ids; a string id names bytes the plugin keeps.
 */
#ifndef HA_PROF_SYM_ABI_H
#define HA_PROF_SYM_ABI_H

#include <stddef.h>
#include <stdint.h>

#define HA_SYM_ABI 1
#define HA_SYM_PLUGIN "libheapalloc-sym.so"
#define HA_SYM_ENTRY "heapalloc_sym_ops"

/* One executable mapping of the process, as /proc/self/maps shows it. */
typedef struct ha_sym_map {
	uintptr_t start, limit, offset;
	const char *path;         /* not terminated; may end in " (deleted)" */
	size_t path_len;
	const unsigned char *bid; /* GNU build ID read from memory; bid_len 0: none */
	size_t bid_len;
} ha_sym_map;

typedef struct ha_sym_ops {
	int abi;                  /* HA_SYM_ABI */
	/* A profile starts; maps are the process's executable mappings now.
	 * What the plugin holds for mappings no longer there is dropped. */
	void (*begin)(const ha_sym_map *maps, size_t n);
	/* The frames of address a in mapping m (one of begin's), innermost
	 * first, at most max: fn[i] function ids, line[i] line numbers (0
	 * unknown).  Returns the count, 0 when nothing names a.  *dwarf is 1
	 * when the mapping's file has file:line and inline information. */
	int (*lookup)(const ha_sym_map *m, uintptr_t a, uint32_t *fn, uint32_t *line, int max,
		      int *dwarf);
	/* Function fn's name, system (mangled) name and file as string ids
	 * (0: none), and its start line. */
	void (*function)(uint32_t fn, uint32_t str[3], uint32_t *start_line);
	/* The bytes of string id s (1 .. nstr). */
	const char *(*string)(uint32_t s, size_t *len);
	/* How many function and string ids exist (the largest id of each). */
	void (*counts)(uint32_t *nfn, uint32_t *nstr);
	/* A forked child whose parent was inside the plugin: drop every
	 * reference without freeing (the state may be half-updated). */
	void (*forget)(void);
} ha_sym_ops;

/* The plugin's one exported symbol. */
typedef const ha_sym_ops *(*ha_sym_entry_fn)(void);

#endif
