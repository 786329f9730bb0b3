/* prof/output/leakscan.c — the conservative mark of a leak scan: which candidate
 * blocks a pointer in a process's memory reaches.
 *
 * Owns what counts as a pointer and where it is looked for, for both
 * callers (tools/leakscan.c from outside, prof/output/leaks.c at exit): every
 * readable and writable mapping (data and bss of every mapped object,
 * heaps, thread stacks) read through the process's /proc/PID/mem, so an
 * unreadable page is an error to skip, never a fault; every 8 bytes at
 * every byte offset (packed structs keep pointers unaligned) that fall
 * inside a candidate mark it: interior pointers count.  Bytes inside a
 * candidate count only once that candidate is marked (then its contents
 * are read in turn), so a leaked cycle stays leaked.  Memory outside the
 * candidates (unsampled blocks, freed ones) counts as reachable unless the
 * caller skips it (at exit: the allocator's free memory): a leak held only
 * there is missed, never a reachable block reported.  A thread's
 * stack is read from its stack pointer up when that is known (given, or
 * from /proc/PID/task/TID/syscall for a thread blocked in a system call):
 * the frames below it are dead and hold stale pointers.  The caller's skip
 * ranges are never read: the allocator's records (ha_meta_ranges), whose
 * popped stack slots and span records hold live blocks' addresses.  No stdio, no
 * allocation: the at-exit check runs it inside the allocator's process.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "prof/leakscan.h"
#include "prof/heapsort.h"

typedef struct state {
	ha_leak_scan *s;
	uint64_t gmin, gmax;      /* every candidate lies in [gmin, gmax) */
	size_t nwork;
	uint64_t sps[HA_LEAK_THREADS];
	int nsps;
	int memfd;
} state;

/* By address, for ha_heapsort. */
static int before(const void *xv, const void *yv)
{
	const ha_leak_block *x = xv, *y = yv;
	return x->lo < y->lo;
}

