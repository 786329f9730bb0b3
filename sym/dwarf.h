/* sym/dwarf.h — names for the code addresses of one ELF file (sym/dwarf.c):
 * the lookup core of heapalloc-symbolize and of libheapalloc-sym.so.
 * Needs libdw, libelf and libiberty; never included by alloc/ or prof/.
 */
#ifndef HA_SYM_DWARF_H
#define HA_SYM_DWARF_H

#include <stdint.h>

typedef struct ha_dw ha_dw;       /* one ELF file opened for lookups */

/* One frame of an address: the out-of-line function or one inlined into
 * it.  The strings belong to the ha_dw and live until ha_dw_close. */
typedef struct ha_dw_frame {
	const char *sym;          /* its symbol (mangled) or DWARF name; NULL unknown */
	const char *file;         /* source file; NULL unknown */
	int line;                 /* line in file; 0 unknown */
	int decl_line;            /* the line declaring the function; 0 unknown */
} ha_dw_frame;

/* Open the ELF file on fd, which is the ha_dw's from now on (closed on
 * failure too); path names it for finding separate debug info (its
 * .gnu_debuglink directory, /usr/lib/debug) and in messages.  Its module
 * addresses are link-time addresses.  NULL with errno on failure. */
ha_dw *ha_dw_open(int fd, const char *path);
void ha_dw_close(ha_dw *d);
/* The file's GNU build ID in lowercase hex, "" when it has none. */
const char *ha_dw_build_id(const ha_dw *d);
/* Whether the file or its separate debug file has DWARF. */
int ha_dw_has_dwarf(ha_dw *d);
/* Link-time address of the start of a mapping of the file at file offset
 * `offset` (from its PT_LOAD segments).  0, or -1 when no segment holds it. */
int ha_dw_link_start(ha_dw *d, uint64_t offset, uint64_t *out);
/* The frames of link-time address a, innermost first, at most max (up to
 * 64 are found): the function DWARF says holds a and the functions inlined
 * into it there, each with the file:line it is at; without DWARF the
 * symbol table's function.  Returns the count, 0 when nothing names a.
 * *dwarf is set to 1 when DWARF covered a.  The first lookup indexes the
 * file's compile units; a unit's functions are listed the first time an
 * address lands in it. */
int ha_dw_lookup(ha_dw *d, uint64_t a, ha_dw_frame *out, int max, int *dwarf);
/* A demangled copy of a C++ or Rust (legacy and v0) symbol, from malloc;
 * NULL when s is not a mangled name (or out of memory). */
char *ha_dw_demangle(const char *s);

#endif
