/* prof/pprof.c — the profile as pprof protobuf (profile.proto), gzipped.
 *
 * What Go's runtime writes for a heap profile, so every pprof reads it
 * without guessing:
 *   sample types  alloc_objects/count alloc_space/bytes inuse_objects/count
 *                 inuse_space/bytes, default inuse_space
 *   period        space/bytes = the sampling interval R
 *   samples       one per bucket, values already unsampled (Go's
 *                 scaleHeapSample: each count/bytes pair times
 *                 1 / (1 - e^(-avg/R)), avg = bytes / count of that pair;
 *                 exact when R = 1) and calibrated to the books
 *                 (calibrate.c), numeric label `bytes` = object size and,
 *                 when sampled, `sampling_error` = the site's relative
 *                 standard error in permille
 *   comments      how the values were made (calibrate.c's lines)
 *   mappings      every executable mapping of /proc/self/maps with its true
 *                 start, limit, file offset, path and GNU build ID (read
 *                 from the loaded image's PT_NOTE in memory)
 *   locations     one per distinct return address, stepped back by one so
 *                 it lies inside the call instruction; in a profile with
 *                 names (ha_pprof_mem_named) also its function, file:line
 *                 and inlined frames, innermost first, from the symboliser
 *                 plugin (prof/names.c), and each mapping's has_* flags
 *                 saying what its locations carry
 * The allocating thread's name is not a label: buckets are shared by all
 * threads, and keeping a name per sample would cost a lookup on every
 * sample.  Dumps written to files carry addresses only (heapalloc-symbolize
 * names them offline): they may be written under memory pressure.
 *
 * Never calls the public malloc: everything, zlib's state included (gzip.c), lives
 * in ha_dump_mem memory (writer.c: raw memory, or the pre-OOM reserve).
 * Holds the table lock only for the snapshot copy; the caller holds ha_prof_dump_lock.  Never uses dl_iterate_phdr
 * (the loader lock): the memory map comes from /proc/self/maps, and ELF
 * headers and notes are copied by process_vm_readv, so a library unloaded
 * meanwhile costs its build ID, never a fault.
 * File protocol as the text writer: FILE.tmp, then rename; or the gzipped
 * bytes in memory, named (ha_pprof_mem_named, for heapalloc_profile_pprof
 * and the HTTP endpoint, which may ask for alloc_space as the default sample type and
 * hand in a delta's lines, whose in-use values may be negative).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>

#include "prof/prof.h"
#include "prof/pb.h"
#include "prof/sampler.h"
#include "prof/sym_abi.h"

#define BUILD_ID_MAX 64

typedef struct pmap {
	uintptr_t start, limit, offset;
	const char *path;         /* into the maps text, not terminated */
	size_t path_len;
	char perm_r, perm_x;
	uint64_t id;              /* mapping id, 0 when not executable */
	uint64_t path_str, bid_str;   /* string table indices, 0 none */
	unsigned char bid[BUILD_ID_MAX];
	size_t bid_len;
} pmap;

/* Fixed strings, index = position (index 0 must be ""). */
static const char *const fixed_str[] = {
	"", "alloc_objects", "count", "alloc_space", "bytes", "inuse_objects",
	"inuse_space", "space", "sampling_error", "permille",
};
enum { S_ALLOC_OBJECTS = 1, S_COUNT, S_ALLOC_SPACE, S_BYTES, S_INUSE_OBJECTS,
       S_INUSE_SPACE, S_SPACE, S_SAMPLING_ERROR, S_PERMILLE, S_FIXED };
#define COMMENTS_MAX 8            /* ha_calib_comment's lines */

static uint64_t parse_hex(const char **s, const char *end)
{
	uint64_t v = 0;
	const char *p = *s;
	for (; p < end; p++) {
		char c = *p;
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			break;
		v = v << 4 | (uint64_t)d;
	}
	*s = p;
	return v;
}

static const char *skip_field(const char *p, const char *end)
{
	while (p < end && *p != ' ')
		p++;
	while (p < end && *p == ' ')
		p++;
	return p;
}

