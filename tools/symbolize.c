/* tools/symbolize.c — heapalloc-symbolize: a dump in, a named pprof profile out.
 *
 *   heapalloc-symbolize [-o OUT.pb.gz] PROFILE [BINARY...]
 *
 * Reads a heapalloc dump of either format (the gperftools text format with
 * its MAPPED_LIBRARIES, or a .pb.gz) and writes a gzipped profile.proto in
 * which every location whose binary could be read carries its function
 * names, file:line and inlined frames, demangled (C++, Rust legacy and v0),
 * and whose mappings say so (has_functions ... has_inline_frames), so any
 * viewer shows the right names with no binaries at hand.
 *
 * Offline only: never linked into the profiled process.  ELF and DWARF
 * through elfutils' libdwfl and libdw, names through libiberty's demangler.  Each
 * mapping's load bias comes from the binary's program headers: the PT_LOAD
 * holding the mapping's file offset gives the link-time address of the
 * mapping's start (p_vaddr - p_offset + offset), which is right for lld's
 * layout (p_vaddr - p_offset = 0x1000), PIE, shared libraries and non-PIE
 * alike.  A binary is the BINARY argument of the same base name or build
 * ID, else the mapping's own path; a build ID that differs, a missing file
 * or missing debug info leaves that mapping's addresses as they are, with
 * one warning naming the file.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libiberty/demangle.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "prof/pb.h"

static const char *prog = "heapalloc-symbolize";

static void *sym_malloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(1);
	}
	return p;
}

static void *sym_realloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(1);
	}
	return p;
}

#define GROW(arr, n, cap) do { \
	if ((n) == (cap)) { \
		(cap) = (cap) ? 2 * (cap) : 16; \
		(arr) = sym_realloc((arr), (cap) * sizeof *(arr)); \
	} } while (0)

/* ---- the profile in memory ------------------------------------------------ */

typedef struct raw_field { unsigned field; const unsigned char *p; size_t n; uint64_t v; int wire; } raw_field;
typedef struct line { uint64_t fn, line; } line;
typedef struct location {
	uint64_t id, mapping_id, address;
	line *lines;
	size_t nlines;
	int is_folded;
} location;
typedef struct mapping {
	uint64_t id, start, limit, offset, filename, build_id;
	int has_fn, has_file, has_line, has_inline;
	int used;                 /* some location points into it */
} mapping;
typedef struct function { uint64_t id, name, system_name, filename, start_line; } function;

typedef struct profile {
	raw_field *other;         /* top-level fields kept as they came */
	size_t nother, cother;
	mapping *maps; size_t nmaps, cmaps;
	location *locs; size_t nlocs, clocs;
	function *fns; size_t nfns, cfns;
	char **strs; size_t *slen; size_t nstrs, cstrs;
	uint64_t max_fn_id;
	struct hmap *str_index, *fn_index, *loc_index;
} profile;

/* Key -> index, open addressing; a key may be shared by several entries
 * (a hash), the caller's eq() tells them apart.  Grows at half full. */
typedef struct hmap { uint64_t *key; size_t *val; size_t cap, n; } hmap;
typedef int (*hm_eq)(const profile *pr, size_t val, const void *want);

static size_t *hm_find(hmap *h, uint64_t key, hm_eq eq, const profile *pr, const void *want)
{
	if (2 * (h->n + 1) > h->cap) {
		hmap g = { NULL, NULL, h->cap ? 2 * h->cap : 1024, 0 };
		g.key = sym_malloc(g.cap * sizeof *g.key);
		g.val = sym_malloc(g.cap * sizeof *g.val);
		memset(g.val, 0, g.cap * sizeof *g.val);
		for (size_t i = 0; i < h->cap; i++) {
			if (!h->val[i])
				continue;
			size_t j = (size_t)(h->key[i] * 0x9e3779b97f4a7c15ull >> 20) & (g.cap - 1);
			while (g.val[j])
				j = (j + 1) & (g.cap - 1);
			g.key[j] = h->key[i];
			g.val[j] = h->val[i];
		}
		g.n = h->n;
		free(h->key);
		free(h->val);
		*h = g;
	}
	size_t j = (size_t)(key * 0x9e3779b97f4a7c15ull >> 20) & (h->cap - 1);
	while (h->val[j] && !(h->key[j] == key && eq(pr, h->val[j] - 1, want)))
		j = (j + 1) & (h->cap - 1);
	h->key[j] = key;
	return &h->val[j];        /* 0: not there (set it to index + 1 to add) */
}

static hmap *hm_new(void)
{
	hmap *h = sym_malloc(sizeof *h);
	memset(h, 0, sizeof *h);
	return h;
}

typedef struct str_want { const char *s; size_t n; } str_want;

