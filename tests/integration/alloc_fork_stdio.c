/* alloc_fork_stdio — fork() beside threads inside stdio must never hang.
 *
 * glibc's fork() runs the pthread_atfork prepare handlers, then takes its
 * stdio list lock (_IO_list_lock).  fflush(NULL) holds that lock while it
 * waits for each stream's lock, and a thread holding a stream's lock may be
 * allocating the stream's buffer.  So an allocator whose prepare handler
 * takes its locks before libc takes the list lock can close a cycle:
 * forker (allocator locks) -> fflush thread (list lock) -> stream thread
 * (stream lock, waiting for an allocator lock).
 *
 * Here READ threads rewind a stream of their own and getline its one long
 * line into a fresh buffer (which grows by realloc under the stream's
 * lock); a WRITE thread opens, writes, rewinds, reads back and closes files;
 * a FLUSH thread calls fflush(NULL) without pause; ALLOC threads churn
 * blocks.  FORKERS threads fork until ITER (argv[1], default 300) forks
 * are done, while the main thread runs posix_spawn and popen beside them.
 * Each child allocates, writes a file of its own and exits 0; a child
 * stuck on a lock dies of its own alarm and is reported.  A hang in the
 * parent (a minute with no fork started) trips the watchdog, which says how
 * many forks were done.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/lib/check.h"

enum { READ = 4, ALLOC = 2, FORKERS = 2, LINE = 40000, WATCHDOG_S = 60 };
extern char **environ;
static atomic_int stop;
static atomic_int forks_done;
static char dir[] = "/tmp/ha_fork_stdio.XXXXXX";

/* Every WATCHDOG_S seconds: a hang is no fork started in that time (a
 * loaded machine slows the forks; it does not stop them). */
static void watchdog(int sig)
{
	(void)sig;
	static int seen = -1;
	char msg[96];
	int r = atomic_load(&forks_done), n = 0;
	if (r != seen) {
		seen = r;
		alarm(WATCHDOG_S);
		return;
	}
	const char *head = "alloc_fork_stdio: FAIL: hang after forks: ";
	while (head[n]) {
		msg[n] = head[n];
		n++;
	}
	char digits[12];
	int d = 0;
	do {
		digits[d++] = (char)('0' + r % 10);
		r /= 10;
	} while (r);
	while (d)
		msg[n++] = digits[--d];
	msg[n++] = '\n';
	if (write(2, msg, (size_t)n) < 0) { /* nothing more to do */ }
	_exit(1);
}

/* Rewind and read the one long line into a fresh buffer, again and again. */
static void *read_loop(void *arg)
{
	char path[64];
	snprintf(path, sizeof path, "%s/long%u", dir, (unsigned)(uintptr_t)arg);
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "fopen %s: %s\n", path, strerror(errno));
		ck_failures++;
		return NULL;
	}
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		rewind(f);
		char *line = NULL;
		size_t cap = 0;
		ssize_t got = getline(&line, &cap, f);
		if (got != LINE + 1) {
			fprintf(stderr, "getline %s: %zd bytes, expected %d\n", path, got, LINE + 1);
			ck_failures++;
			free(line);
			break;
		}
		free(line);
		/* glibc's locks are not fair: without a pause, a reader that
		 * takes its stream's lock again at once can starve fflush(NULL)
		 * under any malloc */
		sched_yield();
	}
	fclose(f);
	return NULL;
}

static void *flush_loop(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		if (fflush(NULL) != 0) {
			fprintf(stderr, "fflush(NULL): %s\n", strerror(errno));
			ck_failures++;
			break;
		}
	return NULL;
}

/* Open, write, rewind, read back and close a file, again and again: the
 * stream's buffer is allocated under its lock at the first write. */
static void *write_loop(void *arg)
{
	(void)arg;
	char path[64];
	snprintf(path, sizeof path, "%s/written", dir);
	for (unsigned turn = 0; !atomic_load_explicit(&stop, memory_order_relaxed); turn++) {
		FILE *f = fopen(path, "w+");
		if (!f) {
			fprintf(stderr, "fopen %s: %s\n", path, strerror(errno));
			ck_failures++;
			break;
		}
		for (unsigned i = 0; i < 20; i++)
			fprintf(f, "line %u of turn %u\n", i, turn);
		rewind(f);
		char *line = NULL;
		size_t cap = 0;
		unsigned lines = 0;
		while (getline(&line, &cap, f) > 0)
			lines++;
		free(line);
		fclose(f);
		if (lines != 20) {
			fprintf(stderr, "turn %u read %u lines, wrote 20\n", turn, lines);
			ck_failures++;
			break;
		}
	}
	return NULL;
}