/* Parse one /proc/self/maps line: start-end perms offset dev inode path. */
static int parse_line(const char *p, const char *end, pmap *m)
{
	memset(m, 0, sizeof *m);
	m->start = parse_hex(&p, end);
	if (p >= end || *p != '-')
		return -1;
	p++;
	m->limit = parse_hex(&p, end);
	if (p + 5 > end || *p != ' ')
		return -1;
	m->perm_r = p[1];
	m->perm_x = p[3];
	p = skip_field(p + 1, end);
	m->offset = parse_hex(&p, end);
	p = skip_field(p, end);      /* to dev */
	p = skip_field(p, end);      /* to inode */
	p = skip_field(p, end);      /* to path */
	m->path = p;
	m->path_len = (size_t)(end - p);
	return 0;
}

static int same_path(const pmap *a, const pmap *b)
{
	return a->path_len && a->path_len == b->path_len &&
	       memcmp(a->path, b->path, a->path_len) == 0;
}

/* Copy n bytes at address a of this process into dst, or fail: a library
 * unloaded since /proc/self/maps was read must not fault the dump, so the
 * kernel does the reading (process_vm_readv on ourselves: EFAULT, never
 * SIGSEGV).  0 ok, -1 not readable or the call is not allowed. */
static int peek(void *dst, uintptr_t a, size_t n)
{
	struct iovec l = { dst, n }, r = { (void *)a, n };
	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)n ? 0 : -1;
}

/* The GNU build ID of m's file, from its loaded ELF header and PT_NOTE
 * segments in memory.  The file's first mapping (offset 0) holds the ELF
 * header; its load bias is that mapping's start minus the page of the
 * first PT_LOAD's p_vaddr. */
static void read_build_id(const pmap *maps, size_t nm, pmap *m)
{
	const pmap *head = NULL;
	for (size_t i = 0; i < nm; i++)
		if (maps[i].offset == 0 && maps[i].perm_r == 'r' && same_path(&maps[i], m)) {
			head = &maps[i];
			break;
		}
	Elf64_Ehdr eh;
	if (!head || peek(&eh, head->start, sizeof eh) != 0)
		return;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 64)
		return;
	Elf64_Phdr ph[64];
	if (peek(ph, head->start + eh.e_phoff, (size_t)eh.e_phnum * sizeof *ph) != 0)
		return;
	uintptr_t first = UINTPTR_MAX;
	for (int i = 0; i < eh.e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < first)
			first = ph[i].p_vaddr;
	if (first == UINTPTR_MAX)
		return;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t bias = head->start - (first & ~(page - 1));
	for (int i = 0; i < eh.e_phnum; i++) {
		unsigned char note[1024];
		if (ph[i].p_type != PT_NOTE)
			continue;
		size_t len = ph[i].p_memsz < sizeof note ? ph[i].p_memsz : sizeof note;
		if (peek(note, bias + ph[i].p_vaddr, len) != 0)
			continue;
		for (size_t at = 0; at + sizeof(Elf64_Nhdr) <= len;) {
			Elf64_Nhdr nh;
			memcpy(&nh, note + at, sizeof nh);
			size_t name = at + sizeof nh;
			size_t desc = name + ((nh.n_namesz + 3) & ~3u);
			size_t next = desc + ((nh.n_descsz + 3) & ~3u);
			if (next > len || next <= at)
				break;
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    memcmp(note + name, "GNU", 4) == 0 && nh.n_descsz &&
			    nh.n_descsz <= BUILD_ID_MAX) {
				memcpy(m->bid, note + desc, nh.n_descsz);
				m->bid_len = nh.n_descsz;
				return;
			}
			at = next;
		}
	}
}

/* Address -> location id, open addressing over a power-of-two table that
 * doubles at half full (distinct return addresses are far fewer than the
 * frames of all stacks).  by_id[id - 1] = address, in id order. */
typedef struct loc_table {
	uintptr_t *addr;          /* slot -> address; 0 = empty */
	uint32_t *id;             /* slot -> id */
	uintptr_t *by_id;
	size_t mask, n;
	int err;                  /* ENOMEM once growing failed */
} loc_table;

