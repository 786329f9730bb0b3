/* sym/plugin.c — libheapalloc-sym.so: names for a running process's own
 * code addresses, for the profiles it serves (prof/sym_abi.h).
 *
 * Loaded by prof/output/sym_loader.c with dlopen only when a profile with names is
 * asked for; the lookups are sym/dwarf.c's (libdw).  Each mapping's file is
 * opened through /proc/self/map_files/START-END, which reaches the mapped
 * inode even when the binary was deleted or replaced since; failing that,
 * /proc/self/exe or the mapping's path, trusted only when its GNU build ID
 * is the one read from memory.  Per mapping it keeps the open file, its
 * DWARF index and every address already named, so a scrape after the first
 * costs a hash lookup per location.  Names are interned: a function or a
 * string seen once keeps its id for the plugin's lifetime.  A mapping whose
 * file could not be opened for want of a descriptor or memory is opened
 * again at the next profile, not remembered as unreadable.
 *
 * Runs on the profiler's helper thread or an API caller, one call at a
 * time, with profiling suppressed (its allocations never show in a
 * profile); it may allocate freely, and a failure makes an address stay
 * an address, never an error for the program.  Only heapalloc_sym_ops is
 * exported.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof/sym_abi.h"
#include "sym/dwarf.h"

#define EXPORT __attribute__((visibility("default")))
#define MAXFRAMES 64

/* One stderr line, formatted on the stack. */
static void say(const char *fmt, ...)
{
	char b[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b, sizeof b - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof b - 2)
		n = sizeof b - 2;
	b[n++] = '\n';
	if (write(2, b, (size_t)n) < 0)
		return;
}

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
	return h;
}
#define FNV0 1469598103934665603ull

/* ---- interned strings and functions ---------------------------------------- */

/* An open-addressing index of ids (0 empty) by hash; the caller compares. */
typedef struct idx { uint32_t *slot; uint64_t *hash; size_t mask, n; } idx;

/* The slot for hash h where eq(id) holds, or the empty one to fill.  NULL
 * when the index cannot grow. */
static uint32_t *idx_find(idx *x, uint64_t h, int (*eq)(uint32_t id, const void *w),
			  const void *w)
{
	if (2 * (x->n + 1) > x->mask + 1 || !x->slot) {
		size_t cap = x->slot ? 2 * (x->mask + 1) : 1024;
		uint32_t *s = calloc(cap, sizeof *s);
		uint64_t *hs = malloc(cap * sizeof *hs);
		if (!s || !hs) {
			free(s);
			free(hs);
			return NULL;
		}
		for (size_t i = 0; x->slot && i <= x->mask; i++) {
			if (!x->slot[i])
				continue;
			size_t j = (size_t)(x->hash[i] >> 7) & (cap - 1);
			while (s[j])
				j = (j + 1) & (cap - 1);
			s[j] = x->slot[i];
			hs[j] = x->hash[i];
		}
		free(x->slot);
		free(x->hash);
		x->slot = s;
		x->hash = hs;
		x->mask = cap - 1;
	}
	size_t j = (size_t)(h >> 7) & x->mask;
	while (x->slot[j] && !(x->hash[j] == h && eq(x->slot[j], w)))
		j = (j + 1) & x->mask;
	x->hash[j] = h;
	return &x->slot[j];
}

typedef struct str { char *s; size_t len; } str;
typedef struct func { uint32_t s[3], start_line; } func;

static str *strs;                 /* strs[id - 1] */
static uint32_t nstrs, cstrs;
static func *fns;                 /* fns[id - 1] */
static uint32_t nfns, cfns;
static idx str_idx, fn_idx;

static int str_eq(uint32_t id, const void *w)
{
	const str *k = w;
	return strs[id - 1].len == k->len && memcmp(strs[id - 1].s, k->s, k->len) == 0;
}

