/* alloc_errno — errno after every malloc-family entry point, as glibc 2.36
 * sets it (aligned_alloc as glibc 2.38, C17 DR 460):
 *   - a failure returns NULL with errno ENOMEM (sizes that overflow or
 *     cannot be mapped, RLIMIT_AS exhausted) or EINVAL (bad alignments);
 *   - posix_memalign returns EINVAL with errno untouched, or ENOMEM with
 *     errno ENOMEM (glibc leaves its internal ENOMEM in place), and never
 *     writes its out pointer on failure;
 *   - success, free and realloc(p, 0) leave errno untouched, also right
 *     after failures and when memory is tight.
 * One table drives every case; it runs on the main thread and on a second
 * thread, and once more in a child whose RLIMIT_AS is nearly used up. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"

enum fn { MALLOC, CALLOC, REALLOC_NULL, REALLOC, REALLOCARRAY, MEMALIGN, ALIGNED_ALLOC,
	  POSIX_MEMALIGN, VALLOC, PVALLOC };
static const char *const fname[] = { "malloc", "calloc", "realloc(NULL)", "realloc",
	"reallocarray", "memalign", "aligned_alloc", "posix_memalign", "valloc", "pvalloc" };

#define UNTOUCHED 0   /* expected errno: the sentinel stays */
#define SENTINEL 4242

struct row {
	enum fn f;
	size_t a, b;      /* size, or (count, size), or (alignment, size) */
	int fails;        /* 1: NULL / non-zero return expected */
	int err;          /* errno after the call (UNTOUCHED or a code) */
	int rc;           /* posix_memalign's return */
};

#define BIG ((size_t)1 << 62)     /* no machine maps this */
#define HALF ((size_t)1 << 63)    /* SIZE_MAX / 2 + 1 */

static const struct row table[] = {
	/* sizes that overflow or cannot be mapped */
	{ MALLOC, SIZE_MAX, 0, 1, ENOMEM, 0 },
	{ MALLOC, SIZE_MAX - 4095, 0, 1, ENOMEM, 0 },
	{ MALLOC, HALF, 0, 1, ENOMEM, 0 },
	{ MALLOC, BIG, 0, 1, ENOMEM, 0 },
	{ CALLOC, HALF, 2, 1, ENOMEM, 0 },
	{ CALLOC, 3, SIZE_MAX / 2, 1, ENOMEM, 0 },
	{ CALLOC, 1, BIG, 1, ENOMEM, 0 },
	{ REALLOC_NULL, SIZE_MAX, 0, 1, ENOMEM, 0 },
	{ REALLOC_NULL, BIG, 0, 1, ENOMEM, 0 },
	{ REALLOC, SIZE_MAX, 0, 1, ENOMEM, 0 },
	{ REALLOC, BIG, 0, 1, ENOMEM, 0 },
	{ REALLOCARRAY, HALF, 2, 1, ENOMEM, 0 },
	{ REALLOCARRAY, 1, BIG, 1, ENOMEM, 0 },
	{ MEMALIGN, 64, SIZE_MAX, 1, ENOMEM, 0 },
	{ MEMALIGN, 4096, BIG, 1, ENOMEM, 0 },
	{ ALIGNED_ALLOC, 64, SIZE_MAX, 1, ENOMEM, 0 },
	{ ALIGNED_ALLOC, 4096, BIG, 1, ENOMEM, 0 },
	{ POSIX_MEMALIGN, 64, SIZE_MAX, 1, ENOMEM, ENOMEM },
	{ POSIX_MEMALIGN, 4096, BIG, 1, ENOMEM, ENOMEM },
	{ VALLOC, SIZE_MAX, 0, 1, ENOMEM, 0 },
	{ VALLOC, BIG, 0, 1, ENOMEM, 0 },
	{ PVALLOC, SIZE_MAX, 0, 1, ENOMEM, 0 },
	{ PVALLOC, SIZE_MAX - 4095, 0, 1, ENOMEM, 0 },
	{ PVALLOC, BIG, 0, 1, ENOMEM, 0 },
	/* bad alignments */
	{ ALIGNED_ALLOC, 0, 16, 1, EINVAL, 0 },
	{ ALIGNED_ALLOC, 24, 16, 1, EINVAL, 0 },
	{ ALIGNED_ALLOC, 33, 16, 1, EINVAL, 0 },
	{ ALIGNED_ALLOC, HALF + 1, 16, 1, EINVAL, 0 },
	{ MEMALIGN, HALF + 1, 16, 1, EINVAL, 0 },
	{ MEMALIGN, SIZE_MAX, 16, 1, EINVAL, 0 },
	{ POSIX_MEMALIGN, 0, 16, 1, UNTOUCHED, EINVAL },
	{ POSIX_MEMALIGN, 4, 16, 1, UNTOUCHED, EINVAL },
	{ POSIX_MEMALIGN, 24, 16, 1, UNTOUCHED, EINVAL },
	{ POSIX_MEMALIGN, 33, 16, 1, UNTOUCHED, EINVAL },
	{ POSIX_MEMALIGN, HALF + 8, 16, 1, UNTOUCHED, EINVAL },
	{ POSIX_MEMALIGN, 4, SIZE_MAX, 1, UNTOUCHED, EINVAL },
	/* success: errno untouched, every size tier */
	{ MALLOC, 0, 0, 0, UNTOUCHED, 0 },
	{ MALLOC, 100, 0, 0, UNTOUCHED, 0 },
	{ MALLOC, 40000, 0, 0, UNTOUCHED, 0 },
	{ MALLOC, 3 << 20, 0, 0, UNTOUCHED, 0 },
	{ CALLOC, 0, 7, 0, UNTOUCHED, 0 },
	{ CALLOC, 10, 100, 0, UNTOUCHED, 0 },
	{ CALLOC, 1, 3 << 20, 0, UNTOUCHED, 0 },
	{ REALLOC_NULL, 100, 0, 0, UNTOUCHED, 0 },
	{ REALLOC, 5000, 0, 0, UNTOUCHED, 0 },
	{ REALLOC, 3 << 20, 0, 0, UNTOUCHED, 0 },
	{ REALLOCARRAY, 10, 10, 0, UNTOUCHED, 0 },
	{ MEMALIGN, 3, 100, 0, UNTOUCHED, 0 },
	{ MEMALIGN, 4096, 3 << 20, 0, UNTOUCHED, 0 },
	{ ALIGNED_ALLOC, 64, 100, 0, UNTOUCHED, 0 },
	{ ALIGNED_ALLOC, 1 << 16, 40000, 0, UNTOUCHED, 0 },
	{ POSIX_MEMALIGN, 8, 0, 0, UNTOUCHED, 0 },
	{ POSIX_MEMALIGN, 256, 100, 0, UNTOUCHED, 0 },
	{ POSIX_MEMALIGN, 1 << 21, 3 << 20, 0, UNTOUCHED, 0 },
	{ VALLOC, 100, 0, 0, UNTOUCHED, 0 },
	{ PVALLOC, 0, 0, 0, UNTOUCHED, 0 },
	{ PVALLOC, 5000, 0, 0, UNTOUCHED, 0 },
};

