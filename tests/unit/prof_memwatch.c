/* tests/unit/prof_memwatch.c — unit tier for prof/session/memwatch.c: which limit the
 * pre-OOM dump watches, read from a cgroup tree made here (v2 with
 * ancestors, v1 with a controller list, a hybrid host, "max" and v1's
 * "unlimited"), and the reason lines of the pre-OOM dump, written once.
 * memwatch.c's test build is linked in (its statics: prof/unit.h), with
 * stand-ins for the profiler, so no real cgroup and no allocator is used.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "prof/unit.h"
#include "tests/lib/check.h"

ha_prof_options ha_prof_opt;
HA_TLS unsigned ha_locks_held;

static char reasons[4][160];
static int ndumps;
int ha_prof_running(void) { return 1; }
int ha_prof_dump(const char *reason, int automatic)
{
	(void)automatic;
	if (ndumps < 4)
		snprintf(reasons[ndumps], sizeof reasons[0], "%s", reason);
	ndumps++;
	return 0;
}
int ha_prof_dump_reserved(const char *reason, void *reserve, size_t cap)
{
	(void)reserve;
	(void)cap;
	return ha_prof_dump(reason, 1);
}

static char top[256];

static void put(const char *rel, const char *text)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", top, rel);
	for (char *s = p + strlen(top) + 1; *s; s++)   /* mkdir -p of the dirname */
		if (*s == '/') {
			*s = 0;
			mkdir(p, 0755);
			*s = '/';
		}
	FILE *f = fopen(p, "w");
	REQUIRE(f);
	fputs(text, f);
	fclose(f);
}

/* Fresh limits from the tree as it is now. */
static void discover(void)
{
	memset(&watch, 0, sizeof watch);
	find_cgroup_limits();
}

static const char *usage_rel(void)
{
	size_t n = strlen(top);
	return strncmp(watch.usage_path, top, n) == 0 ? watch.usage_path + n : watch.usage_path;
}

int main(void)
{
	snprintf(top, sizeof top, "%s/prof_memwatch.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	REQUIRE(mkdtemp(top));
	static char self[300], root[300];
	snprintf(self, sizeof self, "%s/self_cgroup", top);
	snprintf(root, sizeof root, "%s/cg", top);
	cg_self = self;
	cg_root = root;

	/* v2: an ancestor's memory.max binds when it is the smallest */
	put("self_cgroup", "0::/a/b\n");
	put("cg/a/memory.max", "1073741824\n");
	put("cg/a/memory.current", "500\n");
	put("cg/a/b/memory.max", "max\n");
	put("cg/a/b/memory.current", "400\n");
	discover();
	CHECK_EQ(watch.kind, HA_LIM_CG2);
	CHECK_EQ(watch.limit, 1073741824);
	CHECK(!strcmp(usage_rel(), "/cg/a/memory.current"));

	/* v2: the own group's, smaller, and its usage */
	put("cg/a/b/memory.max", "536870912\n");
	discover();
	CHECK_EQ(watch.limit, 536870912);
	CHECK(!strcmp(usage_rel(), "/cg/a/b/memory.current"));

	/* v2: no usage file -> RSS */
	put("self_cgroup", "0::/c\n");
	put("cg/c/memory.max", "1000000\n");
	discover();
	CHECK_EQ(watch.limit, 1000000);
	CHECK_EQ(watch.usage_path[0], 0);

	/* v2 at the root: nothing ("max" everywhere or no file) */
	put("self_cgroup", "0::/\n");
	discover();
	CHECK_EQ(watch.kind, HA_LIM_NONE);

	/* v1: memory in a list of controllers; "unlimited" is none */
	put("self_cgroup", "7:pids:/\n5:cpuacct,memory:/x/y\n0::/\n");
	put("cg/memory/x/y/memory.limit_in_bytes", "268435456\n");
	put("cg/memory/x/y/memory.usage_in_bytes", "1234\n");
	discover();
	CHECK_EQ(watch.kind, HA_LIM_CG1);
	CHECK_EQ(watch.limit, 268435456);
	CHECK(!strcmp(usage_rel(), "/cg/memory/x/y/memory.usage_in_bytes"));
	put("cg/memory/x/y/memory.limit_in_bytes", "9223372036854771712\n");
	discover();
	CHECK_EQ(watch.kind, HA_LIM_NONE);

	/* hybrid host: v2 under cg/unified, smaller than the v1 limit */
	put("cg/memory/x/y/memory.limit_in_bytes", "268435456\n");
	put("self_cgroup", "5:memory:/x/y\n0::/u\n");
	put("cg/unified/u/memory.max", "134217728\n");
	put("cg/unified/u/memory.current", "7\n");
	discover();
	CHECK_EQ(watch.kind, HA_LIM_CG2);
	CHECK_EQ(watch.limit, 134217728);
	CHECK(!strcmp(usage_rel(), "/cg/unified/u/memory.current"));

	/* the pre-OOM reason lines, and only one dump */
	put("cg/unified/u/memory.current", "115000000\n");   /* 85% */
	watch.threshold = watch.limit / 10 * 9;
	oom_check(0, 0);
	CHECK_EQ(ndumps, 0);
	put("cg/unified/u/memory.current", "122000000\n");   /* 90.9% */
	oom_check(0, 0);
	CHECK_EQ(ndumps, 1);
	CHECK(!strcmp(reasons[0], "cgroup usage 116 MB, 90% of the cgroup limit 128 MB"));
	CHECK_EQ(ha_memwatch_period_ms(), -1);    /* nothing left to watch */
	watch.usage_path[0] = 0;                       /* unreadable usage: RSS */
	watch.oom_done = 0;
	oom_check(0, 130000000);
	CHECK(!strcmp(reasons[1], "RSS 123 MB, 96% of the cgroup limit 128 MB"));
	watch.kind = HA_LIM_AS;
	watch.oom_done = 0;
	oom_check(125000000, 0);
	CHECK(!strcmp(reasons[2], "address space 119 MB, 93% of RLIMIT_AS 128 MB"));
	CHECK_EQ(ndumps, 3);
	for (int i = 0; i < 3; i++)
		if (ck_failures)
			fprintf(stderr, "reason %d: %s\n", i, reasons[i]);

	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", top);
	return CHECK_DONE();
}