/* The id of string s (0 for NULL or when out of memory). */
static uint32_t intern(const char *s)
{
	if (!s)
		return 0;
	str k = { (char *)s, strlen(s) };
	uint32_t *slot = idx_find(&str_idx, fnv(s, k.len, FNV0), str_eq, &k);
	if (!slot)
		return 0;
	if (*slot)
		return *slot;
	if (nstrs == cstrs) {
		uint32_t c = cstrs ? 2 * cstrs : 256;
		str *p = realloc(strs, c * sizeof *p);
		if (!p)
			return 0;
		strs = p;
		cstrs = c;
	}
	char *copy = malloc(k.len + 1);
	if (!copy)
		return 0;
	memcpy(copy, s, k.len + 1);
	strs[nstrs] = (str){ copy, k.len };
	str_idx.n++;
	return *slot = ++nstrs;
}

static int fn_eq(uint32_t id, const void *w)
{
	return memcmp(&fns[id - 1], w, sizeof(func)) == 0;
}

/* The id of the function named by symbol sym (demangled for its name),
 * in file, declared at decl; 0 when out of memory. */
static uint32_t function_id(const char *sym, const char *file, int decl)
{
	char *dem = ha_dw_demangle(sym);
	func k = { { intern(dem ? dem : sym), intern(sym), intern(file) }, (uint32_t)decl };
	free(dem);
	if (!k.s[0])
		return 0;
	uint32_t *slot = idx_find(&fn_idx, fnv(&k, sizeof k, FNV0), fn_eq, &k);
	if (!slot)
		return 0;
	if (*slot)
		return *slot;
	if (nfns == cfns) {
		uint32_t c = cfns ? 2 * cfns : 256;
		func *p = realloc(fns, c * sizeof *p);
		if (!p)
			return 0;
		fns = p;
		cfns = c;
	}
	fns[nfns] = k;
	fn_idx.n++;
	return *slot = ++nfns;
}

/* ---- mappings ----------------------------------------------------------------- */

/* An address already looked up: its frames are frame[first .. first+n). */
typedef struct seen { uintptr_t a; uint32_t first, n; } seen;

typedef struct rec {
	uintptr_t start, limit, offset;
	unsigned char bid[64];
	size_t bid_len;
	ha_dw *dw;                /* NULL: unusable, its frames stay addresses */
	int again;                /* dw NULL for want of a descriptor: the next profile retries */
	uint64_t link_start;      /* link-time address of start */
	int dwarf;
	seen *seen;               /* open addressing by address; a = 0 empty */
	size_t smask, sn;
	uint32_t *ffn, *fline;    /* the frames of the addresses seen */
	size_t nframes, cframes;
} rec;

static rec *recs;
static size_t nrecs, crecs;

static int same_map(const rec *r, const ha_sym_map *m)
{
	return r->start == m->start && r->limit == m->limit && r->offset == m->offset &&
	       r->bid_len == m->bid_len && memcmp(r->bid, m->bid, m->bid_len) == 0;
}

static void rec_free(rec *r)
{
	ha_dw_close(r->dw);
	free(r->seen);
	free(r->ffn);
	free(r->fline);
}

static void hex(const unsigned char *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = "0123456789abcdef"[b[i] >> 4];
		out[2 * i + 1] = "0123456789abcdef"[b[i] & 15];
	}
	out[2 * n] = 0;
}

/* An open() failure that passes: out of descriptors or memory. */
static int passing(int e)
{
	return e == EMFILE || e == ENFILE || e == ENOMEM || e == EAGAIN || e == EINTR;
}

static int said_passing;   /* a passing failure's line written, none opened since */

/* Open the file behind m: the mapped inode itself, else /proc/self/exe or
 * the path when their build ID is m's.  NULL, with one stderr line (for
 * failures that pass, one until a file opens again), *again set when the
 * next profile should try once more. */
