/* tests/integration/prof_async.c — who writes a threshold dump (docs/heap-profile-spec.md §6).  Three runs,
 * each a fresh process (the options are read at start):
 *   queued: default mode.  stderr is a full pipe, so whoever writes the
 *     dump's "Dumping heap profile" line blocks until the pipe is read, and
 *     this thread reads it only once its crossing malloc has returned.  The
 *     malloc returns, the dump is queued, and once the pipe is read the
 *     helper thread's line and PREFIX.0001.heap appear.  Were the dump
 *     written inside malloc, the alarm fires (a failure, not a hang).
 *   held: default mode.  Another thread's HeapProfilerDump is blocked in its
 *     line (the pipe again) while holding the profiler's dump lock; the
 *     crossing malloc still returns at once (a crossing never waits for a
 *     dump being written), and its dump comes after that one: 0001 held,
 *     0002 the crossing's.
 *   compat: HEAP_PROFILE_EXACT_TOTALS=1.  The crossing thread writes the
 *     dump itself, as gperftools does: PREFIX.0001.heap exists when the
 *     crossing malloc returns.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "heapalloc.h"
#include "tests/lib/check.h"
#include "tests/lib/prof_util.h"

#define BIG ((size_t)2 << 20)     /* crosses the 1 MiB allocation interval */

static int saved_err = -1;        /* the real stderr while fd 2 is the pipe */
static int pipe_rd = -1;
static size_t filled;             /* bytes of filler before the dumps' lines */
static char text[16384];          /* what the dumps wrote to the pipe */
static size_t got;
void *volatile sink;

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "FAIL: the crossing malloc did not return: it is writing "
				"or waiting for a dump\n";
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

/* Make fd 2 a full pipe whose writers block. */
static void stderr_full(void)
{
	int fds[2];
	REQUIRE(pipe(fds) == 0);
	saved_err = dup(2);
	REQUIRE(saved_err >= 0);
	REQUIRE(fcntl(fds[1], F_SETFL, O_NONBLOCK) == 0);
	static char fill[4096];
	memset(fill, '.', sizeof fill);
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
	close(fds[1]);
	pipe_rd = fds[0];
	REQUIRE(fcntl(pipe_rd, F_SETFL, O_NONBLOCK) == 0);
	signal(SIGALRM, on_alarm);
}

/* Read the pipe (the filler dropped, the rest kept in text) until heap
 * exists and the helper has nothing left to write, at most 10 s; then
 * give stderr back. */
static void drain_until(const char *heap)
{
	heapalloc_stats st;
	for (int i = 0; i < 1000; i++) {
		char buf[4096];
		ssize_t r;
		while ((r = read(pipe_rd, buf, sizeof buf)) > 0) {
			size_t k = filled < (size_t)r ? filled : (size_t)r;
			filled -= k;
			size_t n = (size_t)r - k;
			if (n > sizeof text - 1 - got)
				n = sizeof text - 1 - got;
			memcpy(text + got, buf + k, n);
			got += n;
		}
		heapalloc_get_stats(&st);
		if (exists(heap) && st.prof_dumps_queued == 0 && !filled)
			break;
		msleep(10);
	}
	text[got] = 0;
	REQUIRE(dup2(saved_err, 2) == 2);
	CHECK(exists(heap));
	CHECK_EQ(st.prof_dumps_queued, 0);
}

static void want_line(const char *pfx, const char *rest)
{
	char want[4400];
	snprintf(want, sizeof want, "Dumping heap profile to %s.%s", pfx, rest);
	if (!strstr(text, want)) {
		fprintf(stderr, "FAIL: want a line starting \"%s\" in:\n%s\n", want, text);
		CHECK(!"a dump line");
	}
}

static void cross(void)
{
	alarm(10);
	sink = malloc(BIG);
	alarm(0);
	REQUIRE(sink);
}

static void queued(const char *pfx)
{
	char heap[4200];
	snprintf(heap, sizeof heap, "%s.0001.heap", pfx);
	stderr_full();
	cross();
	/* the dump is queued, or blocked in its first line: not on disk yet */
	CHECK(!exists(heap));
	heapalloc_stats st;
	heapalloc_get_stats(&st);
	CHECK_EQ(st.prof_dumps_queued, 1);
	drain_until(heap);
	want_line(pfx, "0001.heap (2 MB allocated cumulatively, ");
}

static volatile pid_t dumper;

static void *api_dump(void *arg)
{
	(void)arg;
	dumper = (pid_t)syscall(SYS_gettid);
	CHECK_EQ(heapalloc_profile_dump("held"), 0);
	return NULL;
}

/* 1 once thread tid sits in write(2, ...) (/proc/self/task/TID/syscall:
 * the number of the system call it is blocked in, then its arguments). */
static int in_stderr_write(pid_t tid)
{
	char path[64], buf[256], want[32];
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	snprintf(want, sizeof want, "%d 0x2 ", (int)SYS_write);
	return strncmp(buf, want, strlen(want)) == 0;
}

static void held(const char *pfx)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)syscall(SYS_gettid));
	if (access(path, R_OK) != 0)
		SKIP("no /proc/self/task/TID/syscall");
	/* there it shows qemu-user's own (x86-64) system calls: the blocked
	 * dumper is never seen, and the exit would wait on its lock */
	if (ck_emulated()) {
		fprintf(stderr, "held case not run: %s: /proc/self/task/TID/syscall is the "
			"emulator's\n", ck_emulated());
		return;
	}
	char heap[4200];
	snprintf(heap, sizeof heap, "%s.0002.heap", pfx);
	stderr_full();
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, api_dump, NULL) == 0);
	int blocked = 0;
	for (int i = 0; i < 1000 && !blocked; i++) {
		blocked = dumper && in_stderr_write(dumper);
		if (!blocked)
			msleep(10);
	}
	REQUIRE(blocked);
	cross();
	heapalloc_stats st;
	heapalloc_get_stats(&st);
	CHECK_EQ(st.prof_dumps_queued, 1);
	drain_until(heap);
	pthread_join(t, NULL);
	want_line(pfx, "0001.heap (held)\n");
	want_line(pfx, "0002.heap (2 MB allocated cumulatively, ");
}

static void compat(const char *pfx)
{
	char heap[4200];
	snprintf(heap, sizeof heap, "%s.0001.heap", pfx);
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
		const char *run = getenv("PROF_ASYNC_RUN");
		REQUIRE(pfx && run && heapalloc_profile_running());
		if (!strcmp(run, "queued"))
			queued(pfx);
		else if (!strcmp(run, "held"))
			held(pfx);
		else
			compat(pfx);
		return CHECK_DONE();
	}
	if (getenv("HEAPPROFILE"))
		SKIP("HEAPPROFILE is set");
	char dir[] = "/tmp/prof_async.XXXXXX";
	REQUIRE(mkdtemp(dir));
	static const char *const runs[] = { "queued", "held", "compat" };
	for (int i = 0; i < 3; i++) {
		char pfx[64];
		snprintf(pfx, sizeof pfx, "%s/%s", dir, runs[i]);
		const char *env[] = { "HEAPPROFILE", pfx, "PROF_ASYNC_RUN", runs[i],
				      "HEAP_PROFILE_ALLOCATION_INTERVAL", "1M",
				      "HEAP_PROFILE_INUSE_INTERVAL", "0",
				      "HEAP_PROFILE_EXACT_TOTALS", i == 2 ? "1" : "0", NULL };
		CHECK(rerun_self(argv[0], dir, "524288", env));
	}
	CHECK(remove_dir(dir));
	return CHECK_DONE();
}
