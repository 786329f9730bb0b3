/* tests/integration/rel_dump_tmpname.c — what may already sit at a dump's names in a
 * shared directory such as /tmp:
 *   1. a symlink at PREFIX.0001.heap.tmp pointing at another file: the dump
 *      must not write through it (the victim keeps its bytes);
 *   2. a stale regular PREFIX.0002.heap.tmp from a crashed run: replaced;
 *   3. a directory at the final name PREFIX.0003.heap: the dump fails with
 *      one message and removes its temporary;
 *   4. a FIFO at PREFIX.0004.heap.tmp: removed like the stale file, never
 *      opened (the watchdog fails a hang): dump 4 succeeds as a whole
 *      regular file, and dump 5 after it works.
 * Every dump that succeeds is whole, and the program runs on.  (The
 * temporary name is predictable, so it must be opened without following a
 * link or waiting for a reader: O_NOFOLLOW|O_NONBLOCK, or O_EXCL after an
 * unlink, or O_TMPFILE + linkat.)
 */
#include <stdint.h>

#include "tests/lib/rel_util.h"
#include "include/heapalloc.h"

static char dir[512], prefix[600];

static void path(char *out, size_t cap, int n, const char *suffix)
{
	snprintf(out, cap, "%s.%04d.heap%s", prefix, n, suffix);
}

int main(void)
{
	rel_watchdog(10, "rel_dump_tmpname (a dump blocked on a FIFO at its temporary name?)");
	rel_mkdtemp(dir, sizeof dir, "reltmpname");
	snprintf(prefix, sizeof prefix, "%s/p", dir);
	char victim[700], t1[700], t2[700], t3[700], t4[700], f[700];
	snprintf(victim, sizeof victim, "%s/victim", dir);
	static const char vbytes[] = "precious data that is not a heap profile\n";
	int fd = open(victim, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	REQUIRE(fd >= 0 && write(fd, vbytes, sizeof vbytes - 1) == (ssize_t)sizeof vbytes - 1);
	close(fd);
	path(t1, sizeof t1, 1, ".tmp");
	path(t2, sizeof t2, 2, ".tmp");
	path(t3, sizeof t3, 3, "");
	path(t4, sizeof t4, 4, ".tmp");
	REQUIRE(symlink(victim, t1) == 0);
	fd = open(t2, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	REQUIRE(fd >= 0 && write(fd, "stale", 5) == 5);
	close(fd);
	REQUIRE(mkdir(t3, 0755) == 0);
	REQUIRE(mkfifo(t4, 0644) == 0);

	void *keep = malloc(12345);
	rel_stderr_begin();
	int start = heapalloc_profile_start(prefix);
	int rc[3];
	for (int i = 0; i < 3; i++)
		rc[i] = heapalloc_profile_dump("test: odd names");
	const char *err = rel_stderr_end();

	REQUIRE(start == 0);
	size_t vlen;
	char *v = rel_slurp(victim, &vlen);
	int intact = v && vlen == sizeof vbytes - 1 && !memcmp(v, vbytes, vlen);
	if (!intact)
		fprintf(stderr, "FAIL: the dump wrote through the symlink at %s: the victim "
			"now holds %zu bytes starting '%.40s'\n", t1, vlen, v ? v : "");
	CHECK(intact);
	free(v);
	CHECK_EQ(rc[0], 0);        /* symlink at the temporary: still dumped */
	CHECK_EQ(rc[1], 0);        /* stale temporary: replaced */
	CHECK_NE(rc[2], 0);        /* a directory at the final name */
	for (int n = 1; n <= 2; n++) {
		path(f, sizeof f, n, "");
		if (rc[n - 1] == 0)
			CHECK(rel_profile_whole(f));
	}
	CHECK(access(t2, F_OK) != 0);
	CHECK_EQ(rel_count_lines(err, "Failed dumping heap profile to ", t3, (char *)NULL), 1);
	path(f, sizeof f, 3, ".tmp");
	CHECK(access(f, F_OK) != 0);                  /* its temporary removed */
	if (ck_failures)
		fprintf(stderr, "--- stderr of dumps 1-3 ---\n%s---\n", err);

	/* 4: the FIFO (a hang here is reported by the watchdog) */
	int rc4 = heapalloc_profile_dump("test: FIFO at the temporary name");
	int rc5 = heapalloc_profile_dump("test: after the FIFO");
	heapalloc_profile_stop();
	free(keep);
	CHECK_EQ(rc4, 0);
	path(f, sizeof f, 4, "");
	struct stat st;
	CHECK(lstat(f, &st) == 0 && S_ISREG(st.st_mode));
	if (rc4 == 0)
		CHECK(rel_profile_whole(f));
	CHECK(access(t4, F_OK) != 0);                 /* the FIFO is gone */
	CHECK_EQ(rc5, 0);
	path(f, sizeof f, 5, "");
	if (rc5 == 0)
		CHECK(rel_profile_whole(f));
	rel_rmtree(dir);
	return CHECK_DONE();
}