static int str_eq(const profile *pr, size_t i, const void *w)
{
	const str_want *sw = w;
	return pr->slen[i] == sw->n && memcmp(pr->strs[i], sw->s, sw->n) == 0;
}

static uint64_t fnv(const void *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
	return h;
}

/* Append s to the string table (dedup: index of an equal string if any;
 * force: always append, as decoding must keep every index). */
static uint64_t put_string(profile *pr, const char *s, size_t n, int force)
{
	if (!pr->str_index)
		pr->str_index = hm_new();
	str_want w = { s, n };
	size_t *slot = hm_find(pr->str_index, fnv(s, n), str_eq, pr, &w);
	if (*slot && !force)
		return *slot - 1;
	if (pr->nstrs == pr->cstrs) {
		pr->cstrs = pr->cstrs ? 2 * pr->cstrs : 64;
		pr->strs = sym_realloc(pr->strs, pr->cstrs * sizeof *pr->strs);
		pr->slen = sym_realloc(pr->slen, pr->cstrs * sizeof *pr->slen);
	}
	pr->strs[pr->nstrs] = sym_malloc(n + 1);
	memcpy(pr->strs[pr->nstrs], s, n);
	pr->strs[pr->nstrs][n] = 0;
	pr->slen[pr->nstrs] = n;
	if (!*slot) {
		*slot = pr->nstrs + 1;
		pr->str_index->n++;
	}
	return pr->nstrs++;
}

static uint64_t add_string(profile *pr, const char *s, size_t n)
{
	return put_string(pr, s, n, 0);
}

static const char *str_of(const profile *pr, uint64_t i)
{
	return i < pr->nstrs ? pr->strs[i] : "";
}

/* ---- protobuf decoding ---------------------------------------------------- */

typedef struct rd { const unsigned char *p, *end; int bad; } rd;

static uint64_t rd_varint(rd *r)
{
	uint64_t v = 0;
	for (int s = 0; s < 64; s += 7) {
		if (r->p >= r->end) {
			r->bad = 1;
			return 0;
		}
		unsigned char c = *r->p++;
		v |= (uint64_t)(c & 0x7f) << s;
		if (!(c & 0x80))
			return v;
	}
	r->bad = 1;
	return 0;
}

/* Next field of a message: 0 at the end (or on bad input). */
static int rd_field(rd *r, raw_field *f)
{
	if (r->p >= r->end || r->bad)
		return 0;
	uint64_t key = rd_varint(r);
	f->field = (unsigned)(key >> 3);
	f->wire = (int)(key & 7);
	f->p = r->p;
	f->n = 0;
	f->v = 0;
	switch (f->wire) {
	case 0: f->v = rd_varint(r); break;
	case 1: f->n = 8; break;
	case 5: f->n = 4; break;
	case 2: f->n = rd_varint(r); f->p = r->p; break;
	default: r->bad = 1; return 0;
	}
	if (f->wire != 0) {
		if (f->n > (size_t)(r->end - r->p)) {
			r->bad = 1;
			return 0;
		}
		r->p += f->n;
	}
	return !r->bad;
}

static int decode_mapping(profile *pr, const unsigned char *p, size_t n)
{
	rd r = { p, p + n, 0 };
	raw_field f;
	GROW(pr->maps, pr->nmaps, pr->cmaps);
	mapping *m = &pr->maps[pr->nmaps++];
	memset(m, 0, sizeof *m);
	while (rd_field(&r, &f)) {
		switch (f.field) {
		case PB_MAPPING_ID: m->id = f.v; break;
		case PB_MAPPING_START: m->start = f.v; break;
		case PB_MAPPING_LIMIT: m->limit = f.v; break;
		case PB_MAPPING_OFFSET: m->offset = f.v; break;
		case PB_MAPPING_FILENAME: m->filename = f.v; break;
		case PB_MAPPING_BUILD_ID: m->build_id = f.v; break;
		case PB_MAPPING_HAS_FUNCTIONS: m->has_fn = f.v != 0; break;
		case PB_MAPPING_HAS_FILENAMES: m->has_file = f.v != 0; break;
		case PB_MAPPING_HAS_LINE_NUMBERS: m->has_line = f.v != 0; break;
		case PB_MAPPING_HAS_INLINE_FRAMES: m->has_inline = f.v != 0; break;
		}
	}
	return r.bad ? -1 : 0;
}

