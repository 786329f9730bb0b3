/* tools/profile.c — heapalloc-profile: the profile of a process read from
 * outside, written by the profiler's own writers (`heapalloc dump/top/serve
 * PID`, `heapalloc leaks PID -o`).
 *
 *     heapalloc-profile PID text|pprof|alloc [--summary FD] < TABLES > PROFILE
 *     heapalloc-profile unsample R < PAIRS > PAIRS
 *
 * TABLES: what tools/ha_proc.py copied out of process PID's memory
 * (prof/root.h's tables), one record a line:
 *     rate R / flags F              the root's session (HA_ROOT_* flags)
 *     base A I / base_req A F / rec A F
 *     retired A N B RA RF / own A I RA RF / node A N B C RA RF (each live
 *                                   thread record): the books' parts
 *     line AC AB FC FB BINS L... DEPTH PC...   a bucket (index order)
 *     age IDX BYTES T               a live sample (its bucket's index)
 *     command TEXT / note TEXT      the profile's comments after the
 *                                   calibration's: whose, what the read saw
 *     map LINE                      a line of the memory map to name
 *                                   instead of /proc/PID/maps (an emulated
 *                                   process's, as its program sees it)
 * PROFILE: the gperftools text (prof/output/writer.c) or gzipped profile.proto
 * (prof/output/pprof.c; alloc: alloc_space as its default sample type), with the
 * memory map and build IDs of PID (its /proc/PID/maps and memory), in the
 * bytes an in-process dump of the same tables writes.  --summary FD: one
 * line "TOTAL_ALLOCATED TOTAL_FREED SITES CALIBRATED" there.  Exit 0; 1
 * after one stderr line.
 * unsample: each line "COUNT BYTES" of a heap_v2/R profile sampled at R,
 * as pprof reads it (ha_sampler_unsample_pair), for the commands that read
 * text profiles (tools/ha_textdump.py), so the formula has one home.
 *
 * Owns parsing the tables and the other side of the interface the writers
 * use in a process (prof/prof.h: the table snapshot, the live samples, the
 * books, the session's options), here backed by the copy: the writers,
 * the calibration and the encoder themselves are prof/'s, linked in
 * unchanged, so an outside dump is an in-process dump of the copied tables.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof/output/pprof.h"
#include "prof/root.h"

/* One stderr line, then exit status 1. */
static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("heapalloc-profile: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* ---- the copy --------------------------------------------------------- */

static struct {
	int64_t rate;
	uint64_t flags;
	uint64_t base[2], base_req[2], rec[2];
	uint64_t nodes[6], retired[5], own[4];   /* the books' parts */
	ha_line *lines;
	size_t n, cap;
	ha_agent *ages;
	size_t nages, agecap;
	char command[512];
	char notes[HA_PPROF_NOTES][512];
	int nnotes;
	char *maps;                              /* the map records' lines */
	size_t nmaps, mapcap;
} cp;

/* Room for one more of *v (n of size bytes each), doubling *cap. */
static void *room(void *v, size_t n, size_t *cap, size_t size)
{
	if (n < *cap)
		return v;
	*cap = *cap ? 2 * *cap : 256;
	v = realloc(v, *cap * size);
	if (!v)
		die("out of memory");
	return v;
}

/* n unsigned decimals from *s (advanced past them); 0, or -1 when short. */
static int nums(char **s, uint64_t *out, int n)
{
	for (int i = 0; i < n; i++) {
		char *end;
		errno = 0;
		out[i] = strtoull(*s, &end, 10);
		if (end == *s || errno)
			return -1;
		*s = end;
	}
	return 0;
}

static void bucket_line(char *s)
{
	uint64_t h[5], bins, depth;
	if (nums(&s, h, 5) || nums(&s, &bins, 1) || bins > HA_LIFE_BINS)
		die("a line record is not \"line AC AB FC FB BINS L... DEPTH PC...\"");
	uint64_t life[HA_LIFE_BINS] = { 0 };
	if (nums(&s, life, (int)bins) || nums(&s, &depth, 1) || depth > HA_PROF_DEPTH)
		die("a line record's lifetimes or stack are short");
	ha_bucket *b = calloc(1, sizeof *b + depth * sizeof b->pcs[0]);
	if (!b)
		die("out of memory");
	uint64_t pcs[HA_PROF_DEPTH];
	if (nums(&s, pcs, (int)depth))
		die("a line record's stack is short");
	for (uint64_t d = 0; d < depth; d++)
		b->pcs[d] = (uintptr_t)pcs[d];
	b->depth = (uint16_t)depth;
	b->idx = (uint32_t)h[0];
	b->alloc_count = h[1];
	b->alloc_bytes = h[2];
	b->free_count = h[3];
	b->free_bytes = h[4];
	memcpy(b->life, life, sizeof life);
	cp.lines = room(cp.lines, cp.n, &cp.cap, sizeof *cp.lines);
	ha_table_line(&cp.lines[cp.n++], b);
}

static void read_tables(FILE *in)
{
	char *line = NULL;
	size_t lcap = 0, no = 0;
	ssize_t len;
	while ((len = getline(&line, &lcap, in)) > 0) {
		no++;
		if (line[len - 1] == '\n')
			line[--len] = 0;
		char *sp = strchr(line, ' ');
		char *s = sp ? sp + 1 : line + len;
		size_t kl = sp ? (size_t)(sp - line) : (size_t)len;
		uint64_t v[6];
#define IS(k) (kl == sizeof k - 1 && !memcmp(line, k, kl))
		if (IS("line")) {
			bucket_line(s);
		} else if (IS("age")) {
			if (nums(&s, v, 3))
				die("an age record is not \"age IDX BYTES T\"");
			cp.ages = room(cp.ages, cp.nages, &cp.agecap, sizeof *cp.ages);
			cp.ages[cp.nages++] = (ha_agent){ (uint32_t)v[0], v[1], v[2] };
		} else if (IS("node")) {
			if (nums(&s, v, 6))
				die("a node record is not \"node A N B C RA RF\"");
			for (int i = 0; i < 6; i++)
				cp.nodes[i] += v[i];
		} else if (IS("rate") || IS("flags")) {
			if (nums(&s, v, 1))
				die("a rate or flags record has no number");
			if (IS("rate"))
				cp.rate = (int64_t)v[0];
			else
				cp.flags = v[0];
		} else if (IS("base") || IS("base_req") || IS("rec")) {
			if (nums(&s, v, 2))
				die("a base, base_req or rec record is not two numbers");
			uint64_t *to = IS("base") ? cp.base : IS("rec") ? cp.rec : cp.base_req;
			to[0] = v[0];
			to[1] = v[1];
		} else if (IS("retired")) {
			if (nums(&s, cp.retired, 5))
				die("a retired record is not five numbers");
		} else if (IS("own")) {
			if (nums(&s, cp.own, 4))
				die("an own record is not four numbers");
		} else if (IS("command")) {
			snprintf(cp.command, sizeof cp.command, "%s", s);
		} else if (IS("note")) {
			if (cp.nnotes < HA_PPROF_NOTES)
				snprintf(cp.notes[cp.nnotes++], sizeof cp.notes[0], "%s", s);
		} else if (IS("map")) {
			size_t n = strlen(s);
			while (cp.nmaps + n + 1 > cp.mapcap)
				cp.maps = room(cp.maps, cp.mapcap, &cp.mapcap, 1);
			memcpy(cp.maps + cp.nmaps, s, n);
			cp.maps[cp.nmaps + n] = '\n';
			cp.nmaps += n + 1;
		} else if (len) {
			die("line %zu of the tables is no known record: %.*s", no, (int)kl, line);
		}
#undef IS
	}
	free(line);
	if (ferror(in))
		die("cannot read the tables");
}

/* ---- the profiler's interface, over the copy ---------------------------
 * What writer.c, calibrate.c, pprof.c and ages.c call in a process (the
 * session's, the table's, the object map's and the allocator's side),
 * answered from the tables read. */

ha_prof_options ha_prof_opt;
int ha_prof_opt_loaded = 1;

/* zlib's loading (gzip.c) keeps the profiler's own use out of the books:
 * this process keeps none. */
HA_TLS int ha_prof_busy;

void ha_books_own_begin(int64_t mark[5])
{
	(void)mark;
}

void ha_books_own_end(const int64_t mark[5])
{
	(void)mark;
}

void *ha_raw_malloc(size_t n)
{
	return malloc(n);
}

void ha_raw_free(void *p)
{
	free(p);
}

void ha_table_lock(void)
{
}

void ha_table_unlock(void)
{
}

ha_line *ha_table_snapshot(size_t *n)
{
	ha_line *v = malloc((cp.n ? cp.n : 1) * sizeof *v);
	*n = v ? cp.n : 0;
	if (v && cp.n)   /* an empty table may have no array at all */
		memcpy(v, cp.lines, cp.n * sizeof *v);
	return v;
}

void ha_table_line(ha_line *l, const ha_bucket *b)
{
	*l = (ha_line){ b, b->alloc_count, b->alloc_bytes, b->free_count, b->free_bytes };
}

void ha_objmap_stats(uint64_t *objects, uint64_t *memory)
{
	*objects = cp.nages;
	*memory = 0;
}

size_t ha_objmap_ages(ha_agent *out, size_t cap)
{
	size_t n = cp.nages < cap ? cp.nages : cap;
	if (n)           /* no ages: cp.ages may be NULL */
		memcpy(out, cp.ages, n * sizeof *out);
	return cp.nages;
}

void ha_books(uint64_t out[2], uint64_t req[2])
{
	ha_books_of(cp.nodes, cp.retired, cp.own, out, req);
}

int ha_prof_compat(void)
{
	return (cp.flags & HA_ROOT_COMPAT) != 0;
}

void ha_prof_totals(uint64_t out[2])
{
	uint64_t b[2], q[2];
	if (ha_rate_records_all(cp.rate) && !ha_prof_compat()) {
		ha_totals_of(cp.rec, NULL, NULL, NULL, NULL, 0, out);
		return;
	}
	ha_books(b, q);
	ha_totals_of(NULL, b, q, cp.base, cp.base_req, ha_prof_compat(), out);
}

size_t ha_cmdline(char *out, size_t cap)
{
	return (size_t)snprintf(out, cap, "%s", cp.command);
}

/* pprof.c's in-process naming (pprof_named.c) is never asked for here:
 * heapalloc-symbolize names the profile from the target's files. */
int ha_pprof_names_ready(ha_pprof_names *nm)
{
	(void)nm;
	return ENOSYS;
}

void ha_pprof_names_lines(ha_out *o, ha_pprof_enc *e, ha_pprof_names *nm, size_t k, pb_buf *m)
{
	(void)o, (void)e, (void)nm, (void)k, (void)m;
}

/* ---- the command ------------------------------------------------------- */

static void put(ha_out *o, FILE *f)
{
	if (!o->err && o->len && fwrite(o->buf, 1, o->len, f) != o->len)
		o->err = errno ? errno : EIO;
}

/* heapalloc-profile unsample R: stdin's "COUNT BYTES" lines unsampled. */
static int unsample_main(const char *rate)
{
	char *end;
	errno = 0;
	long long r = strtoll(rate, &end, 10);
	if (end == rate || *end || errno || r < 0)
		die("unsample: the rate is not a count of bytes: %s", rate);
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, stdin) > 0) {
		char *s = line;
		uint64_t v[2], out[2];
		if (nums(&s, v, 2))
			die("unsample: a line is not \"COUNT BYTES\"");
		ha_sampler_unsample_pair(v[0], v[1], (int64_t)r, out);
		printf("%" PRIu64 " %" PRIu64 "\n", out[0], out[1]);
	}
	free(line);
	if (fflush(stdout) || ferror(stdout))
		die("unsample: cannot write its output");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "unsample"))
		return unsample_main(argv[2]);
	int pid = 0, summary = -1;
	const char *fmt = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--summary") && i + 1 < argc)
			summary = atoi(argv[++i]);
		else if (!pid && atoi(argv[i]) > 0)
			pid = atoi(argv[i]);
		else if (!fmt)
			fmt = argv[i];
		else
			pid = -1;
	}
	if (pid <= 0 || !fmt ||
	    (strcmp(fmt, "text") && strcmp(fmt, "pprof") && strcmp(fmt, "alloc")))
		die("usage: heapalloc-profile PID text|pprof|alloc [--summary FD] < TABLES");
	read_tables(stdin);
	ha_maps_pid = pid;
	if (cp.maps) {
		ha_maps_text = cp.maps;
		ha_maps_text_len = cp.nmaps;
	}
	/* the writers name PID's mappings: a process gone (or a zombie,
	 * whose maps are empty) would leave them out without a word */
	char path[32], c;
	snprintf(path, sizeof path, "/proc/%d/maps", pid);
	FILE *m = fopen(path, "r");
	if (!m || fread(&c, 1, 1, m) != 1)
		die("process %d exited while it was being read", pid);
	fclose(m);
	ha_prof_opt.calibrate = (cp.flags & HA_ROOT_CALIBRATE) != 0;
	for (int i = 0; i < cp.nnotes; i++)
		ha_pprof_notes[i] = cp.notes[i];
	int64_t r = ha_rate_records_all(cp.rate) ? 1 : cp.rate;
	/* the totals this profile adds up to, as a dump holds them */
	uint64_t t[2];
	ha_prof_totals(t);
	ha_calib_hold(t);
	ha_out o = { NULL, 0, 0, -1, 0 };
	if (!strcmp(fmt, "text")) {
		ha_writer_profile(&o, r);
	} else {
		ha_pprof_how how = { !strcmp(fmt, "alloc"), 0, 0 };
		ha_pprof_enc e;
		ha_out raw = { NULL, 0, 0, -1, 0 };
		ha_pprof_head(&raw, r, NULL, &how, &e);
		if (!raw.err)
			ha_pprof_tail(&raw, &e, NULL);
		ha_pprof_enc_free(&e);
		o.err = raw.err;
		if (!o.err) {
			ha_gzip_load();
			o.err = ha_gzip_to(&o, raw.buf, raw.len);
		}
		free(raw.buf);
	}
	put(&o, stdout);
	if (!o.err && fflush(stdout) != 0)
		o.err = errno;
	if (o.err)
		die("cannot write the profile: %s", strerror(o.err));
	if (summary >= 0) {
		size_t sites = 0;
		for (size_t i = 0; i < cp.n; i++)
			sites += cp.lines[i].alloc_count && cp.lines[i].b->depth;
		ha_calib cal;
		uint64_t *cv = ha_calib_values(cp.lines, cp.n, r, NULL, &cal);
		int scaled = cv != NULL || ha_rate_records_all(r);
		free(cv);
		dprintf(summary, "%" PRIu64 " %" PRIu64 " %zu %d\n", t[0], t[1], sites, scaled);
	}
	return 0;
}
