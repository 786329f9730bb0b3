/* tests/integration/rel_dumpfail.c — dumps that cannot be written (built three times):
 *   rel_dump_efbig   RLIMIT_FSIZE below the size of a profile, SIGXFSZ
 *                    ignored: the first write succeeds in part, the next
 *                    fails with EFBIG — a write error mid-dump;
 *   rel_dump_enospc  a 64 KiB tmpfs filled up (a private mount namespace;
 *                    skipped, 77, when mounting is not permitted);
 *   rel_dump_emfile  every file descriptor in use (RLIMIT_NOFILE reached).
 * While the fault lasts, each of 3 dumps fails: heapalloc_profile_dump
 * returns an error, exactly one "Failed dumping heap profile to FILE" line
 * per dump, no file under a final .heap name and no temporary left, and the
 * program keeps allocating.  Once space is back, the next dump succeeds and
 * the file is whole.  The dump log (p.log) costs at most one stderr line
 * of its own, holds only whole lines (failed dumps name no file, "-"), ends
 * with the dump that succeeded, and leaves no descriptor open.
 */
#include "tests/lib/rel_util.h"

#include <sched.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include "include/heapalloc.h"

#ifndef REL_ENOSPC
#define REL_ENOSPC 0
#endif
#ifndef REL_EMFILE
#define REL_EMFILE 0
#endif

static char dir[512], prefix[600], filler[600];
#if !REL_ENOSPC
static struct rlimit saved_fsize;
#endif
#if REL_EMFILE
static int fds[4096], nfds;
#endif

static void *keep[4096];

static void churn(int round)
{
	for (int i = 0; i < 4096; i++) {
		free(keep[i]);
		keep[i] = malloc((size_t)(i * 13 + round * 7) % 3000 + 1);
		REQUIRE(keep[i]);
		memset(keep[i], round, 1);
	}
}

static void fault_on(void)
{
#if REL_ENOSPC
	int fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	REQUIRE(fd >= 0);
	static char blk[4096];
	while (write(fd, blk, sizeof blk) > 0)
		;
	/* tmpfs rounds to pages: fill the last bytes one at a time */
	while (write(fd, blk, 1) > 0)
		;
	close(fd);
#elif REL_EMFILE
	getrlimit(RLIMIT_NOFILE, &saved_fsize);
	struct rlimit r = { 256, saved_fsize.rlim_max };
	REQUIRE(setrlimit(RLIMIT_NOFILE, &r) == 0);
	int fd;
	while (nfds < 4096 && (fd = open("/dev/null", O_RDONLY)) >= 0)
		fds[nfds++] = fd;
	REQUIRE(errno == EMFILE);
#else
	getrlimit(RLIMIT_FSIZE, &saved_fsize);
	struct rlimit r = { 1024, saved_fsize.rlim_max };
	signal(SIGXFSZ, SIG_IGN);
	REQUIRE(setrlimit(RLIMIT_FSIZE, &r) == 0);
#endif
}

static void fault_off(void)
{
#if REL_ENOSPC
	REQUIRE(unlink(filler) == 0);
#elif REL_EMFILE
	while (nfds)
		close(fds[--nfds]);
	REQUIRE(setrlimit(RLIMIT_NOFILE, &saved_fsize) == 0);
#else
	REQUIRE(setrlimit(RLIMIT_FSIZE, &saved_fsize) == 0);
#endif
}

int main(void)
{
	rel_watchdog(60, "rel_dumpfail");
	rel_mkdtemp(dir, sizeof dir, "reldumpfail");
#if REL_ENOSPC
	if (unshare(CLONE_NEWNS) != 0) {
		rel_rmtree(dir);
		SKIP("unshare(CLONE_NEWNS) not permitted: cannot mount a small tmpfs");
	}
	mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL);
	if (mount("tmpfs", dir, "tmpfs", 0, "size=64k") != 0) {
		rel_rmtree(dir);
		SKIP("mount -t tmpfs not permitted");
	}
	const char *why = "No space left on device";
	const char *why2 = "errno 28";
#elif REL_EMFILE
	const char *why = "Too many open files";
	const char *why2 = "errno 24";
#else
	const char *why = "File too large";
	const char *why2 = "errno 27";
#endif
	snprintf(prefix, sizeof prefix, "%s/p", dir);
	snprintf(filler, sizeof filler, "%s/filler", dir);

	rel_stderr_begin();
	int start = heapalloc_profile_start(prefix);
	churn(1);
	int fds_before = rel_count_fds();
	fault_on();
	int rc[3];
	for (int i = 0; i < 3; i++) {
		rc[i] = heapalloc_profile_dump("test: fault");
		churn(2 + i);
	}
	fault_off();
	int fds_after = rel_count_fds();
	/* what the failed dumps left (counted once descriptors are back) */
	int heap_during = rel_count_files(dir, ".heap");
	int all_during = rel_count_files(dir, NULL);
	char logp[700], last[64];
	snprintf(logp, sizeof logp, "%s.log", prefix);
	int log_during = rel_log_lines(logp, NULL, 0);
	int rc_after = heapalloc_profile_dump("test: space is back");
	churn(9);
	heapalloc_profile_stop();
	const char *err = rel_stderr_end();

	REQUIRE(start == 0);
	for (int i = 0; i < 3; i++)
		CHECK_NE(rc[i], 0);
	CHECK_EQ(heap_during, 0);
	CHECK_EQ(all_during, 1);          /* the log; no temporary left either */
	CHECK_EQ(fds_after, fds_before);
	int failed = rel_count_lines(err, "Failed dumping heap profile to ", prefix, (char *)NULL);
	CHECK_EQ(failed, 3);
	int failed_why = rel_count_lines(err, "Failed dumping heap profile to ", why, (char *)NULL) +
			 rel_count_lines(err, "Failed dumping heap profile to ", why2, (char *)NULL);
	CHECK_GE(failed_why, 3);
	CHECK_EQ(rc_after, 0);
	CHECK_EQ(rel_count_files(dir, ".heap"), 1);
	CHECK_EQ(rel_count_files(dir, NULL), 2);
	/* the log: every failed dump had its line, "-" for its file, save
	 * where the log itself could not be opened (no descriptor) */
	int log_err = rel_count_lines(err, "cannot write the dump log", (char *)NULL);
	int log_after = rel_log_lines(logp, last, sizeof last);
	CHECK_EQ(strcmp(last, "p.0004.heap"), 0);
#if REL_EMFILE
	CHECK_EQ(log_during, 0);
	CHECK_EQ(log_after, 1);
	CHECK_EQ(log_err, 1);
#else
	CHECK_EQ(log_during, 3);
	CHECK_EQ(log_after, 4);
	CHECK_EQ(log_err, 0);
#endif
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (!strstr(e->d_name, ".heap"))
			continue;
		char p[1200];
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		CHECK(rel_profile_whole(p));
	}
	if (d)
		closedir(d);
	if (ck_failures)
		fprintf(stderr, "--- stderr of the dumps ---\n%s---\n", err);
#if REL_ENOSPC
	umount2(dir, MNT_DETACH);
#endif
	rel_rmtree(dir);
	for (int i = 0; i < 4096; i++)
		free(keep[i]);
	return CHECK_DONE();
}
