/* prof/stats.c — PREFIX.NNNN.stats beside each dump: the heap against the
 * process's resident memory, so "200 MiB in the profile, 2 GiB in top" is
 * explained at a glance.  The heap's side comes from the allocator's books
 * and caches, the process's from /proc/self/status (resident bytes by kind)
 * and /proc/self/smaps (the largest resident mappings by path, all
 * anonymous memory as one "[anon]"; walked at most once a second).  "name value" lines, bytes, under a
 * comment header.  Written via path.tmp + rename; never allocates (stack
 * buffers, raw system calls).
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
#include "heapalloc.h"

#define TOP 8
#define PATH_CAP 200

typedef struct {
	uint64_t rss;
	size_t len;               /* of path: compared before the bytes */
	char path[PATH_CAP];
} region;

typedef struct {
	uint64_t rss, anon, file_rss, shmem, swap;   /* /proc/self/status */
	region top[TOP];
	uint64_t stack;                               /* smaps: the main thread's [stack] */
	region cur;                                   /* smaps: the run being summed */
	uint64_t anon_all;
	int have_cur;
} proc_mem;

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

static void each_line(int fd, void (*fn)(const char *, size_t, void *), void *arg)
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
	proc_mem *m = arg;
	if (starts(l, n, "RssAnon:"))
		m->anon = kb_field(l, n);
	else if (starts(l, n, "RssFile:"))
		m->file_rss = kb_field(l, n);
	else if (starts(l, n, "RssShmem:"))
		m->shmem = kb_field(l, n);
	else if (starts(l, n, "VmSwap:"))
		m->swap = kb_field(l, n);
}

static void keep_top(proc_mem *m, const region *r)
{
	if (!r->rss)
		return;
	if (r->len == 7 && memcmp(r->path, "[stack]", 7) == 0)
		m->stack += r->rss;
	int low = 0;
	for (int i = 0; i < TOP; i++) {
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
	size_t k = (size_t)(end - p) < PATH_CAP - 1 ? (size_t)(end - p) : PATH_CAP - 1;
	memcpy(path, p, k);
	path[k] = 0;
	if (!k) {
		strcpy(path, "[anon]");
		k = 6;
	}
	return (int)k;
}

static void smaps_line(const char *l, size_t n, void *arg)
{
	proc_mem *m = arg;
	char path[PATH_CAP];
	if (n && l[0] >= 'A' && l[0] <= 'Z') {   /* a field line: only Rss matters */
		if (m->have_cur && l[0] == 'R' && starts(l, n, "Rss:"))
			m->cur.rss += kb_field(l, n);
		return;
	}
	int k = header_path(l, n, path);
	if (k >= 0) {
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
static void smaps_walk(int fd, proc_mem *m)
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
	region top[TOP];
	uint64_t stack;
} walked;

/* Counters always; *age_ms: how old the regions are (0: walked now). */
static void read_proc(proc_mem *m, long *age_ms)
{
	memset(m, 0, sizeof *m);
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		each_line(fd, status_line, m);
		close(fd);
	}
	m->rss = m->anon + m->file_rss + m->shmem;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	long age = (long)(now.tv_sec - walked.at.tv_sec) * 1000 +
		   (now.tv_nsec - walked.at.tv_nsec) / 1000000;
	if (walked.pid == getpid() && age < 1000) {
		memcpy(m->top, walked.top, sizeof m->top);
		m->stack = walked.stack;
		*age_ms = age > 0 ? age : 1;
		return;
	}
	*age_ms = 0;
	fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		smaps_walk(fd, m);
		close(fd);
		if (m->have_cur)
			keep_top(m, &m->cur);
		memcpy(walked.top, m->top, sizeof m->top);
		walked.stack = m->stack;
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

/* Where RSS goes, in lines that add up to process.rss: the heap's parts
 * from the allocator's own counts (all threads, since the process began),
 * the profiler's and the metadata, the main stack and file-backed memory
 * from the kernel; then what is left, or what the heap counts that is not
 * resident (committed, never touched).  explained: the smaller of the
 * named lines' sum and RSS over the larger. */
static void explain(ha_out *o, const heapalloc_stats *st, const ha_alloc_view *av,
		    const proc_mem *m)
{
	uint64_t books[2], req[2];
	ha_books(books, req);
	uint64_t held = st->small_free_bytes + av->huge_cached + av->span_pool_hot +
			av->large_cache_hot;
	/* what mimalloc counts committed beyond the spans and large blocks
	 * heapalloc holds (cold pages are given back but still counted) */
	uint64_t ours = st->small_span_bytes + av->span_pool_hot + av->span_pool_cold +
			st->large_bytes + av->large_cache_hot + av->large_cache_cold;
	uint64_t kept = av->arena_committed > ours ? av->arena_committed - ours : 0;
	uint64_t prof = st->prof_memory + ha_peak_bytes();
	uint64_t file = m->file_rss + m->shmem;
	uint64_t parts[] = { books[1], held, kept, prof, st->metadata_bytes, m->stack, file };
	uint64_t sum = 0;
	for (unsigned i = 0; i < sizeof parts / sizeof parts[0]; i++)
		sum += parts[i];
	ha_out_str(o, "# where process.rss goes: the rss lines add up to it\n");
	line(o, "rss.heap_in_use", books[1], "blocks the program holds (all threads, size-class bytes)");
	line(o, "rss.heap_free_held", held, "free blocks and pages heapalloc keeps for reuse");
	line(o, "rss.arena_kept", kept, "freed memory the backing arena (mimalloc) keeps committed");
	line(o, "rss.profiler", prof, "stack table, sampled-object map, peak copy");
	line(o, "rss.metadata", st->metadata_bytes, "span records, page map");
	line(o, "rss.main_stack", m->stack, "the main thread's stack ([stack])");
	line(o, "rss.file", file, "file-backed and shared: code, mapped files, tmpfs");
	if (sum <= m->rss) {
		line(o, "rss.other", m->rss - sum,
		     "not named above: other threads' stacks, the program's own mmaps, libc");
	} else {
		line(o, "rss.not_resident", sum - m->rss,
		     "counted above but not resident (subtract): pages never touched or swapped");
	}
	/* an over-count (committed, never touched) explains no more than an
	 * under-count does */
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
	heapalloc_stats st;
	heapalloc_get_stats(&st);
	ha_alloc_view av;
	ha_alloc_view_read(&av);
	uint64_t hcached = av.huge_cached;
	proc_mem m;
	long age_ms;
	read_proc(&m, &age_ms);
	ha_out_str(o, "# heapalloc stats for ");
	ha_out_str(o, dump);
	ha_out_str(o, " (");
	ha_out_str(o, reason);
	ha_out_str(o, ")\n# name value(bytes) meaning\n");
	line(o, "heap.in_use", inuse, ha_prof_rate() <= 1 || ha_prof_compat()
	     ? "bytes in use since profiling started (requested bytes, as the profile's lines)"
	     : "bytes in use since profiling started (the books: size-class bytes)");
	line(o, "heap.peak_in_use", peak, "in use at PREFIX.peak.heap's copy (0: none yet)");
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
	for (int k = 0; k < TOP; k++) {
		int best = -1;
		for (int i = 0; i < TOP; i++)
			if (m.top[i].rss && (best < 0 || m.top[i].rss > m.top[best].rss))
				best = i;
		if (best < 0)
			break;
		line(o, "process.mapping", m.top[best].rss, m.top[best].path);
		m.top[best].rss = 0;
	}
	explain(o, &st, &av, &m);
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
