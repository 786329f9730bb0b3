/* prof/output/pprof.c — the encoder of the profile as pprof protobuf
 * (profile.proto), gzipped by gzip.c.
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
 *                 standard error in permille; a live profile's line is
 *                 split by `age` (seconds, its in-use values) and
 *                 `lifetime` (ns) with `lived` (its freed values):
 *                 split_line, ages.c
 *   comments      how the values were made (calibrate.c's lines) and whose
 *                 profile it is
 *   mappings      every executable mapping with its true start, limit, file
 *                 offset, path and GNU build ID (mappings.c)
 *   locations     one per distinct return address, stepped back by one so
 *                 it lies inside the call instruction; names only in a
 *                 served profile (pprof_named.c)
 * The allocating thread's name is not a label: buckets are shared by all
 * threads, and keeping a name per sample would cost a lookup on every
 * sample.
 *
 * Never calls the public malloc: everything lives in ha_dump_mem memory
 * (writer.c: raw memory, or the pre-OOM reserve).  Holds the table lock
 * only for the snapshot copy; the caller holds ha_prof_dump_lock.
 * File protocol as the text writer: FILE.tmp, then rename (gzip.c's
 * ha_gzip_file); or the bytes in memory (pprof_named.c, for
 * heapalloc_profile_pprof and the HTTP endpoint, which may ask for
 * alloc_space as the default sample type and hand in a delta's lines,
 * whose in-use values may be negative).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prof/output/pprof.h"

/* Fixed strings, index = position (index 0 must be ""); the lifetime
 * bins' ranges (ages.c) follow them. */
static const char *const fixed_str[] = {
	"", "alloc_objects", "count", "alloc_space", "bytes", "inuse_objects",
	"inuse_space", "space", "sampling_error", "permille", "age", "seconds",
	"lifetime", "nanoseconds", "lived",
};
enum { S_ALLOC_OBJECTS = 1, S_COUNT, S_ALLOC_SPACE, S_BYTES, S_INUSE_OBJECTS,
       S_INUSE_SPACE, S_SPACE, S_SAMPLING_ERROR, S_PERMILLE, S_AGE, S_SECONDS,
       S_LIFETIME, S_NANOSECONDS, S_LIVED, S_RANGE0,
       S_FIXED = S_RANGE0 + HA_LIFE_BINS };
#define COMMENTS_MAX 8            /* ha_calib_comment's 4 lines, the command, the notes */

/* Address -> location id, open addressing over a power-of-two table that
 * doubles at half full (distinct return addresses are far fewer than the
 * frames of all stacks). */
static size_t loc_slot(const ha_loc_table *t, uintptr_t a)
{
	size_t i = (size_t)((a * 0x9e3779b97f4a7c15ull) >> 17) & t->mask;
	while (t->addr[i] && t->addr[i] != a)
		i = (i + 1) & t->mask;
	return i;
}