static volatile size_t vsize;
static size_t sz(size_t n) { vsize = n; return vsize; }   /* no constant folding */

/* Runs one row; returns the block (to be freed by the caller) or NULL. */
static void *run(const struct row *r, int *rc_out, void **old_out)
{
	void *p = NULL, *out = (void *)0x5a5a;
	int rc = 0;
	*old_out = NULL;
	switch (r->f) {
	case MALLOC: p = malloc(sz(r->a)); break;
	case CALLOC: p = calloc(sz(r->a), sz(r->b)); break;
	case REALLOC_NULL: p = realloc(NULL, sz(r->a)); break;
	case REALLOC:
	case REALLOCARRAY: {
		char *old = malloc(100);
		REQUIRE(old);
		memset(old, 0x77, 100);
		errno = SENTINEL;
		p = r->f == REALLOC ? realloc(old, sz(r->a)) : reallocarray(old, sz(r->a), sz(r->b));
		if (!p)
			*old_out = old;   /* must still be ours, contents intact */
		break;
	}
	case MEMALIGN: p = memalign(sz(r->a), sz(r->b)); break;
	case ALIGNED_ALLOC: p = aligned_alloc(sz(r->a), sz(r->b)); break;
	case POSIX_MEMALIGN:
		rc = posix_memalign(&out, sz(r->a), sz(r->b));
		p = rc ? NULL : out;
		if (rc)
			CHECK(out == (void *)0x5a5a);   /* untouched on failure */
		break;
	case VALLOC: p = valloc(sz(r->a)); break;
	case PVALLOC: p = pvalloc(sz(r->a)); break;
	}
	*rc_out = rc;
	return p;
}

