/* tests/prof_async.c — who writes a threshold dump (spec §6).
 *   default mode: the allocation that crosses HEAP_PROFILE_ALLOCATION_INTERVAL
 *     returns while its dump cannot be written at all: stderr is a full pipe,
 *     so whoever writes the dump's "Dumping heap profile" line blocks until
 *     the pipe is read, and the crossing thread reads it only once its
 *     malloc has returned.  Then the helper thread's line and p.0001.heap
 *     appear.  Were the dump written inside malloc, the alarm fires (fail).
 *   compatibility mode (HEAP_PROFILE_EXACT_TOTALS=1): the crossing thread
 *     writes the dump itself, as gperftools does: p.0001.heap exists when
 *     the crossing malloc returns.
 * Each runs in a fresh process (the options are read at start).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "heapalloc.h"
#include "tests/check.h"
#include "tests/prof_util.h"

#define BIG ((size_t)2 << 20)     /* crosses the 1 MiB allocation interval */

static int saved_err = -1;        /* the real stderr while fd 2 is the pipe */
void *volatile sink;

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "FAIL: the crossing malloc did not return: it is writing "
				"the dump itself\n";
	if (write(saved_err, m, sizeof m - 1) < 0) {
		/* nothing more to say */
	}
	_exit(1);
}

static int exists(const char *path)
{
	return access(path, F_OK) == 0;
}

static void msleep(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&t, NULL);
}

/* Default mode: see the top of the file. */
static void queued_dump(const char *heap, const char *pfx)
{
	int fds[2];
	REQUIRE(pipe(fds) == 0);
	saved_err = dup(2);
	REQUIRE(saved_err >= 0);
	/* fill the pipe, then make it blocking again for the dump's writer */
	REQUIRE(fcntl(fds[1], F_SETFL, O_NONBLOCK) == 0);
	static char fill[4096];
	memset(fill, '.', sizeof fill);
	size_t filled = 0;
	for (;;) {
		ssize_t w = write(fds[1], fill, sizeof fill);
		if (w < 0 && errno == EAGAIN)
			w = write(fds[1], fill, 1);
		if (w < 0)
			break;
		filled += (size_t)w;
	}
	REQUIRE(errno == EAGAIN);
	REQUIRE(fcntl(fds[1], F_SETFL, 0) == 0);
	REQUIRE(dup2(fds[1], 2) == 2);

	signal(SIGALRM, on_alarm);
	alarm(10);
	sink = malloc(BIG);               /* crosses the interval */
	alarm(0);
	REQUIRE(sink);

	/* the dump is queued or blocked in its first line: not on disk yet */
	CHECK(!exists(heap));
	heapalloc_stats st;
	heapalloc_get_stats(&st);
	CHECK_EQ(st.prof_dumps_queued, 1);

	/* read the pipe until the helper has written the dump (at most 10 s) */
	REQUIRE(fcntl(fds[0], F_SETFL, O_NONBLOCK) == 0);
	static char text[16384];
	size_t got = 0, skip = filled;
	for (int i = 0; i < 1000; i++) {
		char buf[4096];
		ssize_t r;
		while ((r = read(fds[0], buf, sizeof buf)) > 0) {
			size_t k = skip < (size_t)r ? skip : (size_t)r;
			skip -= k;
			size_t n = (size_t)r - k;
			if (n > sizeof text - 1 - got)
				n = sizeof text - 1 - got;
			memcpy(text + got, buf + k, n);
			got += n;
		}
		heapalloc_get_stats(&st);
		if (exists(heap) && st.prof_dumps_queued == 0)
			break;
		msleep(10);
	}
	ssize_t r;
	char buf[4096];
	while ((r = read(fds[0], buf, sizeof buf)) > 0 && got + (size_t)r < sizeof text) {
		memcpy(text + got, buf, (size_t)r);
		got += (size_t)r;
	}
	text[got] = 0;
	REQUIRE(dup2(saved_err, 2) == 2);
	CHECK(exists(heap));
	CHECK_EQ(st.prof_dumps_queued, 0);
	char want[4400];
	snprintf(want, sizeof want,
		 "Dumping heap profile to %s.0001.heap (2 MB allocated cumulatively, ", pfx);
	if (!strstr(text, want)) {
		fprintf(stderr, "FAIL: want a line starting \"%s\" in:\n%s\n", want, text);
		CHECK(!"the helper's dump line");
	}
}

/* Compatibility mode: the file is there when malloc returns. */
static void sync_dump(const char *heap)
{
	sink = malloc(BIG);
	REQUIRE(sink);
	CHECK(exists(heap));
	heapalloc_stats st;
	heapalloc_get_stats(&st);
	CHECK_EQ(st.prof_dumps_queued, 0);
}

int main(int argc, char **argv)
{
	if (argc == 3) {              /* one run, under HEAPPROFILE */
		const char *pfx = getenv("HEAPPROFILE");
		const char *compat = getenv("HEAP_PROFILE_EXACT_TOTALS");
		REQUIRE(pfx && compat && heapalloc_profile_running());
		char heap[4200];
		snprintf(heap, sizeof heap, "%s.0001.heap", pfx);
		if (compat[0] == '1')
			sync_dump(heap);
		else
			queued_dump(heap, pfx);
		return CHECK_DONE();
	}
	if (getenv("HEAPPROFILE"))
		SKIP("HEAPPROFILE is set");
	char dir[] = "/tmp/prof_async.XXXXXX";
	REQUIRE(mkdtemp(dir));
	char pd[64], pc[64];
	snprintf(pd, sizeof pd, "%s/d", dir);
	snprintf(pc, sizeof pc, "%s/c", dir);
	const char *def[] = { "HEAPPROFILE", pd, "HEAP_PROFILE_ALLOCATION_INTERVAL", "1M",
			      "HEAP_PROFILE_INUSE_INTERVAL", "0",
			      "HEAP_PROFILE_EXACT_TOTALS", "0", NULL };
	CHECK(rerun_self(argv[0], dir, "524288", def));
	const char *cmp[] = { "HEAPPROFILE", pc, "HEAP_PROFILE_ALLOCATION_INTERVAL", "1M",
			      "HEAP_PROFILE_INUSE_INTERVAL", "0",
			      "HEAP_PROFILE_EXACT_TOTALS", "1", NULL };
	CHECK(rerun_self(argv[0], dir, "524288", cmp));
	CHECK(remove_dir(dir));
	return CHECK_DONE();
}
