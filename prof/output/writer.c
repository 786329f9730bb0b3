/* prof/output/writer.c — the profile in gperftools' text format (docs/heap-profile-spec.md §1–3).
 *
 *   heap profile: IO: IB [AO: AB] @ heapprofile | heap_v2/R
 *   io: ib [ao: ab] @ 0xpc-1 0xpc ...        one line per bucket, leaf first
 *   <blank>
 *   MAPPED_LIBRARIES:
 *   /proc/self/maps, 4th permission character normalised to 'p'
 *
 * Owns the output buffer and the file protocol: write FILE.tmp in the same
 * directory, then rename(2) it to FILE, so a reader never sees half a file.
 * Never calls the public malloc (raw memory or the pre-OOM reserve only:
 * ha_dump_mem), never formats with stdio
 * (numbers by hand), restarts on EINTR and short writes.  Holds the table
 * lock only to copy the counters (ha_table_snapshot), so allocating threads
 * wait at most for that copy.  The caller holds ha_prof_dump_lock, which
 * keeps the buckets alive while the lines are written.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "prof/prof.h"

#define OUT_CHUNK (64 * 1024)

/* The dump's working memory.  Normally raw memory; while a reserve is set
 * (the pre-OOM dump, memwatch.c) it is carved from that mapping first, so
 * the dump needs nothing from a heap that may not grow any more.  Blocks
 * of the reserve are never freed one by one (only the last one carved
 * gives its room back); the reserve is dropped whole after the dump.
 * Set and used only under ha_prof_dump_lock. */
static struct { char *base; size_t cap, used, last; } rsv;

void ha_dump_mem_reserve(void *base, size_t cap)
{
	rsv.base = base;
	rsv.cap = base ? cap : 0;
	rsv.used = rsv.last = 0;
}

void *ha_dump_mem(size_t n)
{
	size_t need = (n + 15) & ~(size_t)15;
	if (rsv.base && need >= n && need <= rsv.cap - rsv.used) {
		rsv.last = rsv.used;
		rsv.used += need;
		return rsv.base + rsv.last;
	}
	return ha_raw_malloc(n);
}

void ha_dump_mem_free(void *p)
{
	char *c = p;
	if (rsv.base && c >= rsv.base && c < rsv.base + rsv.cap) {
		if (c == rsv.base + rsv.last)
			rsv.used = rsv.last;
		return;
	}
	ha_raw_free(p);
}

int ha_fds_short(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return errno == EMFILE || errno == ENFILE;
}

int ha_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		if (w == 0)
			return EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int ha_out_flush(ha_out *o)
{
	if (o->fd >= 0 && o->len && !o->err)
		o->err = ha_write_all(o->fd, o->buf, o->len);
	if (o->fd >= 0)
		o->len = 0;
	return o->err;
}

void ha_out_bytes(ha_out *o, const char *s, size_t n)
{
	while (n && !o->err) {
		if (o->len == o->cap) {
			if (o->fd >= 0 && o->cap) {
				ha_out_flush(o);
				continue;
			}
			size_t ncap = o->cap ? o->cap * 2 : OUT_CHUNK;
			char *nb = ha_dump_mem(ncap);
			if (!nb) {
				o->err = ENOMEM;
				return;
			}
			if (o->buf) {
				memcpy(nb, o->buf, o->len);
				ha_dump_mem_free(o->buf);
			}
			o->buf = nb;
			o->cap = ncap;
			continue;
		}
		size_t k = o->cap - o->len < n ? o->cap - o->len : n;
		memcpy(o->buf + o->len, s, k);
		o->len += k;
		s += k;
		n -= k;
	}
}

void ha_out_str(ha_out *o, const char *s)
{
	ha_out_bytes(o, s, strlen(s));
}

/* v in decimal at p, right-aligned in at least `width` columns; its length. */
static size_t u64_at(char *p, uint64_t v, int width)
{
	char tmp[20];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	size_t k = 0;
	for (int pad = width - n; pad > 0; pad--)
		p[k++] = ' ';
	while (n)
		p[k++] = tmp[--n];
	return k;
}

/* Decimal, right-aligned in at least `width` columns (gperftools' %6d);
 * at most 24. */
void ha_out_u64(ha_out *o, uint64_t v, int width)
{
	char tmp[24];
	ha_out_bytes(o, tmp, u64_at(tmp, v, width < 24 ? width : 24));
}

