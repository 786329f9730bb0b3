/* prof_unw_start — the profiler changes no process-wide limit or signal mask.
 *
 * libunwind 1.6 opens a validation pipe at its set-up; heapalloc once made
 * it fail by setting RLIMIT_NOFILE to 0 with every signal blocked, from a
 * constructor, in every process (prof/capture/unw_pipe.c now refuses that one pipe2
 * instead).  This program defines setrlimit, prlimit, prlimit64,
 * sigprocmask and pthread_sigmask itself, exported (-export-dynamic), so a
 * call the library or libunwind makes comes here first: counted when made
 * on this (the main) thread, then done by the system call.  Before main
 * (the profiler's constructors, sampling on) none may come; while every
 * allocation is sampled from many call sites, no limit may be set either,
 * and this thread's mask and RLIMIT_NOFILE are at the end what they were
 * in this program's own constructor.  The counters are checked live first:
 * a call of the program's own is counted. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "tests/lib/check.h"
#include "tests/lib/rel_util.h"

static int limits_set, masks_set;
static int limits_before_main = -1, masks_before_main = -1;
static struct rlimit nofile_ctor;
static sigset_t mask_ctor;

static int main_thread(void)
{
	return syscall(SYS_gettid) == getpid();
}

static int prlimit_sys(pid_t pid, int res, const struct rlimit *nw, struct rlimit *old)
{
	if (nw && main_thread())
		limits_set++;
	return (int)syscall(SYS_prlimit64, pid, res, nw, old);
}

int setrlimit(__rlimit_resource_t res, const struct rlimit *rl)
{
	return prlimit_sys(0, (int)res, rl, NULL);
}

int setrlimit64(__rlimit_resource_t res, const struct rlimit64 *rl)
{
	return prlimit_sys(0, (int)res, (const struct rlimit *)rl, NULL);
}

int prlimit(pid_t pid, __rlimit_resource_t res, const struct rlimit *nw, struct rlimit *old)
{
	return prlimit_sys(pid, (int)res, nw, old);
}

int prlimit64(pid_t pid, __rlimit_resource_t res, const struct rlimit64 *nw, struct rlimit64 *old)
{
	return prlimit_sys(pid, (int)res, (const struct rlimit *)nw, (struct rlimit *)old);
}

static int mask_sys(int how, const sigset_t *set, sigset_t *old)
{
	if (set && main_thread())
		masks_set++;
	return (int)syscall(SYS_rt_sigprocmask, how, set, old, _NSIG / 8);
}

int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	return mask_sys(how, set, old) == 0 ? 0 : -1;
}

int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	return mask_sys(how, set, old) == 0 ? 0 : errno;
}

__attribute__((constructor)) static void program_ctor(void)
{
	limits_before_main = limits_set;
	masks_before_main = masks_set;
	getrlimit(RLIMIT_NOFILE, &nofile_ctor);
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &mask_ctor, _NSIG / 8);
}

static void *volatile sink;

__attribute__((noinline)) static void churn(size_t n)
{
	for (int i = 0; i < 8; i++) {
		char *p = malloc(n + (size_t)i);
		memset(p, 1, 16);
		sink = p;
		free(p);
	}
}

#define SITE(k) __attribute__((noinline)) static void site##k(void) { churn(16 << k); }
SITE(1) SITE(2) SITE(3) SITE(4) SITE(5) SITE(6) SITE(7) SITE(8)

int main(int argc, char **argv)
{
	unsetenv("HEAPPROFILE");   /* every allocation sampled, in memory only */
	rel_reexec(argv, "HEAP_PROFILE_SAMPLE_INTERVAL=1", (char *)NULL);
	(void)argc;
	CHECK_EQ(limits_before_main, 0);
	CHECK_EQ(masks_before_main, 0);
	void (*const sites[])(void) = { site1, site2, site3, site4, site5, site6, site7, site8 };
	for (int r = 0; r < 16; r++)
		for (int k = 0; k < 8; k++)
			sites[k]();
	CHECK_EQ(limits_set, 0);
	struct rlimit nofile;
	sigset_t mask;
	CHECK_EQ(getrlimit(RLIMIT_NOFILE, &nofile), 0);
	CHECK_EQ(nofile.rlim_cur, nofile_ctor.rlim_cur);
	CHECK_EQ(nofile.rlim_max, nofile_ctor.rlim_max);
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &mask, _NSIG / 8);
	CHECK(memcmp(&mask, &mask_ctor, _NSIG / 8) == 0);
	/* the counters see calls: the program's own */
	CHECK_EQ(setrlimit(RLIMIT_NOFILE, &nofile), 0);
	CHECK_EQ(limits_set, 1);
	int m = masks_set;
	sigset_t none;
	sigemptyset(&none);
	CHECK_EQ(pthread_sigmask(SIG_BLOCK, &none, NULL), 0);
	CHECK_EQ(masks_set, m + 1);
	return CHECK_DONE();
}
