/* sym/dwarf.c — names for the code addresses of one ELF file: function,
 * file:line and the chain of inlined frames, innermost first.
 *
 * The lookup core shared by heapalloc-symbolize (tools/symbolize.c, offline)
 * and libheapalloc-sym.so (sym/plugin.c, loaded into a profiled process
 * only when a profile with names is asked for).  elfutils' libdwfl and libdw
 * for ELF and DWARF, libiberty for demangling; never linked into
 * libheapalloc itself.  Every allocation failure is reported (NULL or -1)
 * or degrades the answer, never exits: this code may run inside the
 * profiled program.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <gelf.h>
#include <libiberty/demangle.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sym/dwarf.h"

/* Make room for one more element of arr (n used of cap); 0, or -1 when
 * out of memory (arr left as it was). */
static int grow(void **arr, size_t n, size_t *cap, size_t size)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? 2 * *cap : 16;
	void *p = realloc(*arr, c * size);
	if (!p)
		return -1;
	*arr = p;
	*cap = c;
	return 0;
}
#define GROW(arr, n, cap) grow((void **)&(arr), (n), &(cap), sizeof *(arr))

char *ha_dw_demangle(const char *s)
{
	return cplus_demangle(s, DMGL_AUTO | DMGL_ANSI);
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static void module_build_id(Dwfl_Module *mod, char *out, size_t cap)
{
	const unsigned char *bits;
	GElf_Addr vaddr;
	int n = dwfl_module_build_id(mod, &bits, &vaddr);
	out[0] = 0;
	for (int i = 0; i > -1 && i < n && 2 * (size_t)i + 2 < cap; i++)
		sprintf(out + 2 * i, "%02x", bits[i]);
}

static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
};


/* The DWARF index of one binary ----------------------------------------------
 *
 * Addresses are found through each compile unit's own ranges (DW_AT_low_pc /
 * high_pc / DW_AT_ranges), never through .debug_aranges alone (a binary may
 * lack it, and libdw 0.188 then finds no unit), and functions through the
 * unit's tree: libdw 0.188's dwarf_getscopes prunes every DIE that does not
 * hold the address, DW_TAG_namespace included, where rustc nests every
 * function.  The CU list is built once per binary; a CU's sorted list of
 * out-of-line functions (DW_TAG_subprogram with code, at any depth) when an
 * address first lands in it; the lists across all CUs only when a name
 * needs them (an inlined function without a linkage name). */

struct bare;
typedef struct span { uint64_t lo, hi; size_t i; } span;   /* [lo, hi) -> index */
typedef struct fnspan { uint64_t lo, hi; Dwarf_Off die, origin; } fnspan;
typedef struct cu_rec {
	Dwarf_Die die;            /* the unit's DIE, for its line table */
	Dwarf_Die body;           /* where its functions are (a split unit's own DIE) */
	fnspan *fns; size_t nfns, cfns;   /* sorted by lo once built */
	int built;
} cu_rec;
typedef struct dw_index {
	Dwarf *dw;
	Dwarf_Addr bias;          /* module address = DWARF address + bias */
	cu_rec *cus; size_t ncus, ccus;
	span *cuspans; size_t ncuspans, ccuspans;
	fnspan *byorigin; size_t nbyorigin;   /* concrete copies of abstract DIEs */
	struct bare *bare; size_t nbare;      /* DWARF name -> the one symbol it has */
	int origins_built, bare_built;
} dw_index;

/* An out-of-line function known by a bare DWARF name and a mangled symbol. */
typedef struct bare { const char *name, *sym; Dwarf_Off die; } bare;

