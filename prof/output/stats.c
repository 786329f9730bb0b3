/* prof/output/stats.c — PREFIX.NNNN.stats beside each dump: the heap against the
 * process's resident memory, so "200 MiB in the profile, 2 GiB in top" is
 * explained at a glance.  The heap's side comes from the allocator's books
 * and caches and the resident pages of its own mappings (mincore: what
 * mimalloc committed but never touched is not resident), the process's
 * from /proc/self/status (resident bytes by kind) and /proc/self/smaps
 * (the largest resident mappings by path, all anonymous memory as one
 * "[anon]", and the threads' stacks; walked at most once a second while
 * the anonymous RSS stays within 1/64 of the last walk's).
 * "name value" lines, bytes, under a comment header.  Written via
 * path.tmp + rename; never allocates (stack buffers, raw system calls).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prof/prof.h"
#include "prof/unit.h"   /* the walk's types, shared with its unit test */
#include "heapalloc.h"

/* The value in kB after "Name:" on line l (its length n), in bytes. */
static uint64_t kb_field(const char *l, size_t n)
{
	uint64_t v = 0;
	size_t i = 0;
	while (i < n && l[i] != ':')
		i++;
	for (i++; i < n && (l[i] == ' ' || l[i] == '\t'); i++)
		;
	for (; i < n && l[i] >= '0' && l[i] <= '9'; i++)
		v = v * 10 + (uint64_t)(l[i] - '0');
	return v << 10;
}

static int starts(const char *l, size_t n, const char *key)
{
	size_t k = strlen(key);
	return n > k && memcmp(l, key, k) == 0;
}

/* Feed fd's lines to fn(line, len, arg). */
/* Read more of fd into buf after its first *have bytes (cap in all),
 * restarting on EINTR: 0 at the end or on an error. */
