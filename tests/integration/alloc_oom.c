/* alloc_oom — running out of memory is an ordinary failure.  The test
 * re-executes itself with RLIMIT_AS at 320 MiB (set before the allocator
 * starts, so it must live with the limit from its first call); there
 * malloc, calloc, realloc, posix_memalign and aligned_alloc of small, large
 * and huge sizes are called until they fail.  Every failure is NULL (ENOMEM
 * from posix_memalign) with errno ENOMEM — no crash, no abort, no hang; the
 * blocks obtained keep their contents; a thread's first allocation and
 * stdio's first buffer, made at the limit, fail softly; after the blocks are
 * freed the same allocations succeed again. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <signal.h>
#include <pthread.h>
#include <unistd.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

enum { MAXB = 200000 };
static void *v[MAXB];
static size_t vn[MAXB];

/* Allocate blocks of about n bytes with method m until one fails. */
static int exhaust(int m, size_t n, int *count)
{
	int k = 0, bad = 0;
	for (;;) {
		if (k == MAXB)
			break;
		void *p = NULL;
		errno = 0;
		int rc = 0;
		switch (m) {
		case 0: p = malloc(n); break;
		case 1: p = calloc(1, n); break;
		case 2: rc = posix_memalign(&p, 4096, n); if (rc) p = NULL; break;
		case 3: p = aligned_alloc(65536, n); break;
		default: p = realloc(malloc(16), n); break;
		}
		if (!p) {
			if (m == 2 ? rc != ENOMEM : errno != ENOMEM) {
				fprintf(stderr, "method %d size %zu: failed with %s %d, want ENOMEM\n",
					m, n, m == 2 ? "return" : "errno", m == 2 ? rc : errno);
				bad++;
			}
			break;
		}
		vn[k] = n < 64 ? n : 64;
		pat_fill(p, vn[k], (uint32_t)k);
		((char *)p)[n - 1] = 1;
		v[k++] = p;
	}
	for (int i = 0; i < k; i++) {
		bad += pat_check(v[i], vn[i], (uint32_t)i) != (size_t)-1;
		free(v[i]);
	}
	*count = k;
	return bad;
}

/* A thread started before memory runs out makes its first allocation at
 * the limit: NULL is fine, an abort is not. */
static pthread_barrier_t gate;
static void *late_thread(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&gate); /* memory is exhausted now */
	void *p = malloc(64), *q = malloc(100000);
	free(p);
	free(q);
	pthread_barrier_wait(&gate);
	return NULL;
}

static int child(void)
{
	pthread_t lt;
	pthread_barrier_init(&gate, NULL, 2);
	if (pthread_create(&lt, NULL, late_thread, NULL))
		return 99;
	static const size_t sizes[] = { 5000, 40000, 3 << 20, 50 << 20 };
	int bad = 0;
	for (int round = 0; round < 2; round++) /* round 2, malloc only: memory came back */
		for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
			for (int m = 0; m < (round ? 1 : 5); m++) {
				int got = 0;
				bad += exhaust(m, sizes[s], &got);
				if (got == 0) {
					fprintf(stderr, "round %d method %d size %zu: not even one block\n",
						round, m, sizes[s]);
					bad++;
				}
			}
	/* stdio's first buffer, allocated while memory is exhausted: fill the
	 * space with 1 MiB blocks, then with 64-byte ones, then print */
	static void *hog[1 << 16];
	int nh = 0;
	while (nh < (1 << 16) && (hog[nh] = malloc(1 << 20)) != NULL)
		nh++;
	while (nh < (1 << 16) && (hog[nh] = malloc(64)) != NULL)
		nh++;
	pthread_barrier_wait(&gate); /* the late thread allocates now */
	pthread_barrier_wait(&gate);
	pthread_join(lt, NULL);
	printf("stdout at the limit\n");
	fflush(stdout);
	for (int i = 0; i < nh; i++)
		free(hog[i]);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	EMU_SKIP("RLIMIT_AS caps qemu-user's own reservations");
	if (argc > 1 && !strcmp(argv[1], "--child")) {
		alarm(60);
		return child();
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		HARD_ERROR("fork");
	if (pid == 0) {
		struct rlimit rl = { (rlim_t)320 << 20, (rlim_t)320 << 20 };
		if (setrlimit(RLIMIT_AS, &rl))
			_exit(99);
		execl("/proc/self/exe", argv[0], "--child", (char *)NULL);
		_exit(99);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 99)
		HARD_ERROR("could not set up the limit or re-execute");
	if (WIFSIGNALED(st))
		fprintf(stderr, "child killed by signal %d under RLIMIT_AS%s\n", WTERMSIG(st),
			WTERMSIG(st) == SIGALRM ? " (hung for 60 s)" : "");
	int child_exit = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	CHECK_EQ(child_exit, 0);
	return CHECK_DONE();
}