static int decode_location(profile *pr, const unsigned char *p, size_t n)
{
	rd r = { p, p + n, 0 };
	raw_field f;
	GROW(pr->locs, pr->nlocs, pr->clocs);
	location *l = &pr->locs[pr->nlocs++];
	memset(l, 0, sizeof *l);
	size_t cap = 0;
	while (rd_field(&r, &f)) {
		switch (f.field) {
		case PB_LOCATION_ID: l->id = f.v; break;
		case PB_LOCATION_MAPPING_ID: l->mapping_id = f.v; break;
		case PB_LOCATION_ADDRESS: l->address = f.v; break;
		case 5: l->is_folded = f.v != 0; break;
		case PB_LOCATION_LINE: {
			if (f.wire != 2)
				break;
			rd lr = { f.p, f.p + f.n, 0 };
			raw_field g;
			GROW(l->lines, l->nlines, cap);
			line *ln = &l->lines[l->nlines++];
			memset(ln, 0, sizeof *ln);
			while (rd_field(&lr, &g))
				if (g.field == PB_LINE_FUNCTION_ID)
					ln->fn = g.v;
				else if (g.field == PB_LINE_LINE)
					ln->line = g.v;
			break;
		}
		}
	}
	return r.bad ? -1 : 0;
}

static int decode_function(profile *pr, const unsigned char *p, size_t n)
{
	rd r = { p, p + n, 0 };
	raw_field f;
	GROW(pr->fns, pr->nfns, pr->cfns);
	function *fn = &pr->fns[pr->nfns++];
	memset(fn, 0, sizeof *fn);
	while (rd_field(&r, &f)) {
		switch (f.field) {
		case PB_FUNCTION_ID: fn->id = f.v; break;
		case PB_FUNCTION_NAME: fn->name = f.v; break;
		case PB_FUNCTION_SYSTEM_NAME: fn->system_name = f.v; break;
		case PB_FUNCTION_FILENAME: fn->filename = f.v; break;
		case 5: fn->start_line = f.v; break;
		}
	}
	if (fn->id > pr->max_fn_id)
		pr->max_fn_id = fn->id;
	return r.bad ? -1 : 0;
}

static int decode_profile(profile *pr, const unsigned char *p, size_t n)
{
	rd r = { p, p + n, 0 };
	raw_field f;
	while (rd_field(&r, &f)) {
		int err = 0;
		switch (f.field) {
		case PB_PROFILE_MAPPING: err = f.wire != 2 || decode_mapping(pr, f.p, f.n); break;
		case PB_PROFILE_LOCATION: err = f.wire != 2 || decode_location(pr, f.p, f.n); break;
		case PB_PROFILE_FUNCTION: err = f.wire != 2 || decode_function(pr, f.p, f.n); break;
		case PB_PROFILE_STRING:
			if (f.wire != 2)
				return -1;
			put_string(pr, (const char *)f.p, f.n, 1);   /* indices must not move */
			break;
		default:
			GROW(pr->other, pr->nother, pr->cother);
			pr->other[pr->nother++] = f;
		}
		if (err)
			return -1;
	}
	return r.bad ? -1 : 0;
}

/* ---- the text format ------------------------------------------------------ */

typedef struct ubuf { unsigned char *p; size_t len, cap; } ubuf;