static int read_more(int fd, char *buf, size_t *have, size_t cap)
{
	for (;;) {
		ssize_t r = read(fd, buf + *have, cap - *have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return 0;
		*have += (size_t)r;
		return 1;
	}
}

HA_TESTABLE void each_line(int fd, void (*fn)(const char *, size_t, void *), void *arg)
{
	char buf[4096];
	size_t have = 0;
	while (read_more(fd, buf, &have, sizeof buf)) {
		size_t s = 0;
		for (const char *nl; (nl = memchr(buf + s, '\n', have - s)) != NULL;) {
			fn(buf + s, (size_t)(nl - (buf + s)), arg);
			s = (size_t)(nl - buf) + 1;
		}
		if (s == 0 && have == sizeof buf)   /* a line longer than buf: drop it */
			s = have;
		memmove(buf, buf + s, have - s);
		have -= s;
	}
}

/* /proc/self/status: the kernel's resident counters, read without walking
 * page tables (smaps_rollup walks every mapping's). */
static void status_line(const char *l, size_t n, void *arg)
{
	ha_proc_mem *m = arg;
	if (starts(l, n, "RssAnon:"))
		m->anon = kb_field(l, n);
	else if (starts(l, n, "RssFile:"))
		m->file_rss = kb_field(l, n);
	else if (starts(l, n, "RssShmem:"))
		m->shmem = kb_field(l, n);
	else if (starts(l, n, "VmSwap:"))
		m->swap = kb_field(l, n);
}

HA_TESTABLE void keep_top(ha_proc_mem *m, const ha_stats_region *r)
{
	if (!r->rss)
		return;
	if (r->len == 7 && memcmp(r->path, "[stack]", 7) == 0)
		m->stack += r->rss;
	int low = 0;
	for (int i = 0; i < HA_STATS_TOP; i++) {
		if (m->top[i].rss && m->top[i].len == r->len &&
		    memcmp(m->top[i].path, r->path, r->len) == 0) {
			m->top[i].rss += r->rss;     /* the same file again */
			return;
		}
		if (m->top[i].rss < m->top[low].rss)
			low = i;
	}
	if (r->rss > m->top[low].rss)
		m->top[low] = *r;
}

static uintptr_t hex(const char **p, const char *end)
{
	uintptr_t v = 0;
	for (; *p < end; ++*p) {
		char c = **p;
		if (c >= '0' && c <= '9')
			v = v * 16 + (uintptr_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v * 16 + (uintptr_t)(c - 'a' + 10);
		else
			break;
	}
	return v;
}

static int owned(const ha_proc_mem *m, uintptr_t lo, uintptr_t hi)
{
	for (unsigned i = 0; i < m->nown; i++)
		if (m->own[i][0] < hi && m->own[i][1] > lo)
			return 1;
	return 0;
}

/* Resident bytes of [lo, hi), page-aligned, by mincore (a byte a kernel
 * page: 4 KiB, or 16 or 64 KiB on arm64). */
static uint64_t resident(uintptr_t lo, uintptr_t hi)
{
	unsigned char v[4096];
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uint64_t n = 0;
	while (lo < hi) {
		size_t len = hi - lo < sizeof v * pg ? hi - lo : sizeof v * pg;
		if (mincore((void *)lo, len, v) == 0)
			for (size_t i = 0; i < len / pg; i++)
				n += v[i] & 1;
		lo += len;
	}
	return n * pg;
}

/* A mapping inside one of mimalloc's ranges counts by its Rss; one that
 * only overlaps them (the kernel merged a neighbour into it) by mincore
 * over the overlap. */
static void note_own(ha_proc_mem *m, uintptr_t lo, uintptr_t hi)
{
	m->in_own = 0;
	for (unsigned i = 0; i < m->nown; i++) {
		uintptr_t a = m->own[i][0], b = m->own[i][1];
		if (a <= lo && hi <= b) {
			m->in_own = 1;
			return;
		}
		if (a < hi && b > lo)
			m->arena += resident(a > lo ? a : lo, b < hi ? b : hi);
	}
}

/* A header's range and permissions: is it a thread's stack (after a
 * guard), or a guard?  An anonymous mapping of mimalloc's never is. */
static void note_vma(ha_proc_mem *m, const char *l, size_t n, int anon)
{
	const char *p = l, *end = l + n;
	uintptr_t lo = hex(&p, end);
	if (p < end && *p == '-')
		p++;
	uintptr_t hi = hex(&p, end);
	if (p < end && *p == ' ')
		p++;
	int rw = end - p >= 4 && memcmp(p, "rw-p", 4) == 0;
	int none = end - p >= 4 && memcmp(p, "---p", 4) == 0;
	int ours = anon && (rw || none) && owned(m, lo, hi);
	if (ours)
		note_own(m, lo, hi);
	else
		m->in_own = 0;
	m->in_stack = anon && rw && !ours && m->prev_guard && m->prev_hi == lo;
	m->prev_guard = anon && none && !ours && hi - lo <= ((uintptr_t)1 << 20);
	m->prev_hi = hi;
}

/* A mapping's header line: "start-end perms offset dev inode   path".  The
 * five fields are skipped a space at a time with memchr (the line is some
 * 75 bytes before its path).  The path's length, or -1 for another line. */
static int header_path(const char *l, size_t n, char *path)
{
	if (n == 0 || !((l[0] >= '0' && l[0] <= '9') || (l[0] >= 'a' && l[0] <= 'f')))
		return -1;
	const char *p = l, *end = l + n;
	for (int field = 0; field < 5; field++) {
		const char *sp = memchr(p, ' ', (size_t)(end - p));
		if (!sp)
			return -1;
		p = sp + 1;
		while (p < end && *p == ' ' && field < 4)
			p++;
	}
	while (p < end && *p == ' ')
		p++;
	size_t k = (size_t)(end - p) < HA_STATS_PATH_CAP - 1 ? (size_t)(end - p) : HA_STATS_PATH_CAP - 1;
	memcpy(path, p, k);
	path[k] = 0;
	if (!k) {
		strcpy(path, "[anon]");
		k = 6;
	}
	return (int)k;
}

HA_TESTABLE void smaps_line(const char *l, size_t n, void *arg)
{
	ha_proc_mem *m = arg;
	char path[HA_STATS_PATH_CAP];
	if (n && l[0] >= 'A' && l[0] <= 'Z') {   /* a field line: only Rss matters */
		if (m->have_cur && l[0] == 'R' && starts(l, n, "Rss:")) {
			uint64_t v = kb_field(l, n);
			m->cur.rss += v;
			if (m->in_stack)
				m->tstacks += v;
			if (m->in_file)
				m->files += v;
			if (m->in_own)
				m->arena += v;
		}
		return;
	}
	int k = header_path(l, n, path);
	if (k >= 0) {
		note_vma(m, l, n, k == 6 && memcmp(path, "[anon]", 6) == 0);
		m->in_file = path[0] == '/';
		if (m->have_cur && m->cur.len == (size_t)k && memcmp(m->cur.path, path, (size_t)k) == 0)
			return;                      /* the next piece of the same file */
		if (m->have_cur)
			keep_top(m, &m->cur);
		m->cur.rss = 0;
		m->cur.len = (size_t)k;
		memcpy(m->cur.path, path, (size_t)k + 1);
		m->have_cur = 1;
	}
}

/* The field line at p (in [p, end)) starting with c and then key (c then
 * key: "Rss:" is 'R' + "ss:"), at a line start: its start, or NULL when
 * it is not in [p, end).  memchr on the field's first letter: among the
 * field names of a mapping only "Rss:" and "Referenced:" hold an 'R', only
 * "VmFlags:" a 'V' (their values are numbers and lowercase flags). */
static const char *field_at(const char *p, const char *end, char c, const char *key)
{
	size_t k = strlen(key);
	for (const char *q = p; (q = memchr(q, c, (size_t)(end - q))) != NULL; q++)
		if ((q == p || q[-1] == '\n') && (size_t)(end - q) > k && memcmp(q + 1, key, k) == 0)
			return q;
	return NULL;
}

/* /proc/self/smaps, each mapping's header and its Rss only.  A mapping's
 * fields end with "VmFlags:" (Linux >= 3.8), so the walk jumps from the
 * header to Rss and on past VmFlags instead of looking at every one of its
 * ~25 lines.  A kernel whose first read shows no VmFlags is read line by
 * line.  A record may be split across reads: the walk's state carries over,
 * and bytes nothing is sought in are dropped. */
HA_TESTABLE void smaps_walk(int fd, ha_proc_mem *m)
{
	char buf[8192];
	size_t have = 0, s = 0;
	int st = 0, first = 1;      /* st: 0 at a header, 1 seeking Rss, 2 seeking VmFlags */
	while (read_more(fd, buf, &have, sizeof buf)) {
		if (first) {
			first = 0;
			if (!field_at(buf, buf + have, 'V', "mFlags:")) {
				if (lseek(fd, 0, SEEK_SET) == 0)
					each_line(fd, smaps_line, m);
				return;
			}
		}
		const char *end = buf + have;
		for (;;) {
			const char *p = buf + s, *nl, *f;
			if (st == 0) {
				if (!(nl = memchr(p, '\n', (size_t)(end - p))))
					break;
				smaps_line(p, (size_t)(nl - p), m);
				if (!(*p >= 'A' && *p <= 'Z'))   /* a field past VmFlags stays here */
					st = 1;
			} else {
				f = st == 1 ? field_at(p, end, 'R', "ss:") : field_at(p, end, 'V', "mFlags:");
				if (!f || !(nl = memchr(f, '\n', (size_t)(end - f)))) {
					if (!f)   /* nothing sought before the last few bytes */
						s = have - (have - s < 8 ? have - s : 8);
					break;
				}
				if (st == 1)
					smaps_line(f, (size_t)(nl - f), m);
				st = st == 1 ? 2 : 0;
			}
			s = (size_t)(nl - buf) + 1;
		}
		if (s == 0 && have == sizeof buf) {   /* a line longer than buf: drop it */
			s = have;
			st = st == 0 ? 1 : st;
		}
		memmove(buf, buf + s, have - s);
		have -= s;
		s = 0;
	}
}

/* The largest regions from the last walk of /proc/self/smaps: a walk costs
 * a pass over every page table, so dumps less than a second apart share one. */
static struct {
	pid_t pid;
	struct timespec at;
	ha_stats_region top[HA_STATS_TOP];
	uint64_t stack, tstacks, files, arena;
	uint64_t anon;            /* RssAnon then: a walk after a big change is stale */
} walked;

/* Counters always; *age_ms: how old the regions are (0: walked now). */
static void read_status(ha_proc_mem *m)
{
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		each_line(fd, status_line, m);
		close(fd);
	}
	m->rss = m->anon + m->file_rss + m->shmem;
}

static void read_proc(ha_proc_mem *m, long *age_ms)
{
	memset(m, 0, sizeof *m);
	m->nown = ha_alloc_arena_ranges(m->own, HA_STATS_OWN_RANGES);
	if (m->nown > HA_STATS_OWN_RANGES)
		m->nown = HA_STATS_OWN_RANGES;
	read_status(m);
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	long age = (long)(now.tv_sec - walked.at.tv_sec) * 1000 +
		   (now.tv_nsec - walked.at.tv_nsec) / 1000000;
	uint64_t moved = m->anon > walked.anon ? m->anon - walked.anon : walked.anon - m->anon;
	uint64_t slack = m->anon / 64 > ((uint64_t)1 << 20) ? m->anon / 64 : (uint64_t)1 << 20;
	if (walked.pid == getpid() && age < 1000 && moved <= slack) {
		memcpy(m->top, walked.top, sizeof m->top);
		m->stack = walked.stack;
		m->tstacks = walked.tstacks;
		m->files = walked.files;
		m->arena = walked.arena;
		*age_ms = age > 0 ? age : 1;
		return;
	}
	*age_ms = 0;
	int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		smaps_walk(fd, m);
		close(fd);
		if (m->have_cur)
			keep_top(m, &m->cur);
		memcpy(walked.top, m->top, sizeof m->top);
		walked.stack = m->stack;
		walked.tstacks = m->tstacks;
		walked.files = m->files;
		walked.arena = m->arena;
		walked.anon = m->anon;
		walked.pid = getpid();
		walked.at = now;
	}
}