static int span_cmp(const void *a, const void *b)
{
	const span *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int fnspan_cmp(const void *a, const void *b)
{
	const fnspan *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : x->hi < y->hi ? -1 : x->hi > y->hi;
}

static int origin_cmp(const void *a, const void *b)
{
	const fnspan *x = a, *y = b;
	return x->origin < y->origin ? -1 : x->origin > y->origin;
}

static void index_open(dw_index *ix, Dwfl_Module *mod)
{
	memset(ix, 0, sizeof *ix);
	ix->dw = dwfl_module_getdwarf(mod, &ix->bias);
	if (!ix->dw)
		return;
	Dwarf_CU *cu = NULL, *next;
	Dwarf_Half version;
	uint8_t type;
	Dwarf_Die cudie, subdie;
	while (dwarf_get_units(ix->dw, cu, &next, &version, &type, &cudie, &subdie) == 0) {
		cu = next;
		if (type == DW_UT_type || type == DW_UT_split_type)
			continue;
		if (GROW(ix->cus, ix->ncus, ix->ccus))
			break;        /* out of memory: the units so far */
		cu_rec *c = &ix->cus[ix->ncus];
		c->die = cudie;
		c->body = type == DW_UT_skeleton && dwarf_tag(&subdie) == DW_TAG_compile_unit ? subdie : cudie;
		c->fns = NULL;
		c->nfns = c->cfns = 0;
		c->built = 0;
		Dwarf_Addr base, lo, hi;
		ptrdiff_t off = 0;
		while ((off = dwarf_ranges(&cudie, off, &base, &lo, &hi)) > 0) {
			if (hi <= lo)
				continue;
			if (GROW(ix->cuspans, ix->ncuspans, ix->ccuspans))
				break;   /* .debug_aranges finds the rest */
			ix->cuspans[ix->ncuspans++] = (span){ lo, hi, ix->ncus };
		}
		ix->ncus++;
	}
	if (ix->ncuspans)
		qsort(ix->cuspans, ix->ncuspans, sizeof *ix->cuspans, span_cmp);
}

static void index_close(dw_index *ix)
{
	for (size_t i = 0; i < ix->ncus; i++)
		free(ix->cus[i].fns);
	free(ix->cus);
	free(ix->cuspans);
	free(ix->byorigin);
	free(ix->bare);
}

/* Every subprogram with code under d, nested functions left to their parent. */
static void collect_fns(cu_rec *c, Dwarf_Die *d)
{
	Dwarf_Die child;
	if (dwarf_child(d, &child) != 0)
		return;
	do {
		int tag = dwarf_tag(&child);
		if (tag == DW_TAG_subprogram) {
			Dwarf_Attribute a;
			Dwarf_Die org;
			Dwarf_Off origin = 0;
			if (dwarf_attr(&child, DW_AT_abstract_origin, &a) && dwarf_formref_die(&a, &org))
				origin = dwarf_dieoffset(&org);
			Dwarf_Addr base, lo, hi;
			ptrdiff_t off = 0;
			while ((off = dwarf_ranges(&child, off, &base, &lo, &hi)) > 0) {
				if (hi <= lo)
					continue;
				if (GROW(c->fns, c->nfns, c->cfns))
					break;
				c->fns[c->nfns++] = (fnspan){ lo, hi, dwarf_dieoffset(&child), origin };
			}
		} else if (dwarf_haschildren(&child) > 0 && tag != DW_TAG_member &&
			   tag != DW_TAG_formal_parameter && tag != DW_TAG_variable) {
			collect_fns(c, &child);   /* namespaces, types holding methods */
		}
	} while (dwarf_siblingof(&child, &child) == 0);
}

static void build_cu(cu_rec *c)
{
	if (c->built)
		return;
	c->built = 1;
	collect_fns(c, &c->body);
	if (c->nfns)
		qsort(c->fns, c->nfns, sizeof *c->fns, fnspan_cmp);
}

/* Every unit's functions, and the out-of-line copies of inlined ones by
 * their abstract DIE (which LTO may put in another unit). */
static void build_origins(dw_index *ix)
{
	if (ix->origins_built)
		return;
	ix->origins_built = 1;
	size_t n = 0;
	for (size_t i = 0; i < ix->ncus; i++) {
		build_cu(&ix->cus[i]);
		for (size_t k = 0; k < ix->cus[i].nfns; k++)
			n += ix->cus[i].fns[k].origin != 0;
	}
	ix->byorigin = malloc((n ? n : 1) * sizeof *ix->byorigin);
	if (!ix->byorigin)
		return;
	for (size_t i = 0; i < ix->ncus; i++)
		for (size_t k = 0; k < ix->cus[i].nfns; k++)
			if (ix->cus[i].fns[k].origin)
				ix->byorigin[ix->nbyorigin++] = ix->cus[i].fns[k];
	qsort(ix->byorigin, ix->nbyorigin, sizeof *ix->byorigin, origin_cmp);
}

/* The CU holding DWARF address a: its own ranges, else .debug_aranges. */
static cu_rec *cu_at(dw_index *ix, uint64_t a)
{
	size_t lo = 0, hi = ix->ncuspans;
	while (lo < hi) {          /* last span starting at or below a */
		size_t mid = (lo + hi) / 2;
		if (ix->cuspans[mid].lo <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t k = lo; k-- > 0 && k + 8 >= lo;)   /* CUs rarely overlap */
		if (a < ix->cuspans[k].hi)
			return &ix->cus[ix->cuspans[k].i];
	Dwarf_Die d;
	if (ix->dw && dwarf_addrdie(ix->dw, a, &d)) {
		Dwarf_Off off = dwarf_dieoffset(&d);
		for (size_t i = 0; i < ix->ncus; i++)
			if (dwarf_dieoffset(&ix->cus[i].die) == off)
				return &ix->cus[i];
	}
	return NULL;
}

/* The innermost out-of-line function holding a (nested ranges: the last,
 * tightest start wins). */
static int fn_at(dw_index *ix, cu_rec *c, uint64_t a, Dwarf_Die *out)
{
	size_t lo = 0, hi = c->nfns;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (c->fns[mid].lo <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t k = lo; k-- > 0 && k + 64 >= lo;)
		if (a < c->fns[k].hi)
			return dwarf_offdie(ix->dw, c->fns[k].die, out) ? 0 : -1;
	return -1;
}

/* An out-of-line copy of the abstract function at offset origin. */
static int concrete_of(dw_index *ix, Dwarf_Off origin, uint64_t *entry)
{
	size_t lo = 0, hi = ix->nbyorigin;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (ix->byorigin[mid].origin < origin)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == ix->nbyorigin || ix->byorigin[lo].origin != origin)
		return -1;
	Dwarf_Die d;
	Dwarf_Addr pc;
	if (!dwarf_offdie(ix->dw, ix->byorigin[lo].die, &d) || dwarf_entrypc(&d, &pc) != 0)
		return -1;
	*entry = pc;
	return 0;
}

/* The mangled name of the symbol that starts exactly at DWARF address pc
 * (a C symbol says no more than the DIE's own name, and may carry a
 * version: __libc_start_main@@GLIBC_2.34). */
static const char *symbol_at(Dwfl_Module *mod, dw_index *ix, uint64_t pc)
{
	GElf_Off off;
	GElf_Sym sym;
	const char *s = dwfl_module_addrinfo(mod, pc + ix->bias, &off, &sym, NULL, NULL, NULL);
	return s && off == 0 && (strncmp(s, "_Z", 2) == 0 || strncmp(s, "_R", 2) == 0) ? s : NULL;
}

static int bare_cmp(const void *a, const void *b)
{
	const bare *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->sym, y->sym);
}