static void ub_add(ubuf *b, const void *s, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 1024;
		b->p = sym_realloc(b->p, b->cap);
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

/* Go's scaleHeapSample (what both pprofs apply to heap_v2/R lines). */
static void unsample(uint64_t c, uint64_t b, uint64_t r, uint64_t *oc, uint64_t *ob)
{
	if (!c || !b || r <= 1) {
		*oc = c;
		*ob = b;
		return;
	}
	double avg = (double)b / (double)c;
	double scale = 1 / (1 - exp(-avg / (double)r));
	*oc = (uint64_t)((double)c * scale);
	*ob = (uint64_t)((double)b * scale);
}

static int loc_eq(const profile *pr, size_t i, const void *w)
{
	return pr->locs[i].address == *(const uint64_t *)w;
}

static uint64_t loc_for(profile *pr, uint64_t addr)
{
	if (!pr->loc_index)
		pr->loc_index = hm_new();
	size_t *slot = hm_find(pr->loc_index, addr, loc_eq, pr, &addr);
	if (*slot)
		return pr->locs[*slot - 1].id;
	GROW(pr->locs, pr->nlocs, pr->clocs);
	location *l = &pr->locs[pr->nlocs++];
	memset(l, 0, sizeof *l);
	l->id = pr->nlocs;
	l->address = addr;
	for (size_t i = 0; i < pr->nmaps; i++)
		if (addr >= pr->maps[i].start && addr < pr->maps[i].limit)
			l->mapping_id = pr->maps[i].id;
	*slot = pr->nlocs;
	pr->loc_index->n++;
	return l->id;
}

static void add_raw(profile *pr, unsigned field, const pb_buf *m)
{
	GROW(pr->other, pr->nother, pr->cother);
	unsigned char *copy = sym_malloc(m->len);
	memcpy(copy, m->p, m->len);
	raw_field f = { field, copy, m->len, 0, 2 };
	pr->other[pr->nother++] = f;
}

static int decode_text(profile *pr, char *text, size_t n, const char *name)
{
	text[n - 1] = 0;          /* the caller leaves a spare byte */
	char *save = NULL;
	char *ln = strtok_r(text, "\n", &save);
	uint64_t r = 1;
	if (!ln || strncmp(ln, "heap profile:", 13) != 0)
		return -1;
	char *v2 = strstr(ln, "@ heap_v2/");
	if (v2)
		r = strtoull(v2 + 10, NULL, 10);
	add_string(pr, "", 0);
	static const char *const st[] = { "alloc_objects", "count", "alloc_space", "bytes",
					  "inuse_objects", "count", "inuse_space", "bytes" };
	/* first pass: the memory map, so locations find their mappings */
	char *maps_at = strstr(ln + strlen(ln) + 1, "\nMAPPED_LIBRARIES:\n");
	if (maps_at) {
		char *save2 = NULL;
		for (char *m = strtok_r(maps_at + 19, "\n", &save2); m; m = strtok_r(NULL, "\n", &save2)) {
			unsigned long long s, e, off;
			char perms[8];
			int pos = 0;
			if (sscanf(m, "%llx-%llx %7s %llx %*s %*s %n", &s, &e, perms, &off, &pos) < 4 ||
			    perms[2] != 'x')
				continue;
			const char *path = pos ? m + pos : "";
			GROW(pr->maps, pr->nmaps, pr->cmaps);
			mapping *mp = &pr->maps[pr->nmaps++];
			memset(mp, 0, sizeof *mp);
			mp->id = pr->nmaps;
			mp->start = s;
			mp->limit = e;
			mp->offset = off;
			mp->filename = add_string(pr, path, strlen(path));
		}
		*maps_at = 0;
	}
	unsigned char t[64];
	pb_buf m = { t, 0, sizeof t, 0 };
	for (int i = 0; i < 4; i++) {
		m.len = 0;
		pb_int(&m, PB_VALUETYPE_TYPE, add_string(pr, st[2 * i], strlen(st[2 * i])));
		pb_int(&m, PB_VALUETYPE_UNIT, add_string(pr, st[2 * i + 1], strlen(st[2 * i + 1])));
		add_raw(pr, PB_PROFILE_SAMPLE_TYPE, &m);
	}
	uint64_t bytes_key = add_string(pr, "bytes", 5);
	int lines = 0, skipped = 0;
	char first_bad[64] = "";
	while ((ln = strtok_r(NULL, "\n", &save))) {
		unsigned long long io, ib, ao, ab;
		int pos = 0;
		if (sscanf(ln, " %llu: %llu [ %llu: %llu] @%n", &io, &ib, &ao, &ab, &pos) < 4 || !pos) {
			if (!skipped++)
				snprintf(first_bad, sizeof first_bad, "%.60s", ln);
			continue;
		}
		uint64_t ids[256], vals[4];
		size_t d = 0;
		char *p = ln + pos, *end;
		for (;;) {
			uint64_t a = strtoull(p, &end, 16);
			if (end == p || d == 256)
				break;
			/* the leaf is written already stepped back; the others are
			 * return addresses */
			ids[d] = loc_for(pr, d ? a - 1 : a);
			d++;
			p = end;
		}
		if (!d)
			continue;
		unsample(ao, ab, r, &vals[0], &vals[1]);
		unsample(io, ib, r, &vals[2], &vals[3]);
		unsigned char sb[4096], lb[32];
		pb_buf s = { sb, 0, sizeof sb, 0 }, l = { lb, 0, sizeof lb, 0 };
		pb_packed(&s, PB_SAMPLE_LOCATION_ID, ids, d < 64 ? d : 64);
		pb_packed(&s, PB_SAMPLE_VALUE, vals, 4);
		if (ao) {
			pb_int(&l, PB_LABEL_KEY, bytes_key);
			pb_int(&l, PB_LABEL_NUM, ab / ao);
			pb_bytes(&s, PB_SAMPLE_LABEL, lb, l.len);
		}
		add_raw(pr, PB_PROFILE_SAMPLE, &s);
		lines++;
	}
	m.len = 0;
	pb_int(&m, PB_VALUETYPE_TYPE, add_string(pr, "space", 5));
	pb_int(&m, PB_VALUETYPE_UNIT, bytes_key);
	add_raw(pr, PB_PROFILE_PERIOD_TYPE, &m);
	unsigned char pv[32];
	pb_buf per = { pv, 0, sizeof pv, 0 };
	pb_int(&per, PB_PROFILE_PERIOD, r);
	pb_int(&per, PB_PROFILE_DEFAULT_SAMPLE_TYPE, add_string(pr, "inuse_space", 11));
	/* varint fields: keep them as one pre-encoded chunk (field 0 = verbatim) */
	GROW(pr->other, pr->nother, pr->cother);
	unsigned char *copy = sym_malloc(per.len);
	memcpy(copy, pv, per.len);
	raw_field f = { 0, copy, per.len, 0, -1 };
	pr->other[pr->nother++] = f;
	if (skipped)
		fprintf(stderr, "%s: %s: %d line(s) not understood, skipped (the first: %s)\n",
			prog, name, skipped, first_bad);
	return lines || pr->nmaps ? 0 : -1;
}

/* ---- symbolisation -------------------------------------------------------- */

static char **binaries;
static int nbinaries;

static char *demangle(const char *s)
{
	char *d = cplus_demangle(s, DMGL_AUTO | DMGL_ANSI);
	return d ? d : strdup(s);
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

/* The build ID of an open module as lowercase hex into out ("" if none). */
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

typedef struct opened { Dwfl *dwfl; Dwfl_Module *mod; char bid[130]; } opened;

static int open_binary(const char *path, opened *o)
{
	memset(o, 0, sizeof *o);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	o->dwfl = dwfl_begin(&callbacks);
	if (!o->dwfl) {
		close(fd);
		return -1;
	}
	dwfl_report_begin(o->dwfl);
	/* base 0 with p_vaddr added: module addresses are link-time addresses
	 * for ET_DYN and ET_EXEC alike; the bias is applied by the caller */
	o->mod = dwfl_report_elf(o->dwfl, base_name(path), path, fd, 0, true);
	dwfl_report_end(o->dwfl, NULL, NULL);
	if (!o->mod) {
		dwfl_end(o->dwfl);
		o->dwfl = NULL;
		return -1;
	}
	GElf_Addr b;
	dwfl_module_getelf(o->mod, &b);
	module_build_id(o->mod, o->bid, sizeof o->bid);
	return 0;
}

/* Link-time address of the mapping's start, from the PT_LOAD that holds
 * its file offset.  The kernel maps a segment from its p_offset rounded
 * down to a page, so with lld's layout the page the text segment starts
 * in also holds the end of the read-only segment before it: look first for
 * an executable segment starting in that page, then any segment starting
 * there, then any segment covering the offset.  0 ok, -1 none. */
static int link_start(Dwfl_Module *mod, const mapping *m, uint64_t *out)
{
	GElf_Addr b;
	Elf *elf = dwfl_module_getelf(mod, &b);
	size_t n;
	if (!elf || elf_getphdrnum(elf, &n) != 0)
		return -1;
	for (int pass = 0; pass < 3; pass++)
		for (size_t i = 0; i < n; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
				continue;
			uint64_t lo = ph.p_offset & ~(uint64_t)0xfff;
			int hit = pass == 0 ? lo == m->offset && (ph.p_flags & PF_X) :
				  pass == 1 ? lo == m->offset :
				  m->offset >= lo && m->offset < ph.p_offset + ph.p_filesz;
			if (hit) {
				*out = ph.p_vaddr - ph.p_offset + m->offset;
				return 0;
			}
		}
	return -1;
}

static int fn_eq(const profile *pr, size_t i, const void *w)
{
	const uint64_t *k = w;
	const function *f = &pr->fns[i];
	return f->name == k[0] && f->system_name == k[1] && f->filename == k[2];
}

static uint64_t fn_for(profile *pr, const char *mangled, const char *file, uint64_t decl)
{
	char *dem = demangle(mangled);
	uint64_t name = add_string(pr, dem, strlen(dem));
	uint64_t sys = add_string(pr, mangled, strlen(mangled));
	uint64_t fname = file ? add_string(pr, file, strlen(file)) : 0;
	free(dem);
	if (!pr->fn_index) {      /* index the functions the input brought */
		pr->fn_index = hm_new();
		for (size_t i = 0; i < pr->nfns; i++) {
			const function *g = &pr->fns[i];
			uint64_t k[3] = { g->name, g->system_name, g->filename };
			size_t *slot = hm_find(pr->fn_index, fnv(k, sizeof k), fn_eq, pr, k);
			if (!*slot) {
				*slot = i + 1;
				pr->fn_index->n++;
			}
		}
	}
	uint64_t k[3] = { name, sys, fname };
	size_t *slot = hm_find(pr->fn_index, fnv(k, sizeof k), fn_eq, pr, k);
	if (*slot)
		return pr->fns[*slot - 1].id;
	GROW(pr->fns, pr->nfns, pr->cfns);
	*slot = pr->nfns + 1;
	pr->fn_index->n++;
	function *f = &pr->fns[pr->nfns++];
	f->id = ++pr->max_fn_id;
	f->name = name;
	f->system_name = sys;
	f->filename = fname;
	f->start_line = decl;
	return f->id;
}

/* ---- the DWARF index of one binary ---------------------------------------
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
		GROW(ix->cus, ix->ncus, ix->ccus);
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
			GROW(ix->cuspans, ix->ncuspans, ix->ccuspans);
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
				GROW(c->fns, c->nfns, c->cfns);
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
	ix->byorigin = sym_malloc((n ? n : 1) * sizeof *ix->byorigin);
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
			GROW(ix->bare, n, cap);
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

static void add_line(location *l, size_t *cap, uint64_t fn, uint64_t lineno)
{
	GROW(l->lines, l->nlines, *cap);
	l->lines[l->nlines].fn = fn;
	l->lines[l->nlines++].line = lineno;
}

/* Whether the unit's language names functions by mangled symbols (C does
 * not: its DWARF names are its symbols). */
static int mangles(Dwarf_Die *cu)
{
	switch (dwarf_srclang(cu)) {
	case DW_LANG_C89: case DW_LANG_C: case DW_LANG_C99: case DW_LANG_C11:
		return 0;
	}
	return 1;
}

/* Fill l's lines (innermost first, as pprof wants) for module address ma.
 * 1 if a name was found; *have_dwarf says whether DWARF covered it. */
static int symbolize_one(profile *pr, Dwfl_Module *mod, dw_index *ix, location *l, uint64_t ma,
			 int *have_dwarf)
{
	size_t cap = 0;
	l->nlines = 0;
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
		while (n < MAXDEPTH && dwarf_child(&cur, &child) == 0) {
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
		int m = mangles(&cu);
		for (int i = n - 1; i >= 0; i--) {
			const char *name = die_name(mod, ix, &chain[i], m, file, lineno);
			int decl = 0;
			dwarf_decl_line(&chain[i], &decl);
			add_line(l, &cap, fn_for(pr, name ? name : "??", file, (uint64_t)decl),
				 (uint64_t)(lineno > 0 ? lineno : 0));
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
		return 1;
	}
	/* no function DIE here: the symbol table's name, with the line
	 * table's file:line when the address is in a unit (assembly) */
	GElf_Off off;
	GElf_Sym sym;
	const char *s = dwfl_module_addrinfo(mod, ma, &off, &sym, NULL, NULL, NULL);
	if (!s)
		return 0;
	Dwarf_Line *dl = c ? dwarf_getsrc_die(&c->die, a) : NULL;
	const char *file = dl ? dwarf_linesrc(dl, NULL, NULL) : NULL;
	int lineno = 0;
	if (file && dwarf_lineno(dl, &lineno) == 0 && lineno > 0)
		*have_dwarf = 1;
	else
		file = NULL, lineno = 0;
	add_line(l, &cap, fn_for(pr, s, file, 0), (uint64_t)lineno);
	return 1;
}

static const char *find_binary(const profile *pr, const mapping *m)
{
	const char *path = str_of(pr, m->filename);
	const char *want_bid = str_of(pr, m->build_id);
	for (int i = 0; i < nbinaries; i++)
		if (strcmp(base_name(binaries[i]), base_name(path)) == 0)
			return binaries[i];
	if (*want_bid)
		for (int i = 0; i < nbinaries; i++) {
			opened o;
			if (open_binary(binaries[i], &o) != 0)
				continue;
			int same = strcmp(o.bid, want_bid) == 0;
			dwfl_end(o.dwfl);
			if (same)
				return binaries[i];
		}
	return path;
}

static void symbolize(profile *pr)
{
	for (size_t i = 0; i < pr->nlocs; i++)
		for (size_t k = 0; k < pr->nmaps; k++)
			if (pr->maps[k].id == pr->locs[i].mapping_id)
				pr->maps[k].used = 1;
	for (size_t k = 0; k < pr->nmaps; k++) {
		mapping *m = &pr->maps[k];
		const char *path = str_of(pr, m->filename);
		if (!m->used || !m->id || path[0] != '/' ||
		    (m->has_fn && m->has_file && m->has_line && m->has_inline))
			continue;
		const char *file = find_binary(pr, m);
		opened o;
		errno = 0;
		if (open_binary(file, &o) != 0) {
			int e = errno;
			fprintf(stderr, "%s: %s: cannot read it (%s); its frames stay addresses\n",
				prog, file, e ? strerror(e) : "not an ELF file");
			continue;
		}
		const char *want = str_of(pr, m->build_id);
		if (*want && *o.bid && strcmp(want, o.bid) != 0) {
			fprintf(stderr, "%s: %s: build ID %s is not the profile's %s; its frames stay addresses\n",
				prog, file, o.bid, want);
			dwfl_end(o.dwfl);
			continue;
		}
		if (!*want && *o.bid)
			m->build_id = add_string(pr, o.bid, strlen(o.bid));
		uint64_t ls;
		if (link_start(o.mod, m, &ls) != 0) {
			fprintf(stderr, "%s: %s: no loadable segment at file offset 0x%llx; its frames stay addresses\n",
				prog, file, (unsigned long long)m->offset);
			dwfl_end(o.dwfl);
			continue;
		}
		int named = 0, dwarf = 0;
		dw_index ix;
		index_open(&ix, o.mod);
		for (size_t i = 0; i < pr->nlocs; i++) {
			location *l = &pr->locs[i];
			if (l->mapping_id != m->id || l->nlines)
				continue;
			named += symbolize_one(pr, o.mod, &ix, l, l->address - m->start + ls, &dwarf);
		}
		index_close(&ix);
		if (!dwarf)
			fprintf(stderr, "%s: %s: no debug info; function names only, no file:line\n",
				prog, file);
		if (named) {
			m->has_fn = 1;
			m->has_file = m->has_line = m->has_inline = dwarf;
		}
		dwfl_end(o.dwfl);
	}
}

/* ---- output --------------------------------------------------------------- */

static void emit(ubuf *o, unsigned field, const pb_buf *m)
{
	unsigned char h[16];
	pb_buf hb = { h, 0, sizeof h, 0 };
	pb_key(&hb, field, 2);
	pb_varint(&hb, m->len);
	ub_add(o, h, hb.len);
	ub_add(o, m->p, m->len);
}

static void encode(const profile *pr, ubuf *o)
{
	for (size_t i = 0; i < pr->nother; i++) {
		const raw_field *f = &pr->other[i];
		unsigned char t[16];
		pb_buf h = { t, 0, sizeof t, 0 };
		if (f->wire == -1) {          /* verbatim pre-encoded fields */
			ub_add(o, f->p, f->n);
			continue;
		}
		pb_key(&h, f->field, (unsigned)f->wire);
		if (f->wire == 0)
			pb_varint(&h, f->v);
		else if (f->wire == 2)
			pb_varint(&h, f->n);
		ub_add(o, t, h.len);
		if (f->wire != 0)
			ub_add(o, f->p, f->n);
	}
	for (size_t i = 0; i < pr->nmaps; i++) {
		const mapping *mp = &pr->maps[i];
		unsigned char t[128];
		pb_buf m = { t, 0, sizeof t, 0 };
		pb_int(&m, PB_MAPPING_ID, mp->id);
		pb_int(&m, PB_MAPPING_START, mp->start);
		pb_int(&m, PB_MAPPING_LIMIT, mp->limit);
		pb_int(&m, PB_MAPPING_OFFSET, mp->offset);
		pb_int(&m, PB_MAPPING_FILENAME, mp->filename);
		pb_int(&m, PB_MAPPING_BUILD_ID, mp->build_id);
		pb_int(&m, PB_MAPPING_HAS_FUNCTIONS, (uint64_t)mp->has_fn);
		pb_int(&m, PB_MAPPING_HAS_FILENAMES, (uint64_t)mp->has_file);
		pb_int(&m, PB_MAPPING_HAS_LINE_NUMBERS, (uint64_t)mp->has_line);
		pb_int(&m, PB_MAPPING_HAS_INLINE_FRAMES, (uint64_t)mp->has_inline);
		emit(o, PB_PROFILE_MAPPING, &m);
	}
	for (size_t i = 0; i < pr->nlocs; i++) {
		const location *l = &pr->locs[i];
		size_t cap = 64 + 32 * l->nlines;
		pb_buf m = { sym_malloc(cap), 0, cap, 0 };
		pb_int(&m, PB_LOCATION_ID, l->id);
		pb_int(&m, PB_LOCATION_MAPPING_ID, l->mapping_id);
		pb_int(&m, PB_LOCATION_ADDRESS, l->address);
		for (size_t k = 0; k < l->nlines; k++) {
			unsigned char t[32];
			pb_buf lb = { t, 0, sizeof t, 0 };
			pb_int(&lb, PB_LINE_FUNCTION_ID, l->lines[k].fn);
			pb_int(&lb, PB_LINE_LINE, l->lines[k].line);
			pb_bytes(&m, PB_LOCATION_LINE, t, lb.len);
		}
		pb_int(&m, 5, (uint64_t)l->is_folded);
		emit(o, PB_PROFILE_LOCATION, &m);
		free(m.p);
	}
	for (size_t i = 0; i < pr->nfns; i++) {
		const function *f = &pr->fns[i];
		unsigned char t[64];
		pb_buf m = { t, 0, sizeof t, 0 };
		pb_int(&m, PB_FUNCTION_ID, f->id);
		pb_int(&m, PB_FUNCTION_NAME, f->name);
		pb_int(&m, PB_FUNCTION_SYSTEM_NAME, f->system_name);
		pb_int(&m, PB_FUNCTION_FILENAME, f->filename);
		pb_int(&m, 5, f->start_line);
		emit(o, PB_PROFILE_FUNCTION, &m);
	}
	for (size_t i = 0; i < pr->nstrs; i++) {
		pb_buf m = { (unsigned char *)pr->strs[i], pr->slen[i], pr->slen[i], 0 };
		emit(o, PB_PROFILE_STRING, &m);
	}
}

/* ---- main ----------------------------------------------------------------- */

static unsigned char *read_input(const char *path, size_t *n)
{
	gzFile z = gzopen(path, "rb");    /* reads plain files as they are */
	if (!z)
		return NULL;
	size_t cap = 1 << 20, len = 0;
	unsigned char *b = sym_malloc(cap);
	for (;;) {
		if (cap - len < 65536)
			b = sym_realloc(b, cap *= 2);
		int r = gzread(z, b + len, 65536);
		if (r < 0) {
			gzclose(z);
			free(b);
			errno = EIO;
			return NULL;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	gzclose(z);
	b[len] = 0;
	*n = len;
	return b;
}

static char *default_out(const char *in)
{
	size_t n = strlen(in);
	char *o = sym_malloc(n + 16);
	memcpy(o, in, n + 1);
	if (n > 6 && strcmp(o + n - 6, ".pb.gz") == 0)
		o[n - 6] = 0;
	else if (n > 5 && strcmp(o + n - 5, ".heap") == 0)
		o[n - 5] = 0;
	strcat(o, ".sym.pb.gz");
	return o;
}

static int write_output(const char *path, const ubuf *b)
{
	size_t n = strlen(path);
	char *tmp = sym_malloc(n + 8);
	memcpy(tmp, path, n);
	memcpy(tmp + n, ".tmp", 5);
	unlink(tmp);
	gzFile z = gzopen(tmp, "wbx");
	int ok = z && (b->len == 0 || gzwrite(z, b->p, (unsigned)b->len) == (int)b->len);
	if (z && gzclose(z) != Z_OK)
		ok = 0;
	if (ok && rename(tmp, path) != 0)
		ok = 0;
	if (!ok) {
		fprintf(stderr, "%s: cannot write %s: %s\n", prog, path, strerror(errno ? errno : EIO));
		unlink(tmp);
	}
	free(tmp);
	return ok ? 0 : -1;
}

static void usage(void)
{
	fprintf(stderr, "usage: %s [-o OUT.pb.gz] PROFILE [BINARY...]\n"
		"  PROFILE  a heapalloc dump: PREFIX.NNNN.heap or PREFIX.NNNN.pb.gz\n"
		"  BINARY   binaries or libraries to use instead of the paths in the\n"
		"           profile (matched by file name or build ID)\n"
		"  -o OUT   output file (default PROFILE with .sym.pb.gz)\n", prog);
}

int main(int argc, char **argv)
{
	const char *out = NULL;
	int opt;
	while ((opt = getopt(argc, argv, "ho:")) != -1) {
		switch (opt) {
		case 'o': out = optarg; break;
		case 'h': usage(); return 0;
		default: usage(); return 2;
		}
	}
	if (optind >= argc) {
		usage();
		return 2;
	}
	const char *in = argv[optind];
	binaries = argv + optind + 1;
	nbinaries = argc - optind - 1;
	for (int i = 0; i < nbinaries; i++)
		if (access(binaries[i], R_OK) != 0)
			fprintf(stderr, "%s: %s: %s; not used\n", prog, binaries[i], strerror(errno));
	size_t n = 0;
	unsigned char *data = read_input(in, &n);
	if (!data) {
		fprintf(stderr, "%s: cannot read %s: %s\n", prog, in, strerror(errno ? errno : EIO));
		return 1;
	}
	profile pr;
	memset(&pr, 0, sizeof pr);
	int bad;
	if (n >= 13 && memcmp(data, "heap profile:", 13) == 0)
		bad = decode_text(&pr, (char *)data, n + 1, in);
	else
		bad = decode_profile(&pr, data, n) || pr.nstrs == 0;
	if (bad) {
		fprintf(stderr, "%s: %s is neither a heap profile in text form nor a pprof profile\n",
			prog, in);
		return 1;
	}
	if (pr.nstrs == 0)
		add_string(&pr, "", 0);
	symbolize(&pr);
	ubuf o = { NULL, 0, 0 };
	encode(&pr, &o);
	char *dflt = out ? NULL : default_out(in);
	int rc = write_output(out ? out : dflt, &o);
	free(dflt);
	return rc ? 1 : 0;
}