/* "0x" and v in lowercase hex at p (19 bytes at most); its length. */
static size_t hex_at(char *p, uintptr_t v)
{
	int nib = v ? (67 - __builtin_clzll((unsigned long long)v)) / 4 : 1;
	p[0] = '0';
	p[1] = 'x';
	for (int i = nib + 1; i >= 2; i--, v >>= 4)
		p[i] = "0123456789abcdef"[v & 15];
	return (size_t)nib + 2;
}

/* A line's counts, "%6u: %8u [%6u: %8u] @" as gperftools writes them. */
static void out_counts(ha_out *o, uint64_t io, uint64_t ib, uint64_t ao, uint64_t ab)
{
	char b[4 * 20 + 16];
	size_t k = u64_at(b, io, 6);
	b[k++] = ':';
	b[k++] = ' ';
	k += u64_at(b + k, ib, 8);
	b[k++] = ' ';
	b[k++] = '[';
	k += u64_at(b + k, ao, 6);
	b[k++] = ':';
	b[k++] = ' ';
	k += u64_at(b + k, ab, 8);
	memcpy(b + k, "] @", 3);
	ha_out_bytes(o, b, k + 3);
}

/* Copy /proc/self/maps, normalising the 4th permission character ('s'
 * shared -> 'p').  Only the permissions are looked at byte by byte; the
 * address range before them and the rest of the line are skipped with
 * memchr.
 * A line may be split across reads: field and col carry over. */
void ha_writer_maps_copy(ha_out *o, int fd)
{
	char buf[8192];
	int field = 0, col = 0;    /* position within the current line */
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			if (field == 0) {      /* the address range: to its space or line end */
				char *sp = memchr(buf + i, ' ', (size_t)(n - i));
				char *lim = sp ? sp : buf + n;
				char *nl = memchr(buf + i, '\n', (size_t)(lim - (buf + i)));
				if (nl) {
					i = nl - buf;
					col = 0;
				} else if (sp) {
					i = sp - buf;
					field = 1;
					col = 0;
				} else {
					break;
				}
				continue;
			}
			if (field >= 2) {      /* past the permissions: next line */
				char *nl = memchr(buf + i, '\n', (size_t)(n - i));
				if (!nl)
					break;
				i = nl - buf;
				field = col = 0;
				continue;
			}
			char c = buf[i];
			if (c == '\n') {
				field = col = 0;
			} else if (c == ' ') {
				field++;
				col = 0;
			} else {
				if (field == 1 && col == 3 && c == 's')
					buf[i] = 'p';
				col++;
			}
		}
		ha_out_bytes(o, buf, (size_t)n);
	}
}

int ha_maps_pid;
const char *ha_maps_text;
size_t ha_maps_text_len;