/* Out-of-line functions without a linkage name, by DWARF name; a name two
 * symbols share is dropped. */
static void build_bare(Dwfl_Module *mod, dw_index *ix)
{
	if (ix->bare_built)
		return;
	ix->bare_built = 1;
	build_origins(ix);
	size_t n = 0, cap = 0;
	for (size_t i = 0; i < ix->ncus; i++)
		for (size_t k = 0; k < ix->cus[i].nfns; k++) {
			const fnspan *f = &ix->cus[i].fns[k];
			Dwarf_Die d;
			Dwarf_Attribute a;
			Dwarf_Addr pc;
			const char *name, *sym;
			if (f->origin || !dwarf_offdie(ix->dw, f->die, &d) ||
			    dwarf_attr_integrate(&d, DW_AT_linkage_name, &a) || !(name = dwarf_diename(&d)) ||
			    dwarf_entrypc(&d, &pc) != 0 || pc != f->lo || !(sym = symbol_at(mod, ix, pc)))
				continue;      /* (one entry per function, not per range) */
			if (GROW(ix->bare, n, cap))
				break;
			ix->bare[n++] = (bare){ name, sym, f->die };
		}
	if (n)
		qsort(ix->bare, n, sizeof *ix->bare, bare_cmp);
	size_t w = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i + 1, syms = 1;
		for (; j < n && strcmp(ix->bare[j].name, ix->bare[i].name) == 0; j++)
			syms += strcmp(ix->bare[j].sym, ix->bare[j - 1].sym) != 0;
		if (syms == 1)
			ix->bare[w++] = ix->bare[i];
		i = j;
	}
	ix->nbare = w;
}