/* The candidate holding address v, or NULL. */
static ha_leak_block *find(const state *st, uint64_t v)
{
	if (v - st->gmin >= st->gmax - st->gmin)
		return NULL;
	const ha_leak_scan *s = st->s;
	size_t lo = 0, hi = s->n;
	while (lo < hi) {             /* past the last block with lo <= v */
		size_t mid = lo + (hi - lo) / 2;
		if (s->b[mid].lo <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	ha_leak_block *b = &s->b[lo - 1];
	return v < b->hi ? b : NULL;
}

static void mark(state *st, ha_leak_block *b)
{
	if (b->marked)
		return;
	b->marked = 1;
	st->s->work[st->nwork++] = (uint32_t)(b - st->s->b);
}

/* Look at buf, the process's [at, at + n) with avail bytes read (up to 7
 * past n, for the last offsets).  self: the candidate these bytes are
 * (its pointers into itself do not count); skip: bytes inside a candidate
 * wait until it is marked. */
static void look(state *st, const unsigned char *buf, size_t n, size_t avail, uint64_t at,
		 const ha_leak_block *self, int skip)
{
	const ha_leak_scan *s = st->s;
	size_t bi = 0;
	if (skip) {                   /* the first candidate ending after at */
		size_t lo = 0, hi = s->n;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (s->b[mid].hi <= at)
				lo = mid + 1;
			else
				hi = mid;
		}
		bi = lo;
	}
	size_t end = avail >= 8 ? avail - 7 : 0;
	if (end > n)
		end = n;
	uint64_t span = st->gmax - st->gmin;
	for (size_t i = 0; i < end; i++) {
		uint64_t v;
		memcpy(&v, buf + i, 8);
		if (v - st->gmin >= span)
			continue;
		if (skip) {
			uint64_t a = at + i;
			while (bi < s->n && s->b[bi].hi <= a)
				bi++;
			if (bi < s->n && s->b[bi].lo <= a)
				continue;
		}
		ha_leak_block *b = find(st, v);
		if (b && b != self)
			mark(st, b);
	}
}

/* Read [lo, hi) of the process and look at it (page by page where a read
 * comes back short: an unreadable page is skipped). */
static void read_range(state *st, uint64_t lo, uint64_t hi, const ha_leak_block *self, int skip)
{
	ha_leak_scan *s = st->s;
	for (uint64_t a = lo; a < hi;) {
		size_t n = hi - a < HA_LEAK_CHUNK ? (size_t)(hi - a) : HA_LEAK_CHUNK;
		size_t want = n + (hi - a > n ? 7 : 0);
		ssize_t got = pread(st->memfd, s->chunk, want, (off_t)a);
		if (got >= 0 && (size_t)got >= n) {
			s->bytes += (uint64_t)got;
			look(st, s->chunk, n, (size_t)got, a, self, skip);
		} else {
			for (uint64_t p = a; p < a + n; p += 4096) {
				size_t m = a + n - p < 4096 ? (size_t)(a + n - p) : 4096;
				ssize_t g = pread(st->memfd, s->chunk, m, (off_t)p);
				if (g > 0) {
					s->bytes += (uint64_t)g;
					look(st, s->chunk, (size_t)g, (size_t)g, p, self, skip);
				}
			}
		}
		a += n;
	}
}

/* [lo, hi) but the skipped ranges (sorted, disjoint). */
static void range(state *st, uint64_t lo, uint64_t hi, const ha_leak_block *self, int skip)
{
	const ha_leak_scan *s = st->s;
	size_t k = 0, top = s->nskips;
	while (k < top) {             /* the first skip ending after lo */
		size_t mid = k + (top - k) / 2;
		if (s->skips[mid].hi <= lo)
			k = mid + 1;
		else
			top = mid;
	}
	for (; k < s->nskips && s->skips[k].lo < hi && lo < hi; k++) {
		if (s->skips[k].lo > lo)
			read_range(st, lo, s->skips[k].lo, self, skip);
		lo = s->skips[k].hi;
	}
	if (lo < hi)
		read_range(st, lo, hi, self, skip);
}

static int skip_before(const void *xv, const void *yv)
{
	const ha_leak_range *x = xv, *y = yv;
	return x->lo < y->lo;
}

/* Sort the skips and merge those that overlap or touch. */
static void merge_skips(ha_leak_scan *s)
{
	size_t n = 0;
	ha_heapsort(s->skips, s->nskips, sizeof *s->skips, skip_before);
	for (size_t i = 0; i < s->nskips; i++) {
		ha_leak_range r = s->skips[i];
		if (r.hi <= r.lo)
			continue;
		if (n && r.lo <= s->skips[n - 1].hi) {
			if (r.hi > s->skips[n - 1].hi)
				s->skips[n - 1].hi = r.hi;
		} else {
			s->skips[n++] = r;
		}
	}
	s->nskips = n;
}

/* ---- text without stdio ---------------------------------------------------- */

static char *put_num(char *p, long v)
{
	char t[24];
	int k = 0;
	do
		t[k++] = (char)('0' + v % 10);
	while ((v /= 10) > 0);
	while (k)
		*p++ = t[--k];
	return p;
}

static uint64_t hex(const char **p)
{
	uint64_t v = 0;
	for (;; (*p)++) {
		char c = **p;
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			return v;
		v = v << 4 | (uint64_t)d;
	}
}

/* The path /proc/PID/NAME into buf. */
static void proc_path(char *buf, int pid, const char *name)
{
	char *p = buf;
	memcpy(p, "/proc/", 6);
	p = put_num(p + 6, pid);
	*p++ = '/';
	strcpy(p, name);
}

/* Threads blocked in a system call: /proc/PID/task/TID/syscall reads
 * "NR ARG1..ARG6 SP PC" (hex but NR), "running" for one on a CPU. */
static void blocked_sps(state *st, int pid)
{
	char path[64];
	proc_path(path, pid, "task");
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	char buf[4096];
	for (;;) {
		long n = syscall(SYS_getdents64, dfd, buf, sizeof buf);
		if (n <= 0)
			break;
		for (long o = 0; o < n;) {
			unsigned short reclen;
			memcpy(&reclen, buf + o + 16, sizeof reclen);
			const char *name = buf + o + 19;
			o += reclen;
			if (name[0] < '1' || name[0] > '9' || st->nsps >= HA_LEAK_THREADS)
				continue;
			char sp[96], line[256];
			char *q = sp + strlen(strcpy(sp, path));
			*q++ = '/';
			q = stpcpy(q, name);
			strcpy(q, "/syscall");
			int fd = open(sp, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				continue;
			ssize_t m = read(fd, line, sizeof line - 1);
			close(fd);
			if (m <= 0 || line[0] < '0' || line[0] > '9')
				continue;
			line[m] = 0;
			const char *c = line;
			int field = 0;
			uint64_t v = 0;
			while (*c && field < 8) {        /* to the 8th field: SP */
				while (*c == ' ')
					c++;
				if (c[0] == '0' && c[1] == 'x')
					c += 2;
				v = hex(&c);
				while (*c && *c != ' ')
					c++;
				field++;
			}
			if (field == 8 && v)
				st->sps[st->nsps++] = v;
		}
	}
	close(dfd);
}

/* The mappings, line by line through a small buffer. */
static void mappings(state *st, int fd)
{
	char buf[8192];
	size_t have = 0;
	int eof = 0;
	for (;;) {
		char *nl = memchr(buf, '\n', have);
		if (!nl) {
			if (eof || have == sizeof buf) {
				if (!have)
					return;
				nl = buf + have - 1;     /* a last line without newline, or too long */
			} else {
				ssize_t m = read(fd, buf + have, sizeof buf - have);
				if (m <= 0)
					eof = 1;
				else
					have += (size_t)m;
				continue;
			}
		}
		*nl = 0;
		const char *c = buf;
		uint64_t lo = hex(&c);
		uint64_t hi = *c == '-' ? (c++, hex(&c)) : 0;
		int rw = c[0] == ' ' && c[1] == 'r' && c[2] == 'w';
		const char *name = c;
		for (int f = 0; f < 5 && *name; f++) {    /* perms, offset, dev, inode, then the name */
			while (*name == ' ')
				name++;
			while (*name && *name != ' ')
				name++;
		}
		while (*name == ' ')
			name++;
		if (rw && hi > lo && strncmp(name, "/dev/", 5) && strcmp(name, "[vvar]") &&
		    strcmp(name, "[vsyscall]")) {
			for (int i = 0; i < st->nsps; i++)     /* a stack: from its SP up */
				if (st->sps[i] > lo && st->sps[i] < hi && st->sps[i] - 128 > lo)
					lo = (st->sps[i] - 128) & ~(uint64_t)7;
			range(st, lo, hi, NULL, 1);
		}
		size_t used = (size_t)(nl + 1 - buf);
		if (used > have)
			used = have;
		memmove(buf, buf + used, have - used);
		have -= used;
	}
}

int ha_leak_run(ha_leak_scan *s, int pid, int memfd)
{
	static state st_;             /* 32 KiB of stack pointers: not on the stack */
	state *st = &st_;
	memset(st, 0, sizeof *st);
	st->s = s;
	st->memfd = memfd;
	s->bytes = 0;
	if (!s->n)
		return 0;
	ha_heapsort(s->b, s->n, sizeof *s->b, before);
	merge_skips(s);
	st->gmin = s->b[0].lo;
	for (size_t i = 0; i < s->n; i++) {
		s->b[i].marked = 0;
		if (s->b[i].hi > st->gmax)
			st->gmax = s->b[i].hi;
	}
	for (int i = 0; i < s->nsps && st->nsps < HA_LEAK_THREADS; i++)
		st->sps[st->nsps++] = s->sps[i];
	if (s->blocked)
		blocked_sps(st, pid);
	for (size_t i = 0; i < s->nroots; i++) {
		ha_leak_block *b = find(st, s->roots[i]);
		if (b)
			mark(st, b);
	}
	char path[64];
	proc_path(path, pid, "maps");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	mappings(st, fd);
	close(fd);
	while (st->nwork) {           /* what the marked candidates point to */
		ha_leak_block *b = &s->b[s->work[--st->nwork]];
		range(st, b->lo, b->hi, b, 0);
	}
	return 0;
}