static void *alloc_loop(void *arg)
{
	uint64_t r = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
	void *keep[128] = { 0 };
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		r ^= r << 13; r ^= r >> 7; r ^= r << 17;
		unsigned i = r % 128;
		free(keep[i]);
		/* mostly stdio buffer sizes, so the streams' class runs dry */
		size_t n = (r >> 8) % 4 ? 4096 : 1 + (r >> 16) % 8192;
		keep[i] = malloc(n);
		if (keep[i])
			((char *)keep[i])[n - 1] = 1;
	}
	for (int i = 0; i < 128; i++)
		free(keep[i]);
	return NULL;
}

/* The child: allocate, use stdio, exit 0; a stuck lock trips its alarm. */
static void child(unsigned r)
{
	alarm(10);
	void *v[64];
	for (int i = 0; i < 64; i++) {
		v[i] = malloc(16 + (size_t)(i * 97 + r) % 6000);
		if (!v[i])
			_exit(3);
	}
	for (int i = 0; i < 64; i++)
		free(v[i]);
	char path[64];
	snprintf(path, sizeof path, "%s/child", dir);
	FILE *f = fopen(path, "w");
	if (!f || fprintf(f, "child %u\n", r) < 0 || fclose(f) != 0)
		_exit(4);
	_exit(0);   /* no fflush(NULL): the parent's buffers are not ours to write */
}

static int reap(pid_t pid, unsigned r, const char *how)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			fprintf(stderr, "round %u: waitpid: %s\n", r, strerror(errno));
			return 1;
		}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	fprintf(stderr, "round %u: %s child %s %d\n", r, how,
		WIFSIGNALED(st) ? "killed by signal" : "exited",
		WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	return 1;
}


static unsigned iter;

/* Fork until iter forks are done between all forking threads. */
static void *fork_loop(void *arg)
{
	(void)arg;
	for (;;) {
		int r = atomic_fetch_add(&forks_done, 1);
		if ((unsigned)r >= iter) {
			atomic_fetch_sub(&forks_done, 1);
			return NULL;
		}
		pid_t pid = fork();
		if (pid < 0) {
			fprintf(stderr, "fork: %s\n", strerror(errno));
			ck_failures++;
			return NULL;
		}
		if (pid == 0)
			child((unsigned)r);
		ck_failures += reap(pid, (unsigned)r, "forked");
	}
}

int main(int argc, char **argv)
{
	EMU_SKIP("qemu-user 7.2 hangs or aborts in forks of a threaded process");
	iter = argc > 1 ? (unsigned)atoi(argv[1]) : 300;
	signal(SIGALRM, watchdog);
	alarm(WATCHDOG_S);
	REQUIRE(mkdtemp(dir) != NULL);
	for (unsigned i = 0; i < READ; i++) {
		char path[64];
		snprintf(path, sizeof path, "%s/long%u", dir, i);
		FILE *f = fopen(path, "w");
		REQUIRE(f != NULL);
		for (int k = 0; k < LINE; k++)
			fputc('x', f);
		fputc('\n', f);
		REQUIRE(fclose(f) == 0);
	}
	pthread_t t[READ + 2 + ALLOC + FORKERS];
	unsigned nt = 0;
	for (uintptr_t i = 0; i < READ; i++)
		REQUIRE(pthread_create(&t[nt++], NULL, read_loop, (void *)i) == 0);
	REQUIRE(pthread_create(&t[nt++], NULL, flush_loop, NULL) == 0);
	REQUIRE(pthread_create(&t[nt++], NULL, write_loop, NULL) == 0);
	for (uintptr_t i = 0; i < ALLOC; i++)
		REQUIRE(pthread_create(&t[nt++], NULL, alloc_loop, (void *)i) == 0);
	pthread_t forker[FORKERS];
	for (unsigned i = 0; i < FORKERS; i++)
		REQUIRE(pthread_create(&forker[i], NULL, fork_loop, NULL) == 0);

	/* posix_spawn and popen beside the forks, while they last */
	unsigned spawns = 0, popens = 0;
	while ((unsigned)atomic_load(&forks_done) < iter) {
		pid_t pid;
		char *av[] = { "/bin/sh", "-c", "exit 0", NULL };
		int e = posix_spawn(&pid, "/bin/sh", NULL, NULL, av, environ);
		CHECK_EQ(e, 0);
		if (e == 0)
			ck_failures += reap(pid, spawns, "spawned");
		spawns++;
		FILE *p = popen("echo popen-ok", "r");
		REQUIRE(p != NULL);
		char buf[32] = "";
		CHECK(fgets(buf, sizeof buf, p) != NULL);
		CHECK(strcmp(buf, "popen-ok\n") == 0);
		CHECK_EQ(pclose(p), 0);
		popens++;
	}
	for (unsigned i = 0; i < FORKERS; i++)
		pthread_join(forker[i], NULL);
	atomic_store(&stop, 1);
	for (unsigned i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	alarm(0);
	char cmd[96];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	CHECK_EQ(system(cmd), 0);
	CHECK_EQ((unsigned)atomic_load(&forks_done), iter);
	CHECK_GE(spawns, 1);
	fprintf(stderr, "%u forks, %u posix_spawns, %u popens\n", iter, spawns, popens);
	return CHECK_DONE();
}
