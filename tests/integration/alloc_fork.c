/* alloc_fork — fork() from a process whose two other threads are allocating and
 * freeing as fast as they can, 200 times.  Each child mallocs, reallocs and
 * frees across all sizes, starts a thread that does the same, and exits 0;
 * the program's pthread_atfork handlers allocate and free as well; every
 * fourth fork is made from a second thread; one busy thread keeps calling
 * malloc_trim and mallinfo2 and makes huge blocks; the child also calls
 * malloc_trim and mallinfo2.
 * A child that deadlocks on a lock held at fork time is killed by its own
 * alarm (SIGALRM) and reported; the whole test has a 300 s alarm too. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

enum { BUSY = 2, FORKS = 200 };
static atomic_int stop;

static void *busy(void *arg)
{
	uint64_t r = 88172645463325252ull + (uintptr_t)arg;
	void *keep[256] = { 0 };
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		r ^= r << 13; r ^= r >> 7; r ^= r << 17;
		unsigned i = r % 256;
		free(keep[i]);
		size_t n = (r >> 8) % 64 == 0 ? 40000 + (r >> 20) % 200000 : 1 + (r >> 20) % 2048;
		if ((r >> 8) % 512 == 1)
			n = ((size_t)1 << 20) + (r >> 30) % (2 << 20); /* huge blocks too */
		keep[i] = (r >> 40) % 8 == 0 ? memalign(64, n) : malloc(n);
		if (keep[i])
			((char *)keep[i])[n - 1] = 1;
		if ((uintptr_t)arg == 1 && (r >> 50) % 256 == 0) {
			/* whole-heap calls take every lock there is */
			malloc_trim(0);
			struct mallinfo2 m = mallinfo2();
			(void)m;
		}
	}
	for (int i = 0; i < 256; i++)
		free(keep[i]);
	return NULL;
}

/* Child work; returns the number of problems found. */
static int churn(unsigned salt)
{
	int bad = 0;
	void *v[300];
	size_t n[300];
	for (int i = 0; i < 300; i++) {
		n[i] = i % 30 == 0 ? 33000 + (size_t)i * 10 : 1 + (size_t)(i * 37 + salt) % 3000;
		v[i] = i % 3 ? malloc(n[i]) : calloc(1, n[i]);
		if (!v[i])
			return 1;
		pat_fill(v[i], n[i], salt + i);
	}
	for (int i = 0; i < 300; i += 2) {
		bad += pat_check(v[i], n[i], salt + i) != (size_t)-1;
		void *q = realloc(v[i], n[i] * 2 + 1);
		if (!q)
			return bad + 1;
		bad += pat_check(q, n[i], salt + i) != (size_t)-1;
		v[i] = q;
	}
	for (int i = 0; i < 300; i++)
		free(v[i]);
	return bad;
}

/* The program's own pthread_atfork handlers allocate too (glibc allows
 * it): the block the prepare handler makes is freed on both sides. */
static void *atfork_block;
static int atfork_child_ran;
static void at_prepare(void)
{
	atfork_block = malloc(3000);
	if (atfork_block)
		memset(atfork_block, 1, 3000);
}
static void at_parent(void)
{
	free(malloc(100));
	free(atfork_block);
}
static void at_child(void)
{
	void *p = malloc(50000);
	if (p)
		memset(p, 2, 50000);
	free(p);
	free(atfork_block);
	atfork_child_ran = 1;
}

static void *child_thread(void *arg __attribute__((unused)))
{
	return (void *)(intptr_t)churn(7);
}

static int child(unsigned k)
{
	alarm(10); /* a deadlocked child dies of SIGALRM */
	int bad = churn(k);
	pthread_t t;
	void *res;
	if (pthread_create(&t, NULL, child_thread, NULL))
		return 3;
	pthread_join(t, &res);
	bad += (int)(intptr_t)res;
	char *s = strdup("child");
	bad += !s;
	free(s);
	/* whole-heap calls work in the child too */
	int rc = malloc_trim(0);
	bad += rc != 0 && rc != 1;
	struct mallinfo2 m = mallinfo2();
	bad += m.arena + m.hblkhd == 0;
	if (!atfork_child_ran)
		return 4;
	return bad ? 2 : 0;
}

/* Every fourth fork is made by a short-lived second thread. */
struct fork_req {
	unsigned k;
	pid_t pid;
};
static void *fork_from_thread(void *arg)
{
	struct fork_req *f = arg;
	void *p = malloc(5000); /* this thread has a cache of its own */
	fflush(NULL);
	f->pid = fork();
	if (f->pid == 0)
		exit(child(f->k));
	free(p);
	return NULL;
}

int main(void)
{
	EMU_SKIP("qemu-user 7.2 aborts in a fork of a threaded process (cpu_exec: assertion cpu == current_cpu)");
	pthread_t t[BUSY];
	alarm(300);   /* a hang detector: 200 forks of a big, busy process take 20-90 s on 2 loaded cores */
	pthread_atfork(at_prepare, at_parent, at_child);
	for (long i = 0; i < BUSY; i++)
		if (pthread_create(&t[i], NULL, busy, (void *)i))
			HARD_ERROR("pthread_create");
	int deadlocks = 0, failures = 0;
	for (unsigned k = 0; k < FORKS; k++) {
		void *pre = malloc(100 + k); /* parent allocates around every fork too */
		pid_t pid;
		if (k % 4 == 3) {
			struct fork_req f = { k, -1 };
			pthread_t ft;
			if (pthread_create(&ft, NULL, fork_from_thread, &f))
				HARD_ERROR("pthread_create");
			pthread_join(ft, NULL);
			pid = f.pid;
		} else {
			fflush(NULL);
			pid = fork();
			if (pid == 0)
				exit(child(k));
		}
		if (pid < 0)
			HARD_ERROR("fork");
		int st;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (WIFSIGNALED(st)) {
			fprintf(stderr, "fork %u: child killed by signal %d%s\n", k, WTERMSIG(st),
				WTERMSIG(st) == SIGALRM ? " (deadlocked: hung for 10 s)" : "");
			deadlocks += WTERMSIG(st) == SIGALRM;
			failures++;
		} else if (WEXITSTATUS(st) != 0) {
			fprintf(stderr, "fork %u: child exited %d\n", k, WEXITSTATUS(st));
			failures++;
		}
		free(pre);
		if (failures > 3)
			break; /* enough evidence; do not wait 10 s per hang */
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < BUSY; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(deadlocks, 0);
	CHECK_EQ(failures, 0);
	return CHECK_DONE();
}
