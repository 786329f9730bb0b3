/* prof_usdt_poll.c — attaching the otel_memory:alloc probe turns sampling
 * on and detaching turns it off, with no BPF: the test writes the probe's
 * semaphore as the kernel does for an attached tracer (usdt_sem.h), and
 * reads the library's state through heapalloc_get_stats.
 *   - no tracer, the always-on sampling off (prof_usdt_poll.sh sets
 *     HEAP_PROFILE_SAMPLE_INTERVAL=0): 32 MiB allocated, nothing sampled;
 *   - semaphore set: sampling on within 17 MiB (the poll comes every
 *     16 MiB), 256 MiB of 4 KiB blocks give 128 +- 11 samples at the
 *     default 2 MiB (checked within [60, 200], > 5 sd), no session runs,
 *     no file is written;
 *   - fork: the child samples on, and stops within 17 MiB of its own detach;
 *   - a session (the API) takes over while attached and hands back at its
 *     stop; blocks sampled for the probe alone are freed inside the session
 *     and the session's blocks after it, and its profile is written;
 *   - detached: sampling off within 17 MiB, nothing sampled in 64 MiB more.
 * Run in an empty directory (prof_usdt_poll.sh); its only file must be the
 * session's dump.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <sys/wait.h>

#include "tests/lib/check.h"
#include "tests/lib/usdt_sem.h"
#include "heapalloc.h"

#define MIB ((size_t)1 << 20)

static heapalloc_stats stats(void)
{
	heapalloc_stats s;
	heapalloc_get_stats(&s);
	return s;
}

/* 1 MiB blocks until sampling is `on`; the MiB it took (at most 64). */
static int mib_until(int on)
{
	int mib = 0;
	while ((stats().prof_probe_sampling != 0) != on && mib < 64) {
		free(malloc(MIB));
		mib++;
	}
	return mib;
}

static uint64_t samples_in(size_t bytes, size_t size)
{
	uint64_t before = stats().prof_probe_samples;
	for (size_t done = 0; done < bytes; done += size)
		free(malloc(size));
	return stats().prof_probe_samples - before;
}

/* Files here whose name does not start with `session` (the session's
 * dump, its log), "": every file. */
static int files_but(const char *session)
{
	DIR *d = opendir(".");
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.' && (!*session || strncmp(e->d_name, session, strlen(session)));
	if (d)
		closedir(d);
	return n;
}

int main(void)
{
	unsigned short *sem = usdt_semaphore("alloc");
	if (!sem)
		SKIP("libheapalloc has no otel_memory:alloc probe (--disable-usdt or no <sys/sdt.h>)");
	REQUIRE(*sem == 0);

	/* nothing attached: nothing sampled */
	CHECK_EQ(samples_in(32 * MIB, 4096), 0);
	CHECK_EQ(stats().prof_probe_sampling, 0);

	/* attached */
	__atomic_add_fetch(sem, 1, __ATOMIC_RELAXED);
	int mib = mib_until(1);
	CHECK_LE(mib, 17);
	CHECK_EQ(stats().prof_probe_sampling, 1);
	uint64_t n = samples_in(256 * MIB, 4096);
	CHECK_GE(n, 60);
	CHECK_LE(n, 200);
	CHECK_EQ(heapalloc_profile_running(), 0);
	CHECK_EQ(files_but(""), 0);

	/* fork: the child inherits the attached state and polls on its own */
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		int bad = samples_in(64 * MIB, 4096) == 0;
		__atomic_sub_fetch(sem, 1, __ATOMIC_RELAXED);
		bad |= mib_until(0) > 17;
		bad |= samples_in(64 * MIB, 4096) != 0;
		_exit(bad);
	}
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK_EQ(*sem, 1);              /* the child's detach was its own */
	CHECK_EQ(stats().prof_probe_sampling, 1);

	/* blocks sampled for the probe alone, freed inside a session */
	enum { NB = 20000 };
	static void *blocks[NB];
	for (int i = 0; i < NB; i++)
		blocks[i] = malloc(i % 4 ? 4096 : 100000);
	REQUIRE(heapalloc_profile_start("usdt") == 0);
	CHECK_EQ(stats().prof_probe_sampling, 0);
	for (int i = 0; i < NB; i++)
		free(blocks[i]);
	uint64_t before = stats().prof_probe_samples;
	for (int i = 0; i < NB; i++)
		blocks[i] = malloc(i % 4 ? 4096 : 100000);
	CHECK_GE(stats().prof_samples, 1);
	CHECK_EQ(stats().prof_probe_samples, before);   /* the session's samples */
	CHECK_EQ(heapalloc_profile_dump("usdt"), 0);
	heapalloc_profile_stop();
	/* the session's blocks freed after it, while the probe samples again */
	CHECK_LE(mib_until(1), 17);
	for (int i = 0; i < NB; i++)
		free(blocks[i]);
	CHECK_GE(samples_in(256 * MIB, 4096), 60);

	/* detached */
	__atomic_sub_fetch(sem, 1, __ATOMIC_RELAXED);
	CHECK_LE(mib_until(0), 17);
	CHECK_EQ(stats().prof_probe_sampling, 0);
	CHECK_EQ(samples_in(64 * MIB, 4096), 0);
	CHECK_EQ(files_but("usdt."), 0);    /* the session's files only */
	CHECK_GE(files_but(""), 1);
	return CHECK_DONE();
}