/* Whether the out-of-line function at DIE offset off has code of its own
 * (not inlined into it directly) at file:line. */
static int own_line(dw_index *ix, Dwarf_Off off, const char *file, int line)
{
	Dwarf_Die d, cu, child;
	Dwarf_Lines *lines;
	size_t nl;
	Dwarf_Addr lo, hi;
	if (!file || line <= 0 || !dwarf_offdie(ix->dw, off, &d) || !dwarf_diecu(&d, &cu, NULL, NULL) ||
	    dwarf_lowpc(&d, &lo) != 0 || dwarf_highpc(&d, &hi) != 0 ||
	    dwarf_getsrclines(&cu, &lines, &nl) != 0)
		return 0;
	for (size_t i = 0; i < nl; i++) {
		Dwarf_Line *ln = dwarf_onesrcline(lines, i);
		Dwarf_Addr a;
		int l;
		const char *f;
		if (!ln || dwarf_lineaddr(ln, &a) != 0 || a < lo || a >= hi ||
		    dwarf_lineno(ln, &l) != 0 || l != line || !(f = dwarf_linesrc(ln, NULL, NULL)) ||
		    strcmp(f, file) != 0)
			continue;
		int inlined = 0;
		if (dwarf_child(&d, &child) == 0)
			do
				inlined = dwarf_tag(&child) == DW_TAG_inlined_subroutine && dwarf_haspc(&child, a) > 0;
			while (!inlined && dwarf_siblingof(&child, &child) == 0);
		if (!inlined)
			return 1;
	}
	return 0;
}

/* One name per function, the one its symbol has: the DIE's linkage name;
 * without one (rustc's line-tables-only keeps bare names such as "main"
 * with no crate path), the symbol at the function's entry, or at the entry
 * of an out-of-line copy of an inlined function: the DIE its abstract origin
 * names, else (line-tables-only keeps no such link) the one function of
 * the same DWARF name whose own code has the frame's file:line; else the
 * DWARF name. */