static void line(ha_out *o, const char *name, uint64_t v, const char *what)
{
	static const char pad[] = "                        ";
	size_t n = strlen(name);
	ha_out_str(o, name);
	ha_out_bytes(o, pad, n < 20 ? 20 - n : 1);
	ha_out_u64(o, v, 14);
	ha_out_str(o, "  ");
	ha_out_str(o, what);
	ha_out_str(o, "\n");
}

/* Where RSS goes, in lines that add up to process.rss, each of resident
 * bytes.  The heap's mappings (mimalloc's and the huge regions) hold the
 * blocks in use, the free blocks and pages heapalloc keeps, the profiler's
 * raw memory, and what mimalloc keeps of freed memory (with its headers):
 * that last line is their resident pages less the others.  Metadata is its
 * chunks' resident pages; stacks and file-backed memory are the kernel's
 * figures; then what is left, or what the lines count that is not resident
 * (blocks in use never touched).  explained: the smaller of the named
 * lines' sum and RSS over the larger. */
static void explain(ha_out *o, const heapalloc_stats *st, const ha_alloc_view *av,
		    const ha_alloc_resident *res, const ha_proc_mem *m)
{
	uint64_t books[2], req[2];
	ha_books(books, req);
	uint64_t held = st->small_free_bytes + av->huge_cached + av->span_pool_hot +
			res->large_hot;
	uint64_t prof = st->prof_memory + ha_peak_bytes();
	uint64_t prof_raw = ha_table_raw_bytes() + ha_peak_bytes();
	prof_raw = prof_raw < prof ? prof_raw : prof;
	uint64_t heap = m->arena + res->huge, named = books[1] + held + prof_raw;
	uint64_t kept = heap > named ? heap - named : 0;
	uint64_t stacks = m->stack + m->tstacks;
	/* the walk's file mappings hold their private copies (data written,
	 * relocations), which the kernel counts anonymous */
	uint64_t file = m->file_rss + m->shmem;
	file = m->files > file ? m->files : file;
	uint64_t parts[] = { books[1], held, kept, prof, res->meta, stacks, file };
	uint64_t sum = 0;
	for (unsigned i = 0; i < sizeof parts / sizeof parts[0]; i++)
		sum += parts[i];
	ha_out_str(o, "# where process.rss goes: the rss lines add up to it\n");
	line(o, "rss.heap_in_use", books[1], "blocks the program holds (all threads, size-class bytes)");
	line(o, "rss.heap_free_held", held, "free blocks and pages heapalloc keeps for reuse");
	line(o, "rss.arena_kept", kept,
	     "the rest of the heap's resident pages: freed memory mimalloc keeps, its headers");
	line(o, "rss.profiler", prof, "stack table, sampled-object map, peak copy");
	line(o, "rss.metadata", res->meta, "span records, page map (resident pages)");
	line(o, "rss.stacks", stacks, "threads' stacks: [stack] and the others' (below their guard)");
	line(o, "rss.file", file, "mappings of files and shared memory, with their written copies");
	if (sum <= m->rss) {
		line(o, "rss.other", m->rss - sum,
		     "not named above: the program's own mmaps, libc, globals");
	} else {
		line(o, "rss.not_resident", sum - m->rss,
		     "counted above but not resident (subtract): blocks never touched or swapped");
	}
	/* an over-count (never touched) explains no more than an under-count */
	uint64_t lo = sum < m->rss ? sum : m->rss, hi = sum < m->rss ? m->rss : sum;
	char buf[96];
	uint64_t pm = hi ? lo * 1000 / hi : 1000;
	ha_snprintf(buf, sizeof buf, "# explained: %llu.%llu%% of process.rss\n",
		    (unsigned long long)(pm / 10), (unsigned long long)(pm % 10));
	ha_out_str(o, buf);
}

