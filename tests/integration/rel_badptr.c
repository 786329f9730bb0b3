/* tests/integration/rel_badptr.c — pointers heapalloc never returned and double frees,
 * where the check is cheap (alloc/entry.c): a pointer inside a span but not
 * at a block start, a small block freed twice in a row, a large block
 * (> 32 KiB) freed twice, a stack address.  Each case runs in its own fork
 * child and must die by SIGABRT with a "heapalloc: ..." line on stderr
 * naming the problem — never silent corruption, never a SIGSEGV.  Every
 * case runs twice: profiling off, and profiling on (heapalloc_profile_start)
 * — in one process with HEAP_PROFILE_SAMPLE_INTERVAL=1, so every block is
 * sampled and the free takes the profiler's path first, and in another
 * with an interval of 1 GiB, so no block is sampled and each carries an
 * ordinary header (exact totals' fast free).
 */
#include <malloc.h>
#include <stdint.h>

#include "tests/lib/rel_util.h"
#include "include/heapalloc.h"

static void *volatile sink;

typedef struct bad_case {
	const char *name;
	const char *want;        /* substring of the heapalloc: line */
	void (*run)(void);
} bad_case;

static char *small_block(void)
{
	char *p = malloc(64);
	memset(p, 1, 64);
	return p;
}

static void free_mid(void) { free(small_block() + 16); }
static void realloc_mid(void) { sink = realloc(small_block() + 16, 200); }
static void usable_mid(void) { sink = (void *)malloc_usable_size(small_block() + 16); }
static void free_mid_odd(void) { free(small_block() + 1); }
static void free_twice(void) { char *p = small_block(); free(p); free(p); }
static void realloc_freed(void) { char *p = small_block(); free(p); sink = realloc(p, 100); }
static void free_large_mid(void)
{
	char *p = malloc(100000);
	free(p + 4096);
}
static void free_large_twice(void)
{
	char *p = malloc(100000);
	memset(p, 2, 100000);
	free(p);
	free(p);
}
static void free_stack(void)
{
	char buf[256] __attribute__((aligned(64)));
	memset(buf, 0, sizeof buf);
	free(buf + 64);
}
static void realloc_stack(void)
{
	char buf[256] __attribute__((aligned(64)));
	memset(buf, 0, sizeof buf);
	sink = realloc(buf + 64, 10);
}
static void usable_stack(void)
{
	char buf[256] __attribute__((aligned(64)));
	memset(buf, 0, sizeof buf);
	sink = (void *)malloc_usable_size(buf + 64);
}

static const bad_case cases[] = {
	{ "free(small block + 16)", "invalid pointer", free_mid },
	{ "free(small block + 1)", "invalid pointer", free_mid_odd },
	{ "realloc(small block + 16)", "invalid pointer", realloc_mid },
	{ "malloc_usable_size(small block + 16)", "invalid pointer", usable_mid },
	{ "free(p); free(p) small", "double free", free_twice },
	{ "free(p); realloc(p) small", "heapalloc:", realloc_freed },
	{ "free(large block + 4096)", "invalid pointer", free_large_mid },
	{ "free(p); free(p) large", "free", free_large_twice },
	{ "free(stack address)", "invalid pointer", free_stack },
	{ "realloc(stack address)", "invalid pointer", realloc_stack },
	{ "malloc_usable_size(stack address)", "invalid pointer", usable_stack },
};

static void one(const bad_case *c, int profiling, const char *dir)
{
	int pfd[2];
	REQUIRE(pipe(pfd) == 0);
	fflush(NULL);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		dup2(pfd[1], 2);
		if (profiling) {
			char prefix[4200];
			snprintf(prefix, sizeof prefix, "%s/p", dir);
			if (heapalloc_profile_start(prefix) != 0)
				_exit(98);
		}
		alarm(10);
		c->run();
		_exit(97);      /* survived: the check is missing */
	}
	close(pfd[1]);
	char err[4096];
	size_t n = 0;
	ssize_t r;
	while ((r = read(pfd[0], err + n, sizeof err - 1 - n)) > 0)
		n += (size_t)r;
	err[n] = 0;
	close(pfd[0]);
	int st;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	int ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
	int named = 0;
	for (char *l = err; l && *l;) {
		char *nl = strchr(l, '\n');
		if (nl)
			*nl = 0;
		if (strstr(l, "heapalloc:") && strstr(l, c->want))
			named = 1;
		if (nl)
			*nl = '\n';
		l = nl ? nl + 1 : NULL;
	}
	if (!ok || !named) {
		char status[64];
		if (WIFEXITED(st))
			snprintf(status, sizeof status, "exit %d%s", WEXITSTATUS(st),
				 WEXITSTATUS(st) == 97 ? " (not detected)" : "");
		else
			snprintf(status, sizeof status, "signal %d (%s)", WTERMSIG(st),
				 strsignal(WTERMSIG(st)));
		fprintf(stderr, "FAIL %s [profiling %s, interval %s]: want SIGABRT and a "
			"'heapalloc: ...%s...' line, got %s, stderr: '%.300s'\n", c->name,
			profiling ? "on" : "off", getenv("HEAP_PROFILE_SAMPLE_INTERVAL"),
			c->want, status, err);
		ck_failures++;
	}
}

int main(int argc, char **argv)
{
	(void)argc;
	if (!getenv("REL_CHILD")) {
		/* each interval in a process of its own (options are read at
		 * start-up); a child's failures fail its exit status */
		static const char *const kv[] = { "HEAP_PROFILE_SAMPLE_INTERVAL=1",
						  "HEAP_PROFILE_SAMPLE_INTERVAL=1073741824" };
		for (int k = 0; k < 2; k++) {
			fflush(NULL);
			pid_t pid = fork();
			REQUIRE(pid >= 0);
			if (pid == 0)
				rel_reexec(argv, kv[k], (char *)NULL);
			int st;
			REQUIRE(waitpid(pid, &st, 0) == pid);
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				fprintf(stderr, "FAIL: the cases at %s\n", kv[k]);
				ck_failures++;
			}
		}
		return CHECK_DONE();
	}
	char dir[256];
	rel_mkdtemp(dir, sizeof dir, "relbad");
	for (int profiling = 0; profiling < 2; profiling++)
		for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
			one(&cases[i], profiling, dir);
	rel_rmtree(dir);
	return CHECK_DONE();
}