static ha_dw *open_mapping(const ha_sym_map *m, int *again)
{
	char path[4096], proc[64], want[2 * 64 + 1];
	size_t n = m->path_len < sizeof path - 1 ? m->path_len : sizeof path - 1;
	memcpy(path, m->path, n);
	path[n] = 0;
	static const char del[] = " (deleted)";
	if (n > sizeof del - 1 && strcmp(path + n - (sizeof del - 1), del) == 0)
		path[n - (sizeof del - 1)] = 0;
	hex(m->bid, m->bid_len, want);
	snprintf(proc, sizeof proc, "/proc/self/map_files/%lx-%lx", (unsigned long)m->start,
		 (unsigned long)m->limit);
	const char *tries[3] = { proc, "/proc/self/exe", path };
	int short_of = 0;
	*again = 0;
	for (int i = 0; i < 3; i++) {
		if (i > 0 && !m->bid_len)
			break;            /* nothing to check another file against */
		int fd = open(tries[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			if (passing(errno))
				short_of = errno;
			continue;
		}
		said_passing = 0;
		ha_dw *d = ha_dw_open(fd, path);
		if (!d)
			continue;
		if (!m->bid_len || strcmp(ha_dw_build_id(d), want) == 0)
			return d;
		ha_dw_close(d);
	}
	if (short_of) {
		if (!said_passing)
			say("heapalloc: %s: cannot open it now (%s); its frames stay addresses until "
			    "a later profile opens it", path, strerror(short_of));
		said_passing = 1;
		*again = 1;
		return NULL;
	}
	say("heapalloc: %s: %s; its frames stay addresses", path,
	    m->bid_len ? "no readable file with the mapped build ID" :
			 "the mapped file cannot be read and it has no build ID to find it by");
	return NULL;
}

static rec *rec_for(const ha_sym_map *m)
{
	for (size_t i = 0; i < nrecs; i++)
		if (same_map(&recs[i], m))
			return &recs[i];
	if (nrecs == crecs) {
		size_t c = crecs ? 2 * crecs : 16;
		rec *p = realloc(recs, c * sizeof *p);
		if (!p)
			return NULL;
		recs = p;
		crecs = c;
	}
	rec *r = &recs[nrecs++];
	memset(r, 0, sizeof *r);
	r->start = m->start;
	r->limit = m->limit;
	r->offset = m->offset;
	r->bid_len = m->bid_len <= sizeof r->bid ? m->bid_len : 0;
	memcpy(r->bid, m->bid, r->bid_len);
	r->dw = open_mapping(m, &r->again);
	if (r->dw && ha_dw_link_start(r->dw, m->offset, &r->link_start) != 0) {
		say("heapalloc: %.*s: no loadable segment at file offset 0x%lx; its frames stay addresses",
		    (int)m->path_len, m->path, (unsigned long)m->offset);
		ha_dw_close(r->dw);
		r->dw = NULL;
	}
	if (r->dw)
		r->dwarf = ha_dw_has_dwarf(r->dw);
	return r;
}

/* The slot of address a in r's cache (grown first); NULL out of memory. */
static seen *seen_slot(rec *r, uintptr_t a)
{
	if (!r->seen || 2 * (r->sn + 1) > r->smask + 1) {
		size_t cap = r->seen ? 2 * (r->smask + 1) : 256;
		seen *s = calloc(cap, sizeof *s);
		if (!s)
			return NULL;
		for (size_t i = 0; r->seen && i <= r->smask; i++) {
			if (!r->seen[i].a)
				continue;
			size_t j = (size_t)(r->seen[i].a * 0x9e3779b97f4a7c15ull >> 20) & (cap - 1);
			while (s[j].a)
				j = (j + 1) & (cap - 1);
			s[j] = r->seen[i];
		}
		free(r->seen);
		r->seen = s;
		r->smask = cap - 1;
	}
	size_t j = (size_t)(a * 0x9e3779b97f4a7c15ull >> 20) & r->smask;
	while (r->seen[j].a && r->seen[j].a != a)
		j = (j + 1) & r->smask;
	return &r->seen[j];
}

static int add_frames(rec *r, size_t k)
{
	if (r->nframes + k <= r->cframes)
		return 0;
	size_t c = r->cframes ? 2 * r->cframes : 1024;
	while (c < r->nframes + k)
		c *= 2;
	uint32_t *f = realloc(r->ffn, c * sizeof *f);
	if (!f)
		return -1;
	r->ffn = f;
	uint32_t *l = realloc(r->fline, c * sizeof *l);
	if (!l)
		return -1;
	r->fline = l;
	r->cframes = c;
	return 0;
}

/* ---- the interface -------------------------------------------------------------- */

static void op_begin(const ha_sym_map *maps, size_t n)
{
	size_t w = 0;
	for (size_t i = 0; i < nrecs; i++) {   /* kept: still mapped, and not to retry */
		int there = 0;
		for (size_t k = 0; k < n && !there; k++)
			there = same_map(&recs[i], &maps[k]);
		if (there && !(recs[i].again && !recs[i].dw))
			recs[w++] = recs[i];
		else
			rec_free(&recs[i]);
	}
	nrecs = w;
}

static int op_lookup(const ha_sym_map *m, uintptr_t a, uint32_t *fn, uint32_t *line, int max,
		     int *dwarf)
{
	rec *r = rec_for(m);
	*dwarf = 0;
	if (!r || !r->dw || !a)
		return 0;
	*dwarf = r->dwarf;
	seen *s = seen_slot(r, a);
	if (s && !s->a) {
		ha_dw_frame fr[MAXFRAMES];
		int have = 0;
		int k = ha_dw_lookup(r->dw, a - r->start + r->link_start, fr, MAXFRAMES, &have);
		if (k > 0 && add_frames(r, (size_t)k) == 0) {
			uint32_t first = (uint32_t)r->nframes, got = 0;
			for (int i = 0; i < k; i++) {
				uint32_t id = function_id(fr[i].sym ? fr[i].sym : "??", fr[i].file,
							  fr[i].decl_line);
				if (!id)
					break;
				r->ffn[first + got] = id;
				r->fline[first + got++] = (uint32_t)fr[i].line;
			}
			if (got == (uint32_t)k) {   /* all or nothing: a chain cut short misleads */
				r->nframes += got;
				*s = (seen){ a, first, got };
				r->sn++;
			}
		} else if (k == 0) {
			*s = (seen){ a, 0, 0 };    /* remembered as nameless */
			r->sn++;
		}
	}
	if (!s || !s->a)
		return 0;
	int n = (int)s->n < max ? (int)s->n : max;
	memcpy(fn, r->ffn + s->first, (size_t)n * sizeof *fn);
	memcpy(line, r->fline + s->first, (size_t)n * sizeof *line);
	return n;
}

static void op_function(uint32_t id, uint32_t s[3], uint32_t *start_line)
{
	const func *f = &fns[id - 1];
	memcpy(s, f->s, sizeof f->s);
	*start_line = f->start_line;
}

static const char *op_string(uint32_t id, size_t *len)
{
	*len = strs[id - 1].len;
	return strs[id - 1].s;
}

static void op_counts(uint32_t *nfn, uint32_t *nstr)
{
	*nfn = nfns;
	*nstr = nstrs;
}

static void op_forget(void)
{
	recs = NULL;
	nrecs = crecs = 0;
	strs = NULL;
	nstrs = cstrs = 0;
	fns = NULL;
	nfns = cfns = 0;
	memset(&str_idx, 0, sizeof str_idx);
	memset(&fn_idx, 0, sizeof fn_idx);
}

static const ha_sym_ops ops = {
	HA_SYM_ABI, op_begin, op_lookup, op_function, op_string, op_counts, op_forget,
};

EXPORT const ha_sym_ops *heapalloc_sym_ops(void)
{
	return &ops;
}