static void write_stats(ha_out *o, const char *dump, const char *reason, uint64_t inuse,
			uint64_t peak)
{
	/* the slow walk first, then the figures that must agree, close
	 * together: a running program moves between them */
	ha_proc_mem m;
	long age_ms;
	read_proc(&m, &age_ms);
	ha_alloc_resident res;
	ha_alloc_resident_read(&res);
	heapalloc_stats st;
	heapalloc_get_stats(&st);
	ha_alloc_view av;
	ha_alloc_view_read(&av);
	uint64_t hcached = av.huge_cached;
	read_status(&m);
	ha_out_str(o, "# heapalloc stats for ");
	ha_out_str(o, dump);
	ha_out_str(o, " (");
	ha_out_str(o, reason);
	ha_out_str(o, ")\n# name value(bytes) meaning\n");
	line(o, "heap.in_use", inuse, ha_prof_records_all() || ha_prof_compat()
	     ? "bytes in use since profiling started (requested bytes, as the profile's lines)"
	     : "bytes in use since profiling started (the books: size-class bytes)");
	line(o, "heap.peak_in_use", peak, "in use at PREFIX.peak.heap's copy (0: none yet)");
	line(o, "heap.peak_high", ha_peak_high(), "the highest in use the books saw: the true peak");
	line(o, "heap.free_held", st.small_free_bytes + hcached,
	     "free bytes heapalloc keeps for reuse (the three lines below)");
	line(o, "heap.thread_caches", st.thread_cache_bytes, "free blocks in thread caches");
	line(o, "heap.central", st.small_free_bytes - st.thread_cache_bytes,
	     "free blocks in central lists and spans");
	line(o, "heap.huge_cached", hcached, "freed pages of blocks >= 1 MiB held for reuse (resident where touched)");
	line(o, "heap.spans", st.small_span_bytes, "bytes in spans of small size classes");
	line(o, "heap.large", st.large_bytes, "bytes in blocks > 32 KiB");
	line(o, "heap.metadata", st.metadata_bytes, "span records, page map");
	line(o, "mimalloc.committed", av.arena_committed, "bytes the backing arena has committed");
	line(o, "mimalloc.resident", m.arena, "of mimalloc's mappings, the resident bytes");
	line(o, "heap.huge_resident", res.huge, "of the huge-block regions, the resident bytes");
	line(o, "profiler.memory", st.prof_memory + ha_peak_bytes(),
	     "stack table, sampled-object map, peak copy");
	line(o, "process.rss", m.rss, "resident (/proc/self/status)");
	line(o, "process.rss_anon", m.anon, "of it anonymous: the heap, stacks, other mmaps");
	line(o, "process.rss_file", m.file_rss, "of it file-backed: code, mapped files");
	line(o, "process.rss_shmem", m.shmem, "of it shared memory (shmem, tmpfs)");
	line(o, "process.swap", m.swap, "swapped out");
	if (age_ms) {
		char buf[96];
		ha_snprintf(buf, sizeof buf, "# the regions below as of %ld ms before this dump\n",
			    age_ms);
		ha_out_str(o, buf);
	}
	/* the largest resident regions, biggest first */
	for (int k = 0; k < HA_STATS_TOP; k++) {
		int best = -1;
		for (int i = 0; i < HA_STATS_TOP; i++)
			if (m.top[i].rss && (best < 0 || m.top[i].rss > m.top[best].rss))
				best = i;
		if (best < 0)
			break;
		line(o, "process.mapping", m.top[best].rss, m.top[best].path);
		m.top[best].rss = 0;
	}
	explain(o, &st, &av, &res, &m);
}

struct stats_job {
	const char *dump, *reason;
	uint64_t inuse, peak;
};

static void fill_stats(ha_out *o, void *arg)
{
	const struct stats_job *j = arg;
	write_stats(o, j->dump, j->reason, j->inuse, j->peak);
}

int ha_stats_file(const char *path, const char *dump, const char *reason, uint64_t inuse,
		  uint64_t peak)
{
	struct stats_job j = { dump, reason, inuse, peak };
	return ha_write_file(path, fill_stats, &j);
}