static size_t loc_slot(const loc_table *t, uintptr_t a)
{
	size_t i = (size_t)((a * 0x9e3779b97f4a7c15ull) >> 17) & t->mask;
	while (t->addr[i] && t->addr[i] != a)
		i = (i + 1) & t->mask;
	return i;
}

static int loc_grow(loc_table *t)
{
	size_t cap = t->addr ? 2 * (t->mask + 1) : 4096;
	loc_table g = { ha_dump_mem(cap * sizeof *g.addr), ha_dump_mem(cap * sizeof *g.id),
			ha_dump_mem(cap / 2 * sizeof *g.by_id), cap - 1, t->n, 0 };
	if (!g.addr || !g.id || !g.by_id) {
		if (g.addr)
			ha_dump_mem_free(g.addr);
		if (g.id)
			ha_dump_mem_free(g.id);
		if (g.by_id)
			ha_dump_mem_free(g.by_id);
		return t->err = ENOMEM;
	}
	memset(g.addr, 0, cap * sizeof *g.addr);
	for (size_t k = 0; k < t->n; k++) {
		size_t i = loc_slot(&g, t->by_id[k]);
		g.addr[i] = t->by_id[k];
		g.id[i] = (uint32_t)(k + 1);
		g.by_id[k] = t->by_id[k];
	}
	if (t->addr) {
		ha_dump_mem_free(t->addr);
		ha_dump_mem_free(t->id);
		ha_dump_mem_free(t->by_id);
	}
	*t = g;
	return 0;
}

/* The id of address a (a new one if unseen); 0 when out of memory. */
static uint32_t loc_id(loc_table *t, uintptr_t a)
{
	if ((!t->addr || 2 * (t->n + 1) > t->mask + 1) && loc_grow(t))
		return 0;
	size_t i = loc_slot(t, a);
	if (!t->addr[i]) {
		t->addr[i] = a;
		t->by_id[t->n] = a;
		t->id[i] = (uint32_t)++t->n;
	}
	return t->id[i];
}

/* Go's scaleHeapSample: unsample one count/bytes pair. */
static void unsample(uint64_t c, uint64_t b, int64_t r, uint64_t *oc, uint64_t *ob)
{
	if (!c || !b || r <= 1) {
		*oc = c;
		*ob = b;
		return;
	}
	double avg = (double)b / (double)c;
	double scale = 1.0 / ha_sample_p(avg / (double)r);
	*oc = (uint64_t)((double)c * scale);
	*ob = (uint64_t)((double)b * scale);
}

/* Flush the part of a message buffer that is complete into o. */
static void emit(ha_out *o, unsigned field, const pb_buf *m)
{
	unsigned char hdr[16];
	pb_buf h = { hdr, 0, sizeof hdr, 0 };
	if (m->over)
		return;
	pb_key(&h, field, 2);
	pb_varint(&h, m->len);
	ha_out_bytes(o, (const char *)hdr, h.len);
	ha_out_bytes(o, (const char *)m->p, m->len);
}

static void emit_string(ha_out *o, const void *s, size_t n)
{
	pb_buf m = { (unsigned char *)(uintptr_t)s, n, n, 0 };
	emit(o, PB_PROFILE_STRING, &m);
}

static void value_type(ha_out *o, unsigned field, uint64_t type, uint64_t unit)
{
	unsigned char t[32];
	pb_buf m = { t, 0, sizeof t, 0 };
	pb_int(&m, PB_VALUETYPE_TYPE, type);
	pb_int(&m, PB_VALUETYPE_UNIT, unit);
	emit(o, field, &m);
}

/* profile.proto's duration_nanos (a served delta's window) */
#define PB_DURATION_NANOS 10

/* Unsample an in-use pair that may be negative (a delta's lines, prof/http_request.c):
 * a shrinking pair is unsampled as its growth, negated; mixed signs are
 * left as they are. */
