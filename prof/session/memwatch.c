/* prof/session/memwatch.c — memory triggers polled by the helper thread: RSS growth
 * dumps (HEAP_PROFILE_RSS_INTERVAL) and one dump before an OOM kill
 * (HEAP_PROFILE_OOM_FRACTION of the smallest memory limit).
 *
 * Owns the limit discovery (cgroup v2 memory.max of this process's cgroup
 * and its ancestors, cgroup v1 memory.limit_in_bytes, RLIMIT_AS), the usage
 * reading and the memory reserved for the pre-OOM dump.  Reads /proc and
 * /sys with raw open/read into stack buffers: never allocates, so it works
 * when the heap cannot grow.  The pre-OOM dump's writer memory comes from a
 * reserve mapped at start (ha_dump_mem, writer.c): RLIMIT_AS counts it then,
 * not when the limit is near; a cgroup is charged for its pages only when
 * the dump touches them, which the fraction's headroom covers.
 * Only the helper thread polls (ha_memwatch_poll); start and fork run with
 * no dump in progress.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "prof/prof.h"
#include "prof/unit.h"   /* the watch's types, shared with its unit test */

#define POLL_MS 100               /* RSS and limit checks, 10 per second */
#define RESERVE_BYTES (4u << 20)  /* the pre-OOM dump's writer memory */
/* Where the cgroups are read (tests/unit/prof_memwatch points them at a
 * tree of its own). */
HA_TESTABLE const char *cg_self = "/proc/self/cgroup";
HA_TESTABLE const char *cg_root = "/sys/fs/cgroup";

HA_TESTABLE ha_memwatch watch;

/* path's content into buf (NUL-terminated); its length, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
	int fd;
	do
		fd = open(path, O_RDONLY | O_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return -1;
	size_t len = 0;
	while (len + 1 < cap) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = 0;
	return (ssize_t)len;
}

static int parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	if (*s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++)
		v = v * 10 + (uint64_t)(*s - '0');
	*out = v;
	return 0;
}

/* A limit file: a number of bytes, "max" (v2) or a huge value (v1) = none. */
static uint64_t read_limit(const char *path)
{
	char buf[64];
	uint64_t v;
	if (read_small(path, buf, sizeof buf) <= 0 || parse_u64(buf, &v) != 0)
		return 0;
	return v >= (1ull << 62) ? 0 : v;
}

static int read_u64_file(const char *path, uint64_t *v)
{
	char buf[64];
	return read_small(path, buf, sizeof buf) > 0 ? parse_u64(buf, v) : -1;
}

int ha_proc_statm(uint64_t *as, uint64_t *rss)
{
	char buf[128];
	if (read_small("/proc/self/statm", buf, sizeof buf) <= 0)
		return -1;
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	const char *p = buf;
	if (parse_u64(p, as) != 0)
		return -1;
	while (*p && *p != ' ')
		p++;
	if (*p++ != ' ' || parse_u64(p, rss) != 0)
		return -1;
	*as *= pg;
	*rss *= pg;
	return 0;
}

static void take_limit(int kind, uint64_t limit, const char *usage)
{
	if (!limit || (watch.limit && watch.limit <= limit))
		return;
	watch.kind = kind;
	watch.limit = limit;
	uint64_t v;
	if (usage && read_u64_file(usage, &v) == 0)
		ha_snprintf(watch.usage_path, sizeof watch.usage_path, "%s", usage);
	else
		watch.usage_path[0] = 0;
}

/* The memory cgroups of /proc/self/cgroup: "0::/path" (v2; this group and
 * every ancestor's memory.max bind) and "N:...memory...:/path" (v1). */
