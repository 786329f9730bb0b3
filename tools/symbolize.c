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
 * Offline: never linked into the profiled process.  The lookups are
 * sym/dwarf.c's (libdw, libiberty's demangler), shared with the in-process
 * plugin libheapalloc-sym.so.  Each mapping's load bias comes from the
 * binary's program headers: the PT_LOAD
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
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "prof/pb.h"
#include "prof/sampler.h"   /* ha_sampler_unsample_pair (prof/capture/sampler.c) */
#include "sym/dwarf.h"

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
		ha_sampler_unsample_pair(ao, ab, (int64_t)r, &vals[0]);
		ha_sampler_unsample_pair(io, ib, (int64_t)r, &vals[2]);
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

static char **binaries;
static int nbinaries;

static char *demangle(const char *s)
{
	char *d = ha_dw_demangle(s);
	return d ? d : strdup(s);
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static ha_dw *open_binary(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? NULL : ha_dw_open(fd, path);
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


static void add_line(location *l, size_t *cap, uint64_t fn, uint64_t lineno)
{
	GROW(l->lines, l->nlines, *cap);
	l->lines[l->nlines].fn = fn;
	l->lines[l->nlines++].line = lineno;
}

/* Fill l's lines (innermost first, as pprof wants) for module address ma.
 * 1 if a name was found; *have_dwarf says whether DWARF covered it. */
static int symbolize_one(profile *pr, ha_dw *d, location *l, uint64_t ma, int *have_dwarf)
{
	ha_dw_frame fr[64];
	size_t cap = 0;
	int n = ha_dw_lookup(d, ma, fr, 64, have_dwarf);
	l->nlines = 0;
	for (int i = 0; i < n; i++)
		add_line(l, &cap, fn_for(pr, fr[i].sym ? fr[i].sym : "??", fr[i].file,
					 (uint64_t)fr[i].decl_line),
			 (uint64_t)fr[i].line);
	return n > 0;
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
			ha_dw *d = open_binary(binaries[i]);
			if (!d)
				continue;
			int same = strcmp(ha_dw_build_id(d), want_bid) == 0;
			ha_dw_close(d);
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
		errno = 0;
		ha_dw *d = open_binary(file);
		if (!d) {
			int e = errno;
			fprintf(stderr, "%s: %s: cannot read it (%s); its frames stay addresses\n",
				prog, file, e && e != ENOEXEC ? strerror(e) : "not an ELF file");
			continue;
		}
		const char *want = str_of(pr, m->build_id), *bid = ha_dw_build_id(d);
		if (*want && *bid && strcmp(want, bid) != 0) {
			fprintf(stderr, "%s: %s: build ID %s is not the profile's %s; its frames stay addresses\n",
				prog, file, bid, want);
			ha_dw_close(d);
			continue;
		}
		if (!*want && *bid)
			m->build_id = add_string(pr, bid, strlen(bid));
		uint64_t ls;
		if (ha_dw_link_start(d, m->offset, &ls) != 0) {
			fprintf(stderr, "%s: %s: no loadable segment at file offset 0x%llx; its frames stay addresses\n",
				prog, file, (unsigned long long)m->offset);
			ha_dw_close(d);
			continue;
		}
		int named = 0, dwarf = 0;
		for (size_t i = 0; i < pr->nlocs; i++) {
			location *l = &pr->locs[i];
			if (l->mapping_id != m->id || l->nlines)
				continue;
			named += symbolize_one(pr, d, l, l->address - m->start + ls, &dwarf);
		}
		if (!dwarf)
			fprintf(stderr, "%s: %s: no debug info; function names only, no file:line\n",
				prog, file);
		if (named) {
			m->has_fn = 1;
			m->has_file = m->has_line = m->has_inline = dwarf;
		}
		ha_dw_close(d);
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
