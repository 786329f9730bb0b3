/* tests/integration/prof_api.c — the profiler API without HEAPPROFILE: gperftools'
 * HeapProfilerStart/Dump/Stop, IsHeapProfilerRunning, GetHeapProfile;
 * heapalloc_profile_*, heapalloc_get_stats (its in-use high too),
 * heapalloc_version; dump numbering carries on across Stop/Start; nothing
 * is written at exit once stopped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "heapalloc.h"
#include "tests/lib/check.h"

void *volatile api_keep[4000];

__attribute__((noinline)) static void api_site(int n)
{
	for (int i = 0; i < n; i++)
		api_keep[i] = malloc(100000);
}

static int exists(const char *dir, const char *name)
{
	char p[512];
	struct stat st;
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return stat(p, &st) == 0;
}

int main(void)
{
	if (getenv("HEAPPROFILE"))
		SKIP("HEAPPROFILE is set");
	char dir[] = "/tmp/prof_api.XXXXXX";
	REQUIRE(mkdtemp(dir));
	char prefix[300];
	snprintf(prefix, sizeof prefix, "%s/api", dir);

	CHECK(heapalloc_version() && strcmp(heapalloc_version(), "") != 0);
	CHECK_EQ(IsHeapProfilerRunning(), 0);
	CHECK_EQ(heapalloc_profile_running(), 0);
	CHECK_EQ(heapalloc_profile_dump("not running"), EINVAL);
	char *s = GetHeapProfile();
	REQUIRE(s);
	CHECK_EQ(strlen(s), 0);
	free(s);

	HeapProfilerStart(prefix);
	CHECK_EQ(IsHeapProfilerRunning(), 1);
	CHECK_EQ(heapalloc_profile_start(prefix), EBUSY);
	api_site(900);                      /* 90 MB: below the in-use interval */
	HeapProfilerDump("first");
	CHECK(exists(dir, "api.0001.heap"));

	heapalloc_stats before;
	heapalloc_get_stats(&before);
	s = GetHeapProfile();
	REQUIRE(s);
	CHECK(strncmp(s, "heap profile: ", 14) == 0);
	/* calibrated: the estimates are scaled to the books' totals already */
	CHECK(strstr(s, "@ heapprofile\n") != NULL);
	unsigned long long io = 0, ib = 0, ao = 0, ab = 0;
	CHECK_EQ(sscanf(s, "heap profile: %llu: %llu [%llu: %llu]", &io, &ib, &ao, &ab), 4);
	CHECK_EQ(ab, before.prof_alloc_bytes);
	CHECK_EQ(ib, before.prof_alloc_bytes - before.prof_free_bytes);
	CHECK(strstr(s, "\nMAPPED_LIBRARIES:\n") != NULL);
	free(s);

	heapalloc_stats st;
	heapalloc_get_stats(&st);
	CHECK_GE(st.prof_alloc_bytes, 90000000);
	/* 900 blocks of 100 KB at the default 2 MiB: p = 1 - e^(-100000/2097152),
	 * 42 samples expected (sd 6.3); 20 is more than 3 sd below */
	CHECK_GE(st.prof_samples, 20);
	CHECK_GE(st.prof_buckets, 1);
	CHECK_GE(st.prof_memory, 1);
	CHECK_EQ(st.prof_dumps, 1);
	CHECK_GE(st.thread_caches, 1);
	CHECK_GE(st.prof_peak_inuse, 90000000);
	CHECK_GE(st.prof_peak_inuse, st.prof_alloc_bytes - st.prof_free_bytes);
	uint64_t peak = st.prof_peak_inuse;
	/* a program built against the first, shorter struct calls the function,
	 * not the macro: nothing past prof_dumps may be written */
	heapalloc_stats old;
	memset(&old, 0xa5, sizeof old);
	(heapalloc_get_stats)(&old);
	CHECK_EQ(old.prof_dumps, 1);
	CHECK_EQ(old.prof_peak_inuse, 0xa5a5a5a5a5a5a5a5ull);
	memset(&old, 0xa5, sizeof old);
	heapalloc_get_stats_size(&old, sizeof(uint64_t));
	CHECK_EQ(old.small_spans, 0xa5a5a5a5a5a5a5a5ull);

	for (int i = 0; i < 900; i++)
		free(api_keep[i]);
	heapalloc_get_stats(&st);
	CHECK_GE(st.prof_free_bytes, 90000000);
	CHECK_EQ(st.prof_peak_inuse, peak);         /* the high stays when the heap shrinks */
	CHECK(st.prof_alloc_bytes - st.prof_free_bytes < 90000000);

	HeapProfilerStop();
	CHECK_EQ(IsHeapProfilerRunning(), 0);
	HeapProfilerStop();                 /* twice is fine */

	CHECK_EQ(heapalloc_profile_start(prefix), 0);
	CHECK_EQ(heapalloc_profile_running(), 1);
	api_site(10);
	heapalloc_get_stats(&st);
	CHECK_GE(st.prof_peak_inuse, 1000000);      /* a new session, a new high */
	CHECK_LE(st.prof_peak_inuse, 20000000);
	CHECK_EQ(heapalloc_profile_dump("second"), 0);
	CHECK(exists(dir, "api.0002.heap"));   /* the count carries on */
	heapalloc_profile_stop();
	CHECK_EQ(heapalloc_profile_running(), 0);

	CHECK(!exists(dir, "api.0003.heap"));
	char cmd[400];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return CHECK_DONE();
}