static void one(const struct row *r, const char *where)
{
	errno = SENTINEL;
	void *old;
	int rc;
	void *p = run(r, &rc, &old);
	int e = errno;
	int want = r->err == UNTOUCHED ? SENTINEL : r->err;
	if ((p == NULL) != r->fails || e != want || rc != r->rc)
		fprintf(stderr, "%s: %s(%zu, %zu) = %p rc %d errno %d; want %s, rc %d, errno %d\n",
			where, fname[r->f], r->a, r->b, p, rc, e, r->fails ? "NULL" : "a block",
			r->rc, want);
	CHECK_EQ(p == NULL, r->fails);
	CHECK_EQ(e, want);
	CHECK_EQ(rc, r->rc);
	if (old) {
		unsigned char *c = old;
		size_t bad = 0;
		for (int i = 0; i < 100; i++)
			bad += c[i] != 0x77;
		CHECK_EQ(bad, 0);
		free(old);
	}
	/* free and realloc(p, 0) never touch errno, munmap or not */
	errno = SENTINEL;
	free(p);
	CHECK_EQ(errno, SENTINEL);
	void *q = malloc(sz(r->a % 5000 + 1));
	REQUIRE(q);
	errno = SENTINEL;
	CHECK(realloc(q, 0) == NULL);
	CHECK_EQ(errno, SENTINEL);
}

static void *whole_table(void *where)
{
	for (size_t i = 0; i < sizeof table / sizeof *table; i++)
		one(&table[i], where);
	return NULL;
}

/* Re-executed with RLIMIT_AS at 512 MiB from its start: every entry point
 * asks for 1 GiB (ENOMEM, posix_memalign's rc and errno ENOMEM), small
 * requests still succeed with errno untouched, and memory filled to the
 * limit and freed again serves the same sizes with errno untouched. */
static int tight(void)
{
	whole_table("under RLIMIT_AS");
	const size_t n = (size_t)1 << 30;
	const struct row rows[] = {
		{ MALLOC, n, 0, 1, ENOMEM, 0 },
		{ CALLOC, 1, n, 1, ENOMEM, 0 },
		{ REALLOC_NULL, n, 0, 1, ENOMEM, 0 },
		{ REALLOC, n, 0, 1, ENOMEM, 0 },
		{ REALLOCARRAY, 1, n, 1, ENOMEM, 0 },
		{ MEMALIGN, 4096, n, 1, ENOMEM, 0 },
		{ ALIGNED_ALLOC, 64, n, 1, ENOMEM, 0 },
		{ POSIX_MEMALIGN, 64, n, 1, ENOMEM, ENOMEM },
		{ VALLOC, n, 0, 1, ENOMEM, 0 },
		{ PVALLOC, n, 0, 1, ENOMEM, 0 },
		{ MALLOC, 100, 0, 0, UNTOUCHED, 0 },
		{ MALLOC, 40000, 0, 0, UNTOUCHED, 0 },
		{ POSIX_MEMALIGN, 64, 100, 0, UNTOUCHED, 0 },
	};
	for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
		one(&rows[i], "under RLIMIT_AS");
	/* fill to the limit with 1 MiB and 100 B blocks, free half, and
	 * allocate again: every success leaves errno untouched */
	enum { MAXB = 4096 };
	static void *v[MAXB];
	int k = 0;
	while (k < MAXB) {
		errno = SENTINEL;
		void *p = malloc(k % 2 ? 100 : (1 << 20));
		if (!p) {
			CHECK_EQ(errno, ENOMEM);
			break;
		}
		CHECK_EQ(errno, SENTINEL);
		v[k++] = p;
	}
	CHECK(k < MAXB);
	for (int i = 0; i < k; i += 2)
		free(v[i]);
	int again = 0;
	for (int i = 0; i < k; i += 2) {
		errno = SENTINEL;
		v[i] = malloc(1 << 20);
		if (!v[i])
			break;
		CHECK_EQ(errno, SENTINEL);
		again++;
	}
	CHECK_GE(again, k / 4);
	for (int i = 0; i < k; i++) {
		errno = SENTINEL;
		free(v[i]);
		CHECK_EQ(errno, SENTINEL);
	}
	return CHECK_DONE();
}

int main(int argc, char **argv)
{
	EMU_SKIP("RLIMIT_AS caps qemu-user's own reservations");
	if (argc > 1)
		return tight();
	whole_table("main thread");
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, whole_table, "second thread") == 0);
	pthread_join(t, NULL);
	fflush(stderr);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = { (rlim_t)512 << 20, (rlim_t)512 << 20 };
		if (setrlimit(RLIMIT_AS, &rl) != 0)
			_exit(EXIT_HARD);
		execl("/proc/self/exe", argv[0], "tight", (char *)NULL);
		_exit(EXIT_HARD);
	}
	int st;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return CHECK_DONE();
}