void ha_writer_maps(ha_out *o)
{
	if (ha_maps_text) {
		ha_out_bytes(o, ha_maps_text, ha_maps_text_len);
		return;
	}
	char path[32] = "/proc/self/maps";
	if (ha_maps_pid > 0)
		ha_snprintf(path, sizeof path, "/proc/%d/maps", ha_maps_pid);
	int fd;
	do
		fd = open(path, O_RDONLY | O_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return;
	ha_writer_maps_copy(o, fd);
	close(fd);
}

/* The lines of set, or a fresh snapshot of the live table (*own: free it). */
const ha_line *ha_lines_of(const ha_lineset *set, size_t *n, int *own)
{
	if (set) {
		*n = set->n;
		*own = 0;
		return set->v;
	}
	ha_table_lock();
	ha_line *lines = ha_table_snapshot(n);
	ha_table_unlock();
	*own = 1;
	return lines;
}

void ha_writer_profile(ha_out *o, int64_t r)
{
	ha_writer_profile_from(o, r, NULL);
}

void ha_writer_profile_from(ha_out *o, int64_t r, const ha_lineset *set)
{
	size_t n = 0;
	int own;
	const ha_line *lines = ha_lines_of(set, &n, &own);
	/* calibrated (calibrate.c): the lines are estimates already scaled to
	 * the books, which neither pprof may scale again: @ heapprofile */
	ha_calib cal;
	uint64_t *cv = ha_calib_values(lines, n, r, set, &cal);
	uint64_t t[4] = { 0, 0, 0, 0 };
	for (size_t i = 0; i < n; i++) {
		if (cv) {
			t[0] += cv[4 * i + 2];
			t[1] += cv[4 * i + 3];
			t[2] += cv[4 * i];
			t[3] += cv[4 * i + 1];
			continue;
		}
		t[0] += lines[i].alloc_count - lines[i].free_count;
		t[1] += lines[i].alloc_bytes - lines[i].free_bytes;
		t[2] += lines[i].alloc_count;
		t[3] += lines[i].alloc_bytes;
	}
	ha_out_str(o, "heap profile: ");
	out_counts(o, t[0], t[1], t[2], t[3]);
	if (!ha_rate_records_all(r) && !cv) {
		ha_out_str(o, " heap_v2/");
		ha_out_u64(o, (uint64_t)r, 0);
		ha_out_str(o, "\n");
	} else {
		ha_out_str(o, " heapprofile\n");
	}
	for (size_t i = 0; i < n; i++) {
		const ha_line *l = &lines[i];
		if (!l->alloc_count || !l->b->depth)
			continue;
		if (cv)
			out_counts(o, cv[4 * i + 2], cv[4 * i + 3], cv[4 * i], cv[4 * i + 1]);
		else
			out_counts(o, l->alloc_count - l->free_count,
				   l->alloc_bytes - l->free_bytes, l->alloc_count, l->alloc_bytes);
		/* The leaf is written minus 1, inside the call to malloc: perl
		 * pprof steps back every address but the first, so a raw leaf
		 * would be charged to whatever follows the call (with inlining,
		 * the next inlined function).  Go pprof subtracts 1 from every
		 * address; leaf - 2 still lies inside the call instruction.
		 * The frames are formatted here and written at once. */
		char fr[HA_PROF_DEPTH * 20 + 1];
		size_t k = 0;
		for (uint32_t d = 0; d < l->b->depth; d++) {
			if (k + 20 > sizeof fr) {
				ha_out_bytes(o, fr, k);
				k = 0;
			}
			fr[k++] = ' ';
			k += hex_at(fr + k, l->b->pcs[d] - (d == 0));
		}
		fr[k++] = '\n';
		ha_out_bytes(o, fr, k);
	}
	if (cv)
		ha_dump_mem_free(cv);
	if (lines && own)
		ha_dump_mem_free((void *)lines);
	ha_out_str(o, "\nMAPPED_LIBRARIES:\n");
	ha_writer_maps(o);
}

int ha_writer_file(const char *path, int64_t r)
{
	return ha_writer_file_from(path, r, NULL);
}

struct profile_job {
	int64_t r;
	const ha_lineset *set;
};

static void fill_profile(ha_out *o, void *arg)
{
	const struct profile_job *j = arg;
	ha_writer_profile_from(o, j->r, j->set);
}

int ha_writer_file_from(const char *path, int64_t r, const ha_lineset *set)
{
	struct profile_job j = { r, set };
	return ha_write_file(path, fill_profile, &j);
}

int ha_write_file(const char *path, void (*fill)(ha_out *o, void *arg), void *arg)
{
	char tmp[4096 + 16];
	size_t pl = strlen(path);
	if (pl + 5 > sizeof tmp)
		return ENAMETOOLONG;
	memcpy(tmp, path, pl);
	memcpy(tmp + pl, ".tmp", 5);
	/* The temporary name is predictable: whatever sits there (a stale file,
	 * a symlink planted in /tmp, a FIFO) is removed, never followed or
	 * waited on, and the file is created afresh (O_EXCL|O_NOFOLLOW).  The
	 * name is normally free: unlink only when the create finds it taken
	 * (one system call fewer per dump). */
	int fd, tries = 0;
	for (;;) {
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
		if (fd >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno != EEXIST || tries++ > 0)
			return errno;
		unlink(tmp);
	}
	ha_out o = { NULL, 0, 0, fd, 0 };
	fill(&o, arg);
	int err = ha_out_flush(&o);
	if (o.buf)
		ha_dump_mem_free(o.buf);
	if (close(fd) != 0 && !err && errno != EINTR)
		err = errno;
	if (!err && rename(tmp, path) != 0)
		err = errno;
	if (err)
		unlink(tmp);
	return err;
}