static void unsample_signed(uint64_t c, uint64_t b, int64_t r, uint64_t *oc, uint64_t *ob)
{
	if ((int64_t)c >= 0 && (int64_t)b >= 0) {
		unsample(c, b, r, oc, ob);
	} else if ((int64_t)c <= 0 && (int64_t)b <= 0) {
		unsample(-c, -b, r, oc, ob);
		*oc = -*oc;
		*ob = -*ob;
	} else {
		*oc = c;
		*ob = b;
	}
}

/* What the second half of the encoding (encode_tail) needs from the
 * first: the memory map, its parse and the location table.  enc_free
 * frees it. */
typedef struct enc {
	ha_out mo;                /* /proc/self/maps text (maps[].path points into it) */
	pmap *maps;
	size_t nm;
	loc_table lt;
	uint64_t nstr;            /* strings written so far */
} enc;

static void enc_free(enc *e)
{
	if (e->lt.addr)
		ha_dump_mem_free(e->lt.addr);
	if (e->lt.id)
		ha_dump_mem_free(e->lt.id);
	if (e->lt.by_id)
		ha_dump_mem_free(e->lt.by_id);
	if (e->maps)
		ha_dump_mem_free(e->maps);
	if (e->mo.buf)
		ha_dump_mem_free(e->mo.buf);
}

/* Encode the profile but its mappings, locations and functions into o
 * (memory), and hand e what encode_tail needs to add them (e must be
 * enc_free'd in any case).  o->err on failure.  how: a served profile's
 * default sample type and window (NULL: a dump's). */
