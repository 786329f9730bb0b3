/* tests/unit/prof_alone.c — the profiler linked alone: libha_prof over
 * tests/unit/alloc_none.c (an allocator that keeps no books), as one shared
 * library linked with --no-undefined, so a call into the allocator that
 * alloc/hooks.h does not declare fails the build.  Here the profiler starts
 * a session, writes a dump of an empty heap in both formats and stops:
 * the text dump has the gperftools header with zero totals and the memory
 * map, the pprof one is gzip. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heapalloc.h"
#include "tests/lib/check.h"

static size_t slurp(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, cap - 1, f);
	fclose(f);
	buf[n] = 0;
	return n;
}

int main(int argc, char **argv)
{
	/* the options are read as the library loads: set them, run again */
	if (!getenv("HEAP_PROFILE_FORMAT")) {
		setenv("HEAP_PROFILE_FORMAT", "both", 1);
		setenv("HEAP_PROFILE_SAMPLE_INTERVAL", "0", 1);
		execv("/proc/self/exe", argv);
		HARD_ERROR("cannot run /proc/self/exe again");
	}
	char dir[] = "/tmp/ha_prof_alone.XXXXXX", prefix[64], path[96];
	static char buf[1 << 20];
	REQUIRE(mkdtemp(dir));
	snprintf(prefix, sizeof prefix, "%s/p", dir);
	HeapProfilerStart(prefix);
	CHECK_EQ(IsHeapProfilerRunning(), 1);
	HeapProfilerDump("unit");
	HeapProfilerStop();
	CHECK_EQ(IsHeapProfilerRunning(), 0);

	snprintf(path, sizeof path, "%s.0001.heap", prefix);
	size_t n = slurp(path, buf, sizeof buf);
	CHECK(n > 0);
	long long c[4] = { -1, -1, -1, -1 };
	CHECK_EQ(sscanf(buf, "heap profile: %lld: %lld [ %lld: %lld] @ heap_v2/", &c[0], &c[1],
			&c[2], &c[3]), 4);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(c[i], 0);
	CHECK(strstr(buf, "\nMAPPED_LIBRARIES:\n") != NULL);
	unlink(path);
	snprintf(path, sizeof path, "%s.0001.pb.gz", prefix);
	n = slurp(path, buf, sizeof buf);
	CHECK(n > 2 && (unsigned char)buf[0] == 0x1f && (unsigned char)buf[1] == 0x8b);
	unlink(path);
	snprintf(path, sizeof path, "%s.0001.stats", prefix);
	unlink(path);
	snprintf(path, sizeof path, "%s.log", prefix);
	unlink(path);
	if (rmdir(dir) != 0)
		fprintf(stderr, "left files in %s\n", dir);
	return CHECK_DONE();
}
