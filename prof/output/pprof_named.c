/* prof/output/pprof_named.c — a served profile with names: every location looked
 * up in the symboliser plugin (prof/output/sym_loader.c loads it; prof/sym_abi.h), its
 * function, file:line and inlined frames written with it, innermost first,
 * and each mapping's has_* flags saying what its locations carry.  Dumps
 * written to files carry addresses only (heapalloc-symbolize names them
 * offline): they may be written under memory pressure.
 *
 * ha_pprof_mem_named works in three steps, so that libdw's work holds no
 * profiler lock: the samples and the location table under
 * ha_prof_dump_lock (pprof.c's ha_pprof_head); the lookups with only the
 * plugin's lock; the locations, functions and gzip under the dump lock
 * again (ha_dump_mem's reserve is the lock's).  The plugin's own mallocs
 * stay out of the books (ha_books_own_*).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <string.h>

#include "prof/output/pprof.h"
#include "prof/sym_abi.h"

static void names_free(ha_pprof_names *nm)
{
	ha_raw_free(nm->first);
	ha_raw_free(nm->fn);
	ha_raw_free(nm->line);
	ha_raw_free(nm->flag);
	if (nm->str_at)
		ha_dump_mem_free(nm->str_at);
	if (nm->fn_done)
		ha_dump_mem_free(nm->fn_done);
	memset(nm, 0, sizeof *nm);
}

/* Room for max more lines in nm; 0 or ENOMEM. */
static int names_room(ha_pprof_names *nm, size_t max)
{
	if (nm->n + max <= nm->cap)
		return 0;
	size_t cap = nm->cap ? 2 * nm->cap : 4096;
	uint32_t *f = ha_raw_malloc(cap * sizeof *f), *l = ha_raw_malloc(cap * sizeof *l);
	if (!f || !l) {
		ha_raw_free(f);
		ha_raw_free(l);
		return ENOMEM;
	}
	if (nm->n) {
		memcpy(f, nm->fn, nm->n * sizeof *f);
		memcpy(l, nm->line, nm->n * sizeof *l);
	}
	ha_raw_free(nm->fn);
	ha_raw_free(nm->line);
	nm->fn = f;
	nm->line = l;
	nm->cap = cap;
	return 0;
}

static ha_sym_map sym_map(const ha_pmap *m)
{
	return (ha_sym_map){ m->start, m->limit, m->offset, m->path, m->path_len, m->bid,
			     m->bid_len };
}

/* Look every location up; on ENOMEM nm is emptied (addresses only).  No
 * profiler lock held: this is where libdw reads and indexes files. */
static void name_locations(const ha_pprof_enc *e, const ha_sym_ops *ops, ha_pprof_names *nm)
{
	enum { MAXLINES = 64 };
	memset(nm, 0, sizeof *nm);
	ha_sym_map *sm = ha_raw_malloc((e->nm + 1) * sizeof *sm);
	nm->first = ha_raw_malloc((e->lt.n + 1) * sizeof *nm->first);
	nm->flag = ha_raw_calloc(e->nm + 1, 1);
	if (!sm || !nm->first || !nm->flag)
		goto fail;
	size_t ns = 0;
	for (size_t i = 0; i < e->nm; i++)
		if (e->maps[i].id)
			sm[ns++] = sym_map(&e->maps[i]);
	ops->begin(sm, ns);
	for (size_t k = 0; k < e->lt.n; k++) {
		uintptr_t a = e->lt.by_id[k];
		size_t mi = ha_mappings_find(e->maps, e->nm, a);
		nm->first[k] = (uint32_t)nm->n;
		const ha_pmap *m = mi ? &e->maps[mi - 1] : NULL;
		if (!m || !m->path_len || m->path[0] != '/')
			continue;         /* anonymous code, [vdso]: nothing to read */
		if (names_room(nm, MAXLINES))
			goto fail;
		const ha_sym_map want = sym_map(m);
		int dwarf = 0;
		int got = ops->lookup(&want, a, nm->fn + nm->n, nm->line + nm->n, MAXLINES, &dwarf);
		if (got > 0) {
			nm->n += (size_t)got;
			nm->flag[mi - 1] |= HA_NAMED_FN | (dwarf ? HA_NAMED_DWARF : 0);
		}
	}
	nm->first[e->lt.n] = (uint32_t)nm->n;
	ops->counts(&nm->nfn, &nm->nstr);
	nm->ops = ops;
	ha_raw_free(sm);
	return;
fail:
	ha_raw_free(sm);
	names_free(nm);
}