static void encode(ha_out *o, int64_t r, const ha_lineset *set, const ha_pprof_how *how,
		   enc *e)
{
	ha_out mo = { NULL, 0, 0, -1, 0 };
	uint64_t nstr = S_FIXED, nid = 0;
	pmap *maps = NULL;
	size_t nm = 0;
	loc_table lt = { NULL, NULL, NULL, 0, 0, 0 };
	size_t n = 0;
	int own;
	memset(e, 0, sizeof *e);
	const ha_line *lines = ha_lines_of(set, &n, &own);
	if (!lines && n) {
		o->err = ENOMEM;
		return;
	}
	/* the values (calibrate.c) and the comments, whose strings come right
	 * after the fixed ones */
	ha_calib cal;
	uint64_t *cv = ha_calib_values(lines, n, r, set, &cal);
	char comment[COMMENTS_MAX][512];
	int nc = 0;
	while (nc < COMMENTS_MAX && ha_calib_comment(&cal, nc, comment[nc], sizeof comment[nc]) >= 0)
		nc++;
	if (nc < COMMENTS_MAX) {
		/* whose profile it is: an exec'd descendant's files are named
		 * by its pid only */
		int k = ha_snprintf(comment[nc], sizeof comment[nc], "command: ");
		ha_cmdline(comment[nc] + k, sizeof comment[nc] - (size_t)k - 48);
		if (ha_prof_opt.profile_root)
			ha_snprintf(comment[nc] + strlen(comment[nc]), 48,
				    " (pid %d, descendant of pid %lld)", (int)getpid(),
				    (long long)ha_prof_opt.profile_root);
		nc++;
	}

	/* the memory map */
	ha_writer_maps(&mo);
	size_t nlines = 0;
	for (size_t i = 0; i < mo.len; i++)
		nlines += mo.buf[i] == '\n';
	if (nlines && !(maps = ha_dump_mem(nlines * sizeof *maps)))
		goto nomem;
	for (size_t i = 0, s = 0; i < mo.len; i++) {
		if (mo.buf[i] != '\n')
			continue;
		if (parse_line(mo.buf + s, mo.buf + i, &maps[nm]) == 0)
			nm++;
		s = i + 1;
	}
	nstr += (uint64_t)nc;   /* the comments' strings come first */
	for (size_t i = 0; i < nm; i++) {
		pmap *m = &maps[i];
		if (m->perm_x != 'x')
			continue;
		m->id = ++nid;
		if (m->path_len)
			m->path_str = nstr++;
		if (m->path_len && m->path[0] == '/') {
			read_build_id(maps, nm, m);
			if (m->bid_len)
				m->bid_str = nstr++;
		}
	}

	value_type(o, PB_PROFILE_SAMPLE_TYPE, S_ALLOC_OBJECTS, S_COUNT);
	value_type(o, PB_PROFILE_SAMPLE_TYPE, S_ALLOC_SPACE, S_BYTES);
	value_type(o, PB_PROFILE_SAMPLE_TYPE, S_INUSE_OBJECTS, S_COUNT);
	value_type(o, PB_PROFILE_SAMPLE_TYPE, S_INUSE_SPACE, S_BYTES);

	for (size_t i = 0; i < n; i++) {
		const ha_line *l = &lines[i];
		if ((!l->alloc_count && !l->free_count) || !l->b->depth)
			continue;     /* a delta's line may only have frees */
		uint64_t ids[HA_PROF_DEPTH], v[4];
		uint32_t depth = l->b->depth < HA_PROF_DEPTH ? l->b->depth : HA_PROF_DEPTH;
		for (uint32_t d = 0; d < depth; d++)
			ids[d] = loc_id(&lt, l->b->pcs[d] - 1);
		if (lt.err)
			goto nomem;
		if (cv) {
			memcpy(v, &cv[4 * i], sizeof v);
		} else {
			unsample(l->alloc_count, l->alloc_bytes, r, &v[0], &v[1]);
			unsample_signed(l->alloc_count - l->free_count,
					l->alloc_bytes - l->free_bytes, r, &v[2], &v[3]);
		}
		unsigned char t[1024], lab[32];
		pb_buf m = { t, 0, sizeof t, 0 };
		pb_packed(&m, PB_SAMPLE_LOCATION_ID, ids, depth);
		pb_packed(&m, PB_SAMPLE_VALUE, v, 4);
		pb_buf lb = { lab, 0, sizeof lab, 0 };
		pb_int(&lb, PB_LABEL_KEY, S_BYTES);
		pb_int(&lb, PB_LABEL_NUM, l->alloc_count ? l->alloc_bytes / l->alloc_count
						       : l->free_bytes / l->free_count);
		pb_bytes(&m, PB_SAMPLE_LABEL, lab, lb.len);
		if (r > 1) {
			/* the site's relative standard error, of what is in use
			 * when anything is, else of what was allocated */
			uint64_t ic = l->alloc_count - l->free_count;
			double e = ic ? ha_calib_rse(ic, l->alloc_bytes - l->free_bytes, r)
				      : ha_calib_rse(l->alloc_count, l->alloc_bytes, r);
			lb.len = 0;
			pb_int(&lb, PB_LABEL_KEY, S_SAMPLING_ERROR);
			pb_int(&lb, PB_LABEL_NUM, (uint64_t)(e * 1000 + 0.5));
			pb_int(&lb, PB_LABEL_NUM_UNIT, S_PERMILLE);
			pb_bytes(&m, PB_SAMPLE_LABEL, lab, lb.len);
		}
		emit(o, PB_PROFILE_SAMPLE, &m);
	}

	for (size_t i = 0; i < S_FIXED; i++)
		emit_string(o, fixed_str[i], strlen(fixed_str[i]));
	for (int i = 0; i < nc; i++)
		emit_string(o, comment[i], strlen(comment[i]));
	for (size_t i = 0; i < nm; i++) {
		const pmap *mp = &maps[i];
		if (mp->path_str)
			emit_string(o, mp->path, mp->path_len);
		if (mp->bid_str) {
			char hex[2 * BUILD_ID_MAX];
			for (size_t j = 0; j < mp->bid_len; j++) {
				hex[2 * j] = "0123456789abcdef"[mp->bid[j] >> 4];
				hex[2 * j + 1] = "0123456789abcdef"[mp->bid[j] & 15];
			}
			emit_string(o, hex, 2 * mp->bid_len);
		}
	}

	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	unsigned char t[64 + 4 * COMMENTS_MAX];
	pb_buf m = { t, 0, sizeof t, 0 };
	uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	if (how && how->duration_ns > 0)     /* a delta is stamped with its start, as Go does */
		now_ns -= (uint64_t)how->duration_ns;
	pb_int(&m, PB_PROFILE_TIME_NANOS, now_ns);
	if (how && how->duration_ns > 0)
		pb_int(&m, PB_DURATION_NANOS, (uint64_t)how->duration_ns);
	ha_out_bytes(o, (const char *)t, m.len);
	value_type(o, PB_PROFILE_PERIOD_TYPE, S_SPACE, S_BYTES);
	m.len = 0;
	pb_int(&m, PB_PROFILE_PERIOD, (uint64_t)(r > 1 ? r : 1));
	pb_int(&m, PB_PROFILE_DEFAULT_SAMPLE_TYPE,
	       how && how->alloc_default ? S_ALLOC_SPACE : S_INUSE_SPACE);
	for (int i = 0; i < nc; i++)
		pb_int(&m, PB_PROFILE_COMMENT, S_FIXED + (uint64_t)i);
	ha_out_bytes(o, (const char *)t, m.len);
	goto out;
nomem:
	o->err = ENOMEM;
out:
	e->mo = mo;
	e->maps = maps;
	e->nm = nm;
	e->lt = lt;
	e->nstr = nstr;
	if (cv)
		ha_dump_mem_free(cv);
	if (lines && own)
		ha_dump_mem_free((void *)lines);
}