static int loc_grow(ha_loc_table *t)
{
	size_t cap = t->addr ? 2 * (t->mask + 1) : 4096;
	ha_loc_table g = { ha_dump_mem(cap * sizeof *g.addr), ha_dump_mem(cap * sizeof *g.id),
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
static uint32_t loc_id(ha_loc_table *t, uintptr_t a)
{
	if ((!t->addr || 2 * (t->n + 1) > t->mask + 1) && loc_grow(t))
		return 0;
	size_t i = loc_slot(t, a);
	if (!t->addr[i]) {
		t->addr[i] = a;
		t->by_id[t->n] = a;
		t->id[i] = (uint32_t)++t->n;
	}
	HA_ASSERT(t->id[i] >= 1 && t->id[i] <= t->n && t->by_id[t->id[i] - 1] == a);
	return t->id[i];
}

/* Flush the part of a message buffer that is complete into o. */
void ha_pprof_emit(ha_out *o, unsigned field, const pb_buf *m)
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

void ha_pprof_emit_string(ha_out *o, const void *s, size_t n)
{
	pb_buf m = { (unsigned char *)(uintptr_t)s, n, n, 0 };
	ha_pprof_emit(o, PB_PROFILE_STRING, &m);
}

static void value_type(ha_out *o, unsigned field, uint64_t type, uint64_t unit)
{
	unsigned char t[32];
	pb_buf m = { t, 0, sizeof t, 0 };
	pb_int(&m, PB_VALUETYPE_TYPE, type);
	pb_int(&m, PB_VALUETYPE_UNIT, unit);
	ha_pprof_emit(o, field, &m);
}

/* profile.proto's duration_nanos (a served delta's window) */
#define PB_DURATION_NANOS 10

/* Unsample an in-use pair that may be negative (a delta's lines, prof/serve/http_request.c):
 * a shrinking pair is unsampled as its growth, negated; mixed signs are
 * left as they are. */
static void unsample_signed(uint64_t c, uint64_t b, int64_t r, uint64_t out[2])
{
	if ((int64_t)c >= 0 && (int64_t)b >= 0) {
		ha_sampler_unsample_pair(c, b, r, out);
	} else if ((int64_t)c <= 0 && (int64_t)b <= 0) {
		ha_sampler_unsample_pair(-c, -b, r, out);
		out[0] = -out[0];
		out[1] = -out[1];
	} else {
		out[0] = c;
		out[1] = b;
	}
}

void ha_pprof_enc_free(ha_pprof_enc *e)
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

const char *ha_pprof_notes[HA_PPROF_NOTES];

/* The profile's comments: calibrate.c's lines, then whose profile it is
 * (an exec'd descendant's files are named by its pid only), then a reader
 * outside's notes; their count. */
static int comments(const ha_calib *cal, char comment[][512])
{
	int nc = 0;
	while (nc < COMMENTS_MAX && ha_calib_comment(cal, nc, comment[nc], 512) >= 0)
		nc++;
	if (nc < COMMENTS_MAX) {
		int k = ha_snprintf(comment[nc], 512, "command: ");
		ha_cmdline(comment[nc] + k, 512 - (size_t)k - 48);
		if (ha_prof_opt.profile_root)
			ha_snprintf(comment[nc] + strlen(comment[nc]), 48,
				    " (pid %d, descendant of pid %lld)", (int)getpid(),
				    (long long)ha_prof_opt.profile_root);
		nc++;
	}
	for (int i = 0; nc < COMMENTS_MAX && i < HA_PPROF_NOTES && ha_pprof_notes[i]; i++)
		ha_snprintf(comment[nc++], 512, "%s", ha_pprof_notes[i]);
	return nc;
}

/* Number the executable mappings and their path and build-ID strings,
 * which come after the fixed strings and nc comments; 0 or ENOMEM. */
static int number_mappings(ha_pprof_enc *e, int nc)
{
	uint64_t nid = 0;
	if (ha_mappings_read(&e->mo, &e->maps, &e->nm))
		return ENOMEM;
	e->nstr = S_FIXED + (uint64_t)nc;
	for (size_t i = 0; i < e->nm; i++) {
		ha_pmap *m = &e->maps[i];
		if (m->perm_x != 'x')
			continue;
		m->id = ++nid;
		if (m->path_len)
			m->path_str = e->nstr++;
		if (m->path_len && m->path[0] == '/') {
			ha_mappings_build_id(e->maps, e->nm, m);
			if (m->bid_len)
				m->bid_str = e->nstr++;
		}
	}
	return 0;
}

/* Line l's labels into m: `bytes` = object size and, when sampled, the
 * site's relative standard error (of what is in use when anything is, else
 * of what was allocated). */
static void sample_labels(pb_buf *m, const ha_line *l, int64_t r)
{
	unsigned char lab[32];
	pb_buf lb = { lab, 0, sizeof lab, 0 };
	pb_int(&lb, PB_LABEL_KEY, S_BYTES);
	pb_int(&lb, PB_LABEL_NUM, l->alloc_count ? l->alloc_bytes / l->alloc_count
					       : l->free_bytes / l->free_count);
	pb_bytes(m, PB_SAMPLE_LABEL, lab, lb.len);
	if (ha_rate_records_all(r))
		return;
	uint64_t ic = l->alloc_count - l->free_count;
	double e = ic ? ha_calib_rse(ic, l->alloc_bytes - l->free_bytes, r)
		      : ha_calib_rse(l->alloc_count, l->alloc_bytes, r);
	lb.len = 0;
	pb_int(&lb, PB_LABEL_KEY, S_SAMPLING_ERROR);
	pb_int(&lb, PB_LABEL_NUM, (uint64_t)(e * 1000 + 0.5));
	pb_int(&lb, PB_LABEL_NUM_UNIT, S_PERMILLE);
	pb_bytes(m, PB_SAMPLE_LABEL, lab, lb.len);
}

/* One sample of a line: its stack ids, values v and labels, with `age`
 * (seconds) when age >= 0, else `lifetime` (ns) and `lived` of bin life
 * when life >= 0. */
static void sample(ha_out *o, const uint64_t *ids, uint32_t depth, const uint64_t v[4],
		   const ha_line *l, int64_t r, int64_t age, int life)
{
	unsigned char t[1024];
	pb_buf m = { t, 0, sizeof t, 0 };
	pb_packed(&m, PB_SAMPLE_LOCATION_ID, ids, depth);
	pb_packed(&m, PB_SAMPLE_VALUE, v, 4);
	sample_labels(&m, l, r);
	unsigned char lab[32];
	pb_buf lb = { lab, 0, sizeof lab, 0 };
	if (age >= 0) {
		pb_int(&lb, PB_LABEL_KEY, S_AGE);
		pb_int(&lb, PB_LABEL_NUM, (uint64_t)age);
		pb_int(&lb, PB_LABEL_NUM_UNIT, S_SECONDS);
		pb_bytes(&m, PB_SAMPLE_LABEL, lab, lb.len);
	} else if (life >= 0) {
		pb_int(&lb, PB_LABEL_KEY, S_LIFETIME);
		pb_int(&lb, PB_LABEL_NUM, ha_life_label((unsigned)life));
		pb_int(&lb, PB_LABEL_NUM_UNIT, S_NANOSECONDS);
		pb_bytes(&m, PB_SAMPLE_LABEL, lab, lb.len);
		lb.len = 0;
		pb_int(&lb, PB_LABEL_KEY, S_LIVED);
		pb_int(&lb, PB_LABEL_STR, S_RANGE0 + (uint64_t)life);
		pb_bytes(&m, PB_SAMPLE_LABEL, lab, lb.len);
	}
	ha_pprof_emit(o, PB_PROFILE_SAMPLE, &m);
}

/* A live line's values v split by what its samples say (docs/heap-profile-
 * spec.md, "Ages and lifetimes"): the in-use values, and as much of the
 * allocated ones, over its live samples' ages (objects by count, bytes by
 * bytes; one sample per distinct age), the freed values (allocated less
 * that) over its lifetime bins by bytes;
 * what neither covers (no sample's time known: a kept sample without a map
 * slot, frees the bins never saw) stays in a sample without either label.
 * Every part is cut by ha_split_part, so the line's values add up exactly. */
static void split_line(ha_out *o, const uint64_t *ids, uint32_t depth, const uint64_t v[4],
		       const ha_line *l, int64_t r, const ha_ages *ag)
{
	uint64_t rest[4] = { v[0], v[1], v[2], v[3] };
	size_t first = 0, k = ha_ages_of(ag, l->b->idx, &first);
	const ha_agent *a = ag->v + first;
	uint64_t wb = 0;
	for (size_t j = 0; j < k; j++)
		wb += a[j].req;
	/* the allocated values of what is in use: calibration scales in use
	 * and allocated apart, so in use may exceed allocated by a little */
	uint64_t la[2] = { v[2] < v[0] ? v[2] : v[0], v[3] < v[1] ? v[3] : v[1] };
	if (k && wb && (v[2] || v[3])) {
		uint64_t cb = 0, cc = 0;
		for (size_t j = 0; j < k;) {
			uint64_t age = ha_age_seconds(ag->now, a[j].t), gb = 0, gc = 0;
			for (; j < k && ha_age_seconds(ag->now, a[j].t) == age; j++)
				gb += a[j].req, gc++;
			uint64_t pv[4];
			pv[0] = ha_split_part(la[0], cc, gc, k);
			pv[1] = ha_split_part(la[1], cb, gb, wb);
			pv[2] = ha_split_part(v[2], cc, gc, k);
			pv[3] = ha_split_part(v[3], cb, gb, wb);
			cb += gb;
			cc += gc;
			if (!pv[0] && !pv[1] && !pv[2] && !pv[3])
				continue;
			sample(o, ids, depth, pv, l, r, (int64_t)age, -1);
			for (int q = 0; q < 4; q++)
				rest[q] -= pv[q];
		}
	}
	uint64_t life[HA_LIFE_BINS], lw = 0;
	for (int b = 0; b < HA_LIFE_BINS; b++)
		lw += life[b] = __atomic_load_n(&l->b->life[b], __ATOMIC_RELAXED);
	uint64_t fo = v[0] - la[0], fb = v[1] - la[1];
	if (lw && (fo || fb) && rest[0] >= fo && rest[1] >= fb) {
		uint64_t cum = 0;
		for (int b = 0; b < HA_LIFE_BINS; b++) {
			if (!life[b])
				continue;
			uint64_t pv[4] = { ha_split_part(fo, cum, life[b], lw),
					   ha_split_part(fb, cum, life[b], lw), 0, 0 };
			cum += life[b];
			if (!pv[0] && !pv[1])
				continue;
			sample(o, ids, depth, pv, l, r, -1, b);
			rest[0] -= pv[0];
			rest[1] -= pv[1];
		}
	}
	if (rest[0] || rest[1] || rest[2] || rest[3])
		sample(o, ids, depth, rest, l, r, -1, -1);
}

/* One sample per line with a stack (ag: the live table's, split by age and
 * lifetime, split_line): its location ids (numbered in e->lt), its four
 * values (cv: calibrated, else unsampled here) and labels.  0 or ENOMEM. */
static int samples(ha_out *o, ha_pprof_enc *e, const ha_line *lines, size_t n,
		   const uint64_t *cv, int64_t r, const ha_ages *ag)
{
	for (size_t i = 0; i < n; i++) {
		const ha_line *l = &lines[i];
		if ((!l->alloc_count && !l->free_count) || !l->b->depth)
			continue;     /* a delta's line may only have frees */
		uint64_t ids[HA_PROF_DEPTH], v[4];
		uint32_t depth = l->b->depth < HA_PROF_DEPTH ? l->b->depth : HA_PROF_DEPTH;
		for (uint32_t d = 0; d < depth; d++)
			ids[d] = loc_id(&e->lt, l->b->pcs[d] - 1);
		if (e->lt.err)
			return ENOMEM;
		if (cv) {
			memcpy(v, &cv[4 * i], sizeof v);
		} else {
			ha_sampler_unsample_pair(l->alloc_count, l->alloc_bytes, r, &v[0]);
			unsample_signed(l->alloc_count - l->free_count,
					l->alloc_bytes - l->free_bytes, r, &v[2]);
		}
		if (ag && ag->v)
			split_line(o, ids, depth, v, l, r, ag);
		else
			sample(o, ids, depth, v, l, r, -1, -1);
	}
	return 0;
}

/* The string table as numbered so far: fixed strings, comments, then each
 * executable mapping's path and build ID (hex). */
static void strings(ha_out *o, const ha_pprof_enc *e, char comment[][512], int nc)
{
	for (size_t i = 0; i < S_RANGE0; i++)
		ha_pprof_emit_string(o, fixed_str[i], strlen(fixed_str[i]));
	for (unsigned i = 0; i < HA_LIFE_BINS; i++)
		ha_pprof_emit_string(o, ha_life_range(i), strlen(ha_life_range(i)));
	for (int i = 0; i < nc; i++)
		ha_pprof_emit_string(o, comment[i], strlen(comment[i]));
	for (size_t i = 0; i < e->nm; i++) {
		const ha_pmap *mp = &e->maps[i];
		if (mp->path_str)
			ha_pprof_emit_string(o, mp->path, mp->path_len);
		if (mp->bid_str) {
			char hex[2 * HA_BUILD_ID_MAX];
			for (size_t j = 0; j < mp->bid_len; j++) {
				hex[2 * j] = "0123456789abcdef"[mp->bid[j] >> 4];
				hex[2 * j + 1] = "0123456789abcdef"[mp->bid[j] & 15];
			}
			ha_pprof_emit_string(o, hex, 2 * mp->bid_len);
		}
	}
}

/* The profile's scalars: time (a delta's: its start, as Go does) and
 * duration, period type and period, default sample type, comments. */
static void scalars(ha_out *o, int64_t r, const ha_pprof_how *how, int nc)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	unsigned char t[64 + 4 * COMMENTS_MAX];
	pb_buf m = { t, 0, sizeof t, 0 };
	uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	int delta = how && how->duration_ns > 0;
	if (delta)
		now_ns -= (uint64_t)how->duration_ns;
	pb_int(&m, PB_PROFILE_TIME_NANOS, now_ns);
	if (delta)
		pb_int(&m, PB_DURATION_NANOS, (uint64_t)how->duration_ns);
	ha_out_bytes(o, (const char *)t, m.len);
	value_type(o, PB_PROFILE_PERIOD_TYPE, S_SPACE, S_BYTES);
	m.len = 0;
	pb_int(&m, PB_PROFILE_PERIOD, (uint64_t)(ha_rate_records_all(r) ? 1 : r));
	pb_int(&m, PB_PROFILE_DEFAULT_SAMPLE_TYPE,
	       how && how->alloc_default ? S_ALLOC_SPACE : S_INUSE_SPACE);
	for (int i = 0; i < nc; i++)
		pb_int(&m, PB_PROFILE_COMMENT, S_FIXED + (uint64_t)i);
	ha_out_bytes(o, (const char *)t, m.len);
}

void ha_pprof_head(ha_out *o, int64_t r, const ha_lineset *set, const ha_pprof_how *how,
		   ha_pprof_enc *e)
{
	size_t n = 0;
	int own;
	memset(e, 0, sizeof *e);
	e->mo = (ha_out){ NULL, 0, 0, -1, 0 };
	const ha_line *lines = ha_lines_of(set, &n, &own);
	if (!lines && n) {
		o->err = ENOMEM;
		return;
	}
	/* the live table's samples' times, right after its lines (a saved
	 * set's lines are of another moment: no ages) */
	ha_ages ag = { NULL, 0, 0 };
	if (lines && (!set || set->live))
		ha_ages_take(&ag);
	ha_calib cal;
	uint64_t *cv = ha_calib_values(lines, n, r, set, &cal);
	char comment[COMMENTS_MAX][512];
	int nc = comments(&cal, comment);
	int err = number_mappings(e, nc);
	if (!err) {
		value_type(o, PB_PROFILE_SAMPLE_TYPE, S_ALLOC_OBJECTS, S_COUNT);
		value_type(o, PB_PROFILE_SAMPLE_TYPE, S_ALLOC_SPACE, S_BYTES);
		value_type(o, PB_PROFILE_SAMPLE_TYPE, S_INUSE_OBJECTS, S_COUNT);
		value_type(o, PB_PROFILE_SAMPLE_TYPE, S_INUSE_SPACE, S_BYTES);
		err = samples(o, e, lines, n, cv, r, &ag);
	}
	ha_ages_free(&ag);
	if (!err) {
		strings(o, e, comment, nc);
		scalars(o, r, how, nc);
	}
	if (err)
		o->err = err;
	if (cv)
		ha_dump_mem_free(cv);
	if (lines && own)
		ha_dump_mem_free((void *)lines);
}

void ha_pprof_tail(ha_out *o, ha_pprof_enc *e, ha_pprof_names *nm)
{
	if (nm && ha_pprof_names_ready(nm)) {
		o->err = ENOMEM;
		return;
	}
	for (size_t i = 0; i < e->nm; i++) {
		const ha_pmap *mp = &e->maps[i];
		if (!mp->id)
			continue;
		unsigned char t[128];
		pb_buf m = { t, 0, sizeof t, 0 };
		unsigned f = nm ? nm->flag[i] : 0, dw = (f & HA_NAMED_DWARF) != 0;
		pb_int(&m, PB_MAPPING_ID, mp->id);
		pb_int(&m, PB_MAPPING_START, mp->start);
		pb_int(&m, PB_MAPPING_LIMIT, mp->limit);
		pb_int(&m, PB_MAPPING_OFFSET, mp->offset);
		pb_int(&m, PB_MAPPING_FILENAME, mp->path_str);
		pb_int(&m, PB_MAPPING_BUILD_ID, mp->bid_str);
		pb_int(&m, PB_MAPPING_HAS_FUNCTIONS, (f & HA_NAMED_FN) != 0);
		pb_int(&m, PB_MAPPING_HAS_FILENAMES, dw);
		pb_int(&m, PB_MAPPING_HAS_LINE_NUMBERS, dw);
		pb_int(&m, PB_MAPPING_HAS_INLINE_FRAMES, dw);
		ha_pprof_emit(o, PB_PROFILE_MAPPING, &m);
	}
	for (size_t k = 0; k < e->lt.n; k++) {
		uintptr_t a = e->lt.by_id[k];
		size_t mi = ha_mappings_find(e->maps, e->nm, a);
		unsigned char t[1024];
		pb_buf m = { t, 0, sizeof t, 0 };
		pb_int(&m, PB_LOCATION_ID, k + 1);
		pb_int(&m, PB_LOCATION_MAPPING_ID, mi ? e->maps[mi - 1].id : 0);
		pb_int(&m, PB_LOCATION_ADDRESS, a);
		if (nm)
			ha_pprof_names_lines(o, e, nm, k, &m);
		ha_pprof_emit(o, PB_PROFILE_LOCATION, &m);
	}
}

int ha_pprof_file(const char *path, int64_t r)
{
	return ha_pprof_file_from(path, r, NULL);
}

/* Under ha_prof_dump_lock: the profile without names, gzipped into path. */
int ha_pprof_file_from(const char *path, int64_t r, const ha_lineset *set)
{
	ha_out o = { NULL, 0, 0, -1, 0 };
	ha_pprof_enc e;
	ha_pprof_head(&o, r, set, NULL, &e);
	if (!o.err)
		ha_pprof_tail(&o, &e, NULL);
	ha_pprof_enc_free(&e);
	int err = o.err;
	if (!err)
		err = ha_gzip_file(path, o.buf, o.len);
	if (o.buf)
		ha_dump_mem_free(o.buf);
	return err;
}