static const char *die_name(Dwfl_Module *mod, dw_index *ix, Dwarf_Die *d, int mangles,
			    const char *file, int line)
{
	Dwarf_Attribute a;
	const char *s = NULL;
	if (dwarf_attr_integrate(d, DW_AT_linkage_name, &a) ||
	    dwarf_attr_integrate(d, DW_AT_MIPS_linkage_name, &a))
		s = dwarf_formstring(&a);
	if (s || !mangles)
		return s ? s : dwarf_diename(d) ? dwarf_diename(d) :
		       dwarf_attr_integrate(d, DW_AT_name, &a) ? dwarf_formstring(&a) : NULL;
	Dwarf_Addr pc;
	if (dwarf_tag(d) == DW_TAG_subprogram && dwarf_entrypc(d, &pc) == 0 &&
	    (s = symbol_at(mod, ix, pc)))
		return s;
	Dwarf_Die org;
	if (dwarf_attr(d, DW_AT_abstract_origin, &a) && dwarf_formref_die(&a, &org)) {
		uint64_t entry;
		build_origins(ix);
		if (concrete_of(ix, dwarf_dieoffset(&org), &entry) == 0 && (s = symbol_at(mod, ix, entry)))
			return s;
	}
	s = dwarf_diename(d);
	if (!s && dwarf_attr_integrate(d, DW_AT_name, &a))   /* through abstract_origin */
		s = dwarf_formstring(&a);
	if (s && dwarf_tag(d) == DW_TAG_inlined_subroutine) {
		build_bare(mod, ix);
		bare want = { s, "", 0 };
		size_t lo = 0, hi = ix->nbare;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (bare_cmp(&ix->bare[mid], &want) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < ix->nbare && strcmp(ix->bare[lo].name, s) == 0 &&
		    own_line(ix, ix->bare[lo].die, file, line))
			return ix->bare[lo].sym;
	}
	return s;
}

static int mangles(Dwarf_Die *cu)
{
	switch (dwarf_srclang(cu)) {
	case DW_LANG_C89: case DW_LANG_C: case DW_LANG_C99: case DW_LANG_C11:
		return 0;
	}
	return 1;
}

struct ha_dw {
	Dwfl *dwfl;
	Dwfl_Module *mod;
	dw_index ix;
	int indexed;
	char bid[130];
};