/* The mapping holding address a: its index + 1, 0 none (exec mappings are
 * few and sorted: a scan is enough). */
static size_t map_of(const enc *e, uintptr_t a)
{
	for (size_t i = 0; i < e->nm; i++)
		if (e->maps[i].id && a >= e->maps[i].start && a < e->maps[i].limit)
			return i + 1;
	return 0;
}

/* Names of the locations, from the symboliser plugin: location k's lines
 * are fn/line[first[k] .. first[k + 1]), innermost first; flag[i] says
 * what mapping i's locations carry.  Raw memory. */
enum { NAMED_FN = 1, NAMED_DWARF = 2 };
typedef struct names {
	const ha_sym_ops *ops;
	uint32_t *first, *fn, *line;
	size_t n, cap;
	unsigned char *flag;
	uint32_t nfn, nstr;       /* the plugin's id counts after the lookups */
} names;

static void names_free(names *nm)
{
	ha_raw_free(nm->first);
	ha_raw_free(nm->fn);
	ha_raw_free(nm->line);
	ha_raw_free(nm->flag);
	memset(nm, 0, sizeof *nm);
}

/* Look every location up; on ENOMEM nm is emptied (addresses only).  No
 * profiler lock held: this is where libdw reads and indexes files. */
static void name_locations(const enc *e, const ha_sym_ops *ops, names *nm)
{
	enum { MAXLINES = 64 };
	memset(nm, 0, sizeof *nm);
	ha_sym_map *sm = ha_raw_malloc((e->nm + 1) * sizeof *sm);
	nm->first = ha_raw_malloc((e->lt.n + 1) * sizeof *nm->first);
	nm->flag = ha_raw_calloc(e->nm + 1, 1);
	if (!sm || !nm->first || !nm->flag)
		goto fail;
	size_t ns = 0;
	for (size_t i = 0; i < e->nm; i++) {
		const pmap *m = &e->maps[i];
		if (m->id)
			sm[ns++] = (ha_sym_map){ m->start, m->limit, m->offset, m->path, m->path_len,
						 m->bid, m->bid_len };
	}
	ops->begin(sm, ns);
	for (size_t k = 0; k < e->lt.n; k++) {
		uintptr_t a = e->lt.by_id[k];
		size_t mi = map_of(e, a);
		nm->first[k] = (uint32_t)nm->n;
		const pmap *m = mi ? &e->maps[mi - 1] : NULL;
		if (!m || !m->path_len || m->path[0] != '/')
			continue;         /* anonymous code, [vdso]: nothing to read */
		if (nm->n + MAXLINES > nm->cap) {
			size_t cap = nm->cap ? 2 * nm->cap : 4096;
			uint32_t *f = ha_raw_malloc(cap * sizeof *f), *l = ha_raw_malloc(cap * sizeof *l);
			if (!f || !l) {
				ha_raw_free(f);
				ha_raw_free(l);
				goto fail;
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
		}
		const ha_sym_map want = { m->start, m->limit, m->offset, m->path, m->path_len,
					  m->bid, m->bid_len };
		int dwarf = 0;
		int got = ops->lookup(&want, a, nm->fn + nm->n, nm->line + nm->n, MAXLINES, &dwarf);
		if (got > 0) {
			nm->n += (size_t)got;
			nm->flag[mi - 1] |= NAMED_FN | (dwarf ? NAMED_DWARF : 0);
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

/* The profile's string index of the plugin's string id s, written the
 * first time it is needed (str_at[s], 0 not yet). */
static uint64_t name_str(ha_out *o, enc *e, const names *nm, uint64_t *str_at, uint32_t s)
{
	if (!s || s > nm->nstr)
		return 0;
	if (!str_at[s]) {
		size_t len;
		const char *p = nm->ops->string(s, &len);
		emit_string(o, p, len);
		str_at[s] = e->nstr++;
	}
	return str_at[s];
}

/* The second half: mappings (with what their locations carry), locations
 * (with their lines when nm has names) and the functions they name. */
static void encode_tail(ha_out *o, enc *e, const names *nm)
{
	uint64_t *str_at = NULL;
	unsigned char *fn_done = NULL;
	if (nm && nm->ops) {
		str_at = ha_dump_mem((nm->nstr + 1) * sizeof *str_at);
		fn_done = ha_dump_mem(nm->nfn + 1);
		if (!str_at || !fn_done) {
			o->err = ENOMEM;
			goto out;
		}
		memset(str_at, 0, (nm->nstr + 1) * sizeof *str_at);
		memset(fn_done, 0, nm->nfn + 1);
	} else {
		nm = NULL;
	}
	for (size_t i = 0; i < e->nm; i++) {
		const pmap *mp = &e->maps[i];
		if (!mp->id)
			continue;
		unsigned char t[128];
		pb_buf m = { t, 0, sizeof t, 0 };
		unsigned f = nm ? nm->flag[i] : 0, dw = (f & NAMED_DWARF) != 0;
		pb_int(&m, PB_MAPPING_ID, mp->id);
		pb_int(&m, PB_MAPPING_START, mp->start);
		pb_int(&m, PB_MAPPING_LIMIT, mp->limit);
		pb_int(&m, PB_MAPPING_OFFSET, mp->offset);
		pb_int(&m, PB_MAPPING_FILENAME, mp->path_str);
		pb_int(&m, PB_MAPPING_BUILD_ID, mp->bid_str);
		pb_int(&m, PB_MAPPING_HAS_FUNCTIONS, (f & NAMED_FN) != 0);
		pb_int(&m, PB_MAPPING_HAS_FILENAMES, dw);
		pb_int(&m, PB_MAPPING_HAS_LINE_NUMBERS, dw);
		pb_int(&m, PB_MAPPING_HAS_INLINE_FRAMES, dw);
		emit(o, PB_PROFILE_MAPPING, &m);
	}
	for (size_t k = 0; k < e->lt.n; k++) {
		uintptr_t a = e->lt.by_id[k];
		size_t mi = map_of(e, a);
		unsigned char t[1024];
		pb_buf m = { t, 0, sizeof t, 0 };
		pb_int(&m, PB_LOCATION_ID, k + 1);
		pb_int(&m, PB_LOCATION_MAPPING_ID, mi ? e->maps[mi - 1].id : 0);
		pb_int(&m, PB_LOCATION_ADDRESS, a);
		for (uint32_t j = nm ? nm->first[k] : 0; nm && j < nm->first[k + 1]; j++) {
			unsigned char lt[32];
			pb_buf lb = { lt, 0, sizeof lt, 0 };
			pb_int(&lb, PB_LINE_FUNCTION_ID, nm->fn[j]);
			pb_int(&lb, PB_LINE_LINE, nm->line[j]);
			pb_bytes(&m, PB_LOCATION_LINE, lt, lb.len);
			uint32_t id = nm->fn[j];
			if (id > nm->nfn || fn_done[id])
				continue;
			fn_done[id] = 1;
			uint32_t s[3], start;
			nm->ops->function(id, s, &start);
			unsigned char ft[64];
			pb_buf fb = { ft, 0, sizeof ft, 0 };
			pb_int(&fb, PB_FUNCTION_ID, id);
			pb_int(&fb, PB_FUNCTION_NAME, name_str(o, e, nm, str_at, s[0]));
			pb_int(&fb, PB_FUNCTION_SYSTEM_NAME, name_str(o, e, nm, str_at, s[1]));
			pb_int(&fb, PB_FUNCTION_FILENAME, name_str(o, e, nm, str_at, s[2]));
			pb_int(&fb, PB_FUNCTION_START_LINE, start);
			emit(o, PB_PROFILE_FUNCTION, &fb);
		}
		emit(o, PB_PROFILE_LOCATION, &m);
	}
out:
	if (str_at)
		ha_dump_mem_free(str_at);
	if (fn_done)
		ha_dump_mem_free(fn_done);
}

int ha_pprof_file(const char *path, int64_t r)
{
	return ha_pprof_file_from(path, r, NULL);
}

struct gz_job {
	const char *buf;
	size_t len;
};

/* ha_write_file's filler: the encoded profile, gzipped into the file; a
 * failure is the output's error, so no partial file is renamed into place. */
static void fill_gz(ha_out *f, void *arg)
{
	const struct gz_job *j = arg;
	int e = ha_gzip_to(f, j->buf, j->len);
	if (e && !f->err)
		f->err = e;
}

/* The profile without names, under ha_prof_dump_lock, into o. */
static void encode_all(ha_out *o, int64_t r, const ha_lineset *set, const ha_pprof_how *how)
{
	enc e;
	encode(o, r, set, how, &e);
	if (!o->err)
		encode_tail(o, &e, NULL);
	enc_free(&e);
}

int ha_pprof_file_from(const char *path, int64_t r, const ha_lineset *set)
{
	ha_out o = { NULL, 0, 0, -1, 0 };
	encode_all(&o, r, set, NULL);
	int err = o.err;
	if (!err) {
		struct gz_job j = { o.buf, o.len };
		err = ha_write_file(path, fill_gz, &j);   /* temp name, rename (writer.c) */
	}
	if (o.buf)
		ha_dump_mem_free(o.buf);
	return err;
}

/* Three steps, so that libdw's work holds no profiler lock: the samples
 * and the location table under ha_prof_dump_lock; the lookups with only
 * the plugin's lock; the locations, functions and gzip under the dump lock
 * again (ha_dump_mem's reserve is the lock's). */
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
	enc e;
	memset(&e, 0, sizeof e);
	ha_lock(&ha_prof_dump_lock);
	int err = ha_prof_running() && (!how || !how->gen || how->gen == ha_prof_generation())
		  ? 0 : ENOENT;
	if (!err) {
		encode(&o, r, set, how, &e);
		err = o.err;
	}
	ha_unlock(&ha_prof_dump_lock);
	names nm;
	memset(&nm, 0, sizeof nm);
	if (!err && ops) {
		ha_books_own_begin(mark);
		name_locations(&e, ops, &nm);
		ha_books_own_end(mark);
	}
	ha_lock(&ha_prof_dump_lock);
	if (!err) {
		encode_tail(&o, &e, &nm);
		err = o.err;
	}
	if (!err)
		err = ha_gzip_to(gz, o.buf, o.len);
	if (o.buf)
		ha_dump_mem_free(o.buf);
	enc_free(&e);
	ha_unlock(&ha_prof_dump_lock);
	names_free(&nm);
	if (want)
		ha_names_unlock();
	ha_prof_busy = busy;
	return err;
}