int ha_pprof_names_ready(ha_pprof_names *nm)
{
	nm->str_at = ha_dump_mem((nm->nstr + 1) * sizeof *nm->str_at);
	nm->fn_done = ha_dump_mem(nm->nfn + 1);
	if (!nm->str_at || !nm->fn_done)
		return ENOMEM;
	memset(nm->str_at, 0, (nm->nstr + 1) * sizeof *nm->str_at);
	memset(nm->fn_done, 0, nm->nfn + 1);
	return 0;
}

/* The profile's string index of the plugin's string id s, written the
 * first time it is needed. */
static uint64_t name_str(ha_out *o, ha_pprof_enc *e, ha_pprof_names *nm, uint32_t s)
{
	if (!s || s > nm->nstr)
		return 0;
	if (!nm->str_at[s]) {
		size_t len;
		const char *p = nm->ops->string(s, &len);
		ha_pprof_emit_string(o, p, len);
		nm->str_at[s] = e->nstr++;
	}
	return nm->str_at[s];
}

/* The function record of plugin function id, once. */
static void name_function(ha_out *o, ha_pprof_enc *e, ha_pprof_names *nm, uint32_t id)
{
	if (id > nm->nfn || nm->fn_done[id])
		return;
	nm->fn_done[id] = 1;
	uint32_t s[3], start;
	nm->ops->function(id, s, &start);
	unsigned char ft[64];
	pb_buf fb = { ft, 0, sizeof ft, 0 };
	pb_int(&fb, PB_FUNCTION_ID, id);
	pb_int(&fb, PB_FUNCTION_NAME, name_str(o, e, nm, s[0]));
	pb_int(&fb, PB_FUNCTION_SYSTEM_NAME, name_str(o, e, nm, s[1]));
	pb_int(&fb, PB_FUNCTION_FILENAME, name_str(o, e, nm, s[2]));
	pb_int(&fb, PB_FUNCTION_START_LINE, start);
	ha_pprof_emit(o, PB_PROFILE_FUNCTION, &fb);
}

void ha_pprof_names_lines(ha_out *o, ha_pprof_enc *e, ha_pprof_names *nm, size_t k, pb_buf *m)
{
	for (uint32_t j = nm->first[k]; j < nm->first[k + 1]; j++) {
		unsigned char lt[32];
		pb_buf lb = { lt, 0, sizeof lt, 0 };
		pb_int(&lb, PB_LINE_FUNCTION_ID, nm->fn[j]);
		pb_int(&lb, PB_LINE_LINE, nm->line[j]);
		pb_bytes(m, PB_LOCATION_LINE, lt, lb.len);
		name_function(o, e, nm, nm->fn[j]);
	}
}

int ha_pprof_mem_named(ha_out *gz, int64_t r, const ha_lineset *set, const ha_pprof_how *how)
{
	ha_gzip_load();   /* the first time: dlopen, no lock held */
	int busy = ha_prof_busy;
	ha_prof_busy = 1;
	const ha_sym_ops *ops = NULL;
	int want = ha_prof_opt.symbolize != 0;
	int64_t mark[5];   /* the plugin's mallocs stay out of the books */
	if (want) {
		ha_names_lock();
		ha_books_own_begin(mark);
		ops = ha_names_ops();   /* the first time: dlopen, no other lock held */
		ha_books_own_end(mark);
	}
	ha_out o = { NULL, 0, 0, -1, 0 };
	ha_pprof_enc e;
	memset(&e, 0, sizeof e);
	ha_lock(&ha_prof_dump_lock);
	int err = ha_prof_running() && (!how || !how->gen || how->gen == ha_prof_generation())
		  ? 0 : ENOENT;
	if (!err) {
		ha_pprof_head(&o, r, set, how, &e);
		err = o.err;
	}
	ha_unlock(&ha_prof_dump_lock);
	ha_pprof_names nm;
	memset(&nm, 0, sizeof nm);
	if (!err && ops) {
		ha_books_own_begin(mark);
		name_locations(&e, ops, &nm);
		ha_books_own_end(mark);
	}
	ha_lock(&ha_prof_dump_lock);
	if (!err) {
		ha_pprof_tail(&o, &e, nm.ops ? &nm : NULL);
		err = o.err;
	}
	if (!err)
		err = ha_gzip_to(gz, o.buf, o.len);
	if (o.buf)
		ha_dump_mem_free(o.buf);
	ha_pprof_enc_free(&e);
	names_free(&nm);   /* str_at, fn_done: dump memory, freed under its lock */
	ha_unlock(&ha_prof_dump_lock);
	if (want)
		ha_names_unlock();
	ha_prof_busy = busy;
	return err;
}