ha_dw *ha_dw_open(int fd, const char *path)
{
	ha_dw *d = calloc(1, sizeof *d);
	if (!d || !(d->dwfl = dwfl_begin(&callbacks))) {
		free(d);
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	dwfl_report_begin(d->dwfl);
	/* base 0 with p_vaddr added: module addresses are link-time addresses
	 * for ET_DYN and ET_EXEC alike; the bias is applied by the caller */
	d->mod = dwfl_report_elf(d->dwfl, base_name(path), path, fd, 0, true);
	dwfl_report_end(d->dwfl, NULL, NULL);
	if (!d->mod) {
		dwfl_end(d->dwfl);   /* libdwfl closes fd only once it owns it */
		close(fd);
		free(d);
		errno = ENOEXEC;
		return NULL;
	}
	GElf_Addr b;
	dwfl_module_getelf(d->mod, &b);
	module_build_id(d->mod, d->bid, sizeof d->bid);
	return d;
}

void ha_dw_close(ha_dw *d)
{
	if (!d)
		return;
	if (d->indexed)
		index_close(&d->ix);
	dwfl_end(d->dwfl);
	free(d);
}

const char *ha_dw_build_id(const ha_dw *d)
{
	return d->bid;
}

int ha_dw_has_dwarf(ha_dw *d)
{
	Dwarf_Addr bias;
	return dwfl_module_getdwarf(d->mod, &bias) != NULL;
}

/* Link-time address of the mapping's start, from the PT_LOAD that holds
 * its file offset.  The kernel maps a segment from its p_offset rounded
 * down to a page, so with lld's layout the page the text segment starts
 * in also holds the end of the read-only segment before it: look first for
 * an executable segment starting in that page, then any segment starting
 * there, then any segment covering the offset. */
int ha_dw_link_start(ha_dw *d, uint64_t offset, uint64_t *out)
{
	GElf_Addr b;
	Elf *elf = dwfl_module_getelf(d->mod, &b);
	size_t n;
	if (!elf || elf_getphdrnum(elf, &n) != 0)
		return -1;
	for (int pass = 0; pass < 3; pass++)
		for (size_t i = 0; i < n; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
				continue;
			uint64_t lo = ph.p_offset & ~(uint64_t)0xfff;
			int hit = pass == 0 ? lo == offset && (ph.p_flags & PF_X) :
				  pass == 1 ? lo == offset :
				  offset >= lo && offset < ph.p_offset + ph.p_filesz;
			if (hit) {
				*out = ph.p_vaddr - ph.p_offset + offset;
				return 0;
			}
		}
	return -1;
}

int ha_dw_lookup(ha_dw *d, uint64_t ma, ha_dw_frame *out, int max, int *have_dwarf)
{
	if (!d->indexed) {
		index_open(&d->ix, d->mod);
		d->indexed = 1;
	}
	dw_index *ix = &d->ix;
	Dwfl_Module *mod = d->mod;
	uint64_t a = ma - ix->bias;
	cu_rec *c = ix->dw ? cu_at(ix, a) : NULL;
	Dwarf_Die fn, cu;
	int have_fn = 0;
	if (c) {
		build_cu(c);
		have_fn = fn_at(ix, c, a, &fn) == 0;
	}
	/* lines and file numbers are the function's own unit's (a function
	 * folded with another one's code may sit in another unit) */
	if (have_fn && !dwarf_diecu(&fn, &cu, NULL, NULL))
		have_fn = 0;
	if (have_fn) {
		/* the chain of inlined copies holding a, outermost first */
		enum { MAXDEPTH = 64 };
		Dwarf_Die chain[MAXDEPTH], cur = fn, child;
		int n = 0;
		chain[n++] = fn;
		while (n < MAXDEPTH && n < max && dwarf_child(&cur, &child) == 0) {
			int found = 0;
			do {
				int tag = dwarf_tag(&child);
				if ((tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block ||
				     tag == DW_TAG_try_block || tag == DW_TAG_catch_block) &&
				    dwarf_haspc(&child, a) > 0) {
					found = 1;
					break;
				}
			} while (dwarf_siblingof(&child, &child) == 0);
			if (!found)
				break;
			cur = child;
			if (dwarf_tag(&child) == DW_TAG_inlined_subroutine)
				chain[n++] = child;
		}
		*have_dwarf = 1;
		const char *file = NULL;
		int lineno = 0;
		Dwarf_Line *dl = dwarf_getsrc_die(&cu, a);
		if (dl) {
			file = dwarf_linesrc(dl, NULL, NULL);
			dwarf_lineno(dl, &lineno);
		}
		Dwarf_Files *files = NULL;
		size_t nfiles = 0;
		dwarf_getsrcfiles(&cu, &files, &nfiles);
		int m = mangles(&cu), k = 0;
		for (int i = n - 1; i >= 0; i--, k++) {
			int decl = 0;
			dwarf_decl_line(&chain[i], &decl);
			out[k].sym = die_name(mod, ix, &chain[i], m, file, lineno);
			out[k].file = file;
			out[k].line = lineno > 0 ? lineno : 0;
			out[k].decl_line = decl > 0 ? decl : 0;
			/* the caller's position is where this one was inlined */
			Dwarf_Attribute at;
			Dwarf_Word cf = 0, cl = 0;
			if (dwarf_attr(&chain[i], DW_AT_call_file, &at))
				dwarf_formudata(&at, &cf);
			if (dwarf_attr(&chain[i], DW_AT_call_line, &at))
				dwarf_formudata(&at, &cl);
			file = files && cf < nfiles ? dwarf_filesrc(files, cf, NULL, NULL) : NULL;
			lineno = (int)cl;
		}
		return k;
	}
	/* no function DIE here: the symbol table's name, with the line
	 * table's file:line when the address is in a unit (assembly) */
	GElf_Off off;
	GElf_Sym sym;
	const char *s = dwfl_module_addrinfo(mod, ma, &off, &sym, NULL, NULL, NULL);
	if (!s || max < 1)
		return 0;
	Dwarf_Line *dl = c ? dwarf_getsrc_die(&c->die, a) : NULL;
	const char *file = dl ? dwarf_linesrc(dl, NULL, NULL) : NULL;
	int lineno = 0;
	if (file && dwarf_lineno(dl, &lineno) == 0 && lineno > 0)
		*have_dwarf = 1;
	else
		file = NULL, lineno = 0;
	out[0] = (ha_dw_frame){ s, file, lineno, 0 };
	return 1;
}