HA_TESTABLE void find_cgroup_limits(void)
{
	char buf[4096];
	if (read_small(cg_self, buf, sizeof buf) <= 0)
		return;
	for (char *line = buf, *next; *line; line = next) {
		char *nl = strchr(line, '\n');
		next = nl ? nl + 1 : line + strlen(line);
		if (nl)
			*nl = 0;
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2 || c2[1] != '/')
			continue;
		const char *path = c2 + 1;
		char f[HA_MEMWATCH_PATH_CAP], u[HA_MEMWATCH_PATH_CAP];
		if (c1 == line + 1 && line[0] == '0' && c2 == c1 + 1) {
			/* v2 at /sys/fs/cgroup, or .../unified on a hybrid host */
			for (int r = 0; r < 2; r++) {
				char dir[HA_MEMWATCH_PATH_CAP];
				int rn = ha_snprintf(dir, sizeof dir, "%s%s", cg_root,
						     r ? "/unified" : "");
				size_t rl = rn > 0 ? (size_t)rn : 0;
				int n = ha_snprintf(dir + rl, sizeof dir - rl, "%s", path) + (int)rl;
				if (n <= 0 || (size_t)n >= sizeof dir)
					continue;
				/* walk up to the root: the smallest memory.max binds */
				for (size_t len = (size_t)n; len > rl; ) {
					dir[len] = 0;
					ha_snprintf(f, sizeof f, "%s/memory.max", dir);
					ha_snprintf(u, sizeof u, "%s/memory.current", dir);
					take_limit(HA_LIM_CG2, read_limit(f), u);
					while (len > rl && dir[len - 1] != '/')
						len--;
					if (len > rl)
						len--;
				}
			}
			continue;
		}
		/* v1: "memory" in the comma-separated controller list */
		*c2 = 0;
		int mem = 0;
		for (char *t = c1 + 1; t && *t; ) {
			char *comma = strchr(t, ',');
			size_t tl = comma ? (size_t)(comma - t) : strlen(t);
			if (tl == 6 && memcmp(t, "memory", 6) == 0)
				mem = 1;
			t = comma ? comma + 1 : NULL;
		}
		if (!mem)
			continue;
		ha_snprintf(f, sizeof f, "%s/memory%s/memory.limit_in_bytes", cg_root,
			    strcmp(path, "/") ? path : "");
		ha_snprintf(u, sizeof u, "%s/memory%s/memory.usage_in_bytes", cg_root,
			    strcmp(path, "/") ? path : "");
		take_limit(HA_LIM_CG1, read_limit(f), u);
	}
}

int ha_memwatch_start(void)
{
	uint64_t as = 0, rss = 0;
	ha_proc_statm(&as, &rss);
	watch.rss_step = ha_prof_opt.rss_interval;
	watch.rss_base = rss;
	watch.kind = HA_LIM_NONE;
	watch.limit = watch.threshold = 0;
	watch.oom_done = 0;
	if (ha_prof_opt.oom_fraction > 0) {
		find_cgroup_limits();
		struct rlimit rl;
		if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
			take_limit(HA_LIM_AS, (uint64_t)rl.rlim_cur, NULL);
		watch.threshold = (uint64_t)((unsigned __int128)watch.limit *
					 (uint64_t)ha_prof_opt.oom_fraction / 1000000);
	}
	if (watch.limit && !watch.reserve) {
		void *m = ha_sys_mmap(NULL, RESERVE_BYTES, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		watch.reserve = m == MAP_FAILED ? NULL : m;
	}
	return ha_memwatch_period_ms() > 0;
}

int ha_memwatch_period_ms(void)
{
	return watch.rss_step > 0 || (watch.limit && !watch.oom_done) ? POLL_MS : -1;
}

HA_TESTABLE void oom_check(uint64_t as, uint64_t rss)
{
	uint64_t use = watch.kind == HA_LIM_AS ? as : rss;
	const char *what = watch.kind == HA_LIM_AS ? "address space" : "RSS";
	if (watch.kind != HA_LIM_AS && watch.usage_path[0] &&
	    read_u64_file(watch.usage_path, &use) == 0)
		what = "cgroup usage";
	if (use < watch.threshold)
		return;
	watch.oom_done = 1;
	char reason[160];
	ha_snprintf(reason, sizeof reason, "%s %llu MB, %llu%% of %s %llu MB", what,
		    (unsigned long long)(use >> 20),
		    (unsigned long long)((unsigned __int128)use * 100 / watch.limit),
		    watch.kind == HA_LIM_AS ? "RLIMIT_AS" : "the cgroup limit",
		    (unsigned long long)(watch.limit >> 20));
	ha_prof_dump_reserved(reason, watch.reserve, RESERVE_BYTES);
	if (watch.reserve) {
		ha_sys_munmap(watch.reserve, RESERVE_BYTES);   /* once: give it back */
		watch.reserve = NULL;
	}
}

void ha_memwatch_poll(void)
{
	uint64_t as, rss;
	if (!ha_prof_running() || ha_proc_statm(&as, &rss) != 0)
		return;
	if (watch.limit && !watch.oom_done)
		oom_check(as, rss);
	if (watch.rss_step > 0 && rss > watch.rss_base + (uint64_t)watch.rss_step) {
		char reason[96];
		ha_snprintf(reason, sizeof reason, "RSS %llu MB, grew %llu MB",
			    (unsigned long long)(rss >> 20),
			    (unsigned long long)((rss - watch.rss_base) >> 20));
		watch.rss_base = rss;
		ha_prof_dump(reason, 1);
	}
}
