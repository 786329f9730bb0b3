/* prof/capture/unw_pipe.c — libunwind's address-validation pipe, kept from touching
 * the program's files and, where it can be, from existing at all.
 *
 * libunwind 1.6 (Debian 12) opens a pipe at its one-time set-up and, when
 * a walk must validate an address (its fast trace stepping a frame it has
 * not cached, a frame without unwind info, a signal frame), reads a byte
 * from the read end and writes one byte of the address to the write end,
 * by fd number; when the read fails it closes both numbers and opens a new
 * pipe.  A program that closes every descriptor it did not open
 * (closefrom(3), as daemons and ssh do) and then opens files gets those
 * numbers, and the next validation reads a byte out of one file and writes
 * one into the other (gperftools #1283); a program that lists its
 * descriptors sees two it never opened.
 *
 * So libunwind is started from this file's constructor while the process
 * is single-threaded, with RLIMIT_NOFILE at 0 and signals blocked for the
 * moment of its set-up: its pipe fails to open and stays closed (-1, -1)
 * until one of our walks needs libunwind's fast trace, the only call of
 * ours that validates; most processes never do.  Around each fast trace
 * the two lowest free numbers are noted first (libunwind's pipe2 takes
 * them) and looked at after: a pipe opened as libunwind opens it there is
 * its own.  From then on, and when libunwind was started some other way
 * (with its pipe noted the same way, or not known), the fast trace runs
 * only while both numbers still name that pipe (two fstat calls); when it
 * cannot, a walk ends at the frame the rows cannot describe.  A thread
 * that closes and reopens a number between the check and libunwind's
 * write is not covered: libunwind reads its numbers unlocked.
 */
#define _GNU_SOURCE 1   /* pipe2 */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include "prof/prof.h"
#include "prof/capture/frame_rules.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/single_threaded.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
	PIPE_UNKNOWN,   /* libunwind may hold a pipe at numbers we do not know */
	PIPE_NONE,      /* libunwind holds no pipe (its set-up's failed) */
	PIPE_KNOWN      /* at unw_fd, that inode */
};
static int pipe_state = PIPE_UNKNOWN;
static int started;
static int unw_fd[2] = { -1, -1 };
static dev_t unw_dev;
static ino_t unw_ino;

/* The two numbers pipe2 would take now (closed again); 0 if none. */
static int lowest_pair(int fd[2])
{
	if (pipe2(fd, O_CLOEXEC) != 0)
		return 0;
	close(fd[0]);
	close(fd[1]);
	return 1;
}

/* What fd[0], fd[1] hold: 0 both free, 1 a pipe opened as libunwind opens
 * it (read end first, non-blocking, close-on-exec; noted), -1 anything else. */
static int look_at(const int fd[2])
{
	struct stat a, b;
	int ra = fstat(fd[0], &a), rb = fstat(fd[1], &b);
	if (ra != 0 && rb != 0)
		return errno == EBADF ? 0 : -1;
	int fl0 = fcntl(fd[0], F_GETFL), fl1 = fcntl(fd[1], F_GETFL);
	int fd0 = fcntl(fd[0], F_GETFD), fd1 = fcntl(fd[1], F_GETFD);
	if (ra != 0 || rb != 0 || !S_ISFIFO(a.st_mode) || a.st_dev != b.st_dev ||
	    a.st_ino != b.st_ino || fl0 < 0 || fl1 < 0 || fd0 < 0 || fd1 < 0 ||
	    (fl0 & O_ACCMODE) != O_RDONLY || (fl1 & O_ACCMODE) != O_WRONLY ||
	    !(fl0 & fl1 & O_NONBLOCK) || !(fd0 & fd1 & FD_CLOEXEC))
		return -1;
	unw_dev = a.st_dev;
	unw_ino = a.st_ino;
	unw_fd[0] = fd[0];
	unw_fd[1] = fd[1];
	return 1;
}

static int same_pipe(int fd)
{
	struct stat st;
	return fd >= 0 && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && st.st_dev == unw_dev &&
	       st.st_ino == unw_ino;
}

/* libunwind's set-up with no descriptor to be had: its pipe2 fails.  Only
 * single-threaded (another thread's open would fail too) and with every
 * signal blocked (so would a handler's). */
static int start_closed(void)
{
	struct rlimit was, none;
	sigset_t all, mask;
	if (!__libc_single_threaded || getrlimit(RLIMIT_NOFILE, &was) != 0)
		return 0;
	none = was;
	none.rlim_cur = 0;
	sigfillset(&all);
	if (pthread_sigmask(SIG_SETMASK, &all, &mask) != 0)
		return 0;
	int ok = setrlimit(RLIMIT_NOFILE, &none) == 0;
	if (ok) {
		unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
		/* a soft limit back where it was, under the hard one: the
		 * kernel always allows it */
		(void)setrlimit(RLIMIT_NOFILE, &was);
	}
	pthread_sigmask(SIG_SETMASK, &mask, NULL);
	return ok;
}

void ha_unw_start(void)
{
	if (__atomic_exchange_n(&started, 1, __ATOMIC_ACQ_REL))
		return;
	int e = errno, probe[2];
	if (start_closed()) {
		__atomic_store_n(&pipe_state, PIPE_NONE, __ATOMIC_RELEASE);
	} else {
		/* threaded, or no setrlimit (a sandbox): note where it opens */
		int have = lowest_pair(probe);
		unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
		if (have && look_at(probe) == 1)
			__atomic_store_n(&pipe_state, PIPE_KNOWN, __ATOMIC_RELEASE);
	}
	errno = e;
}

/* Started before main, while the process is still one thread; not when
 * sampling is switched off and nothing else asks for stacks (a session
 * started later through the API notes the pipe instead).  The switches are
 * the option table's, as read by the profiler's constructor (priority 201,
 * before this one). */
__attribute__((constructor)) static void unw_early(void)
{
	if (!ha_prof_opt_loaded)
		ha_options_load();
	if (!ha_prof_opt.always_on && !ha_prof_opt.prefix && !ha_prof_opt.http)
		return;
	ha_unw_start();
}

/* A call that may validate cannot read or write the program's files:
 * libunwind has no pipe, or its numbers still name it. */
static int pipe_ok(void)
{
	int st = __atomic_load_n(&pipe_state, __ATOMIC_ACQUIRE);
	if (st != PIPE_KNOWN)
		return st == PIPE_NONE;
	int e = errno;
	int ok = same_pipe(unw_fd[0]) && same_pipe(unw_fd[1]);
	errno = e;
	return ok;
}

int ha_unw_trace_begin(int probe[2])
{
	int st = __atomic_load_n(&pipe_state, __ATOMIC_ACQUIRE);
	probe[0] = probe[1] = -1;
	if (st != PIPE_NONE)
		return pipe_ok();
	int e = errno;
	int ok = lowest_pair(probe);
	errno = e;
	return ok;
}

void ha_unw_trace_end(const int probe[2])
{
	if (probe[0] < 0 || __atomic_load_n(&pipe_state, __ATOMIC_ACQUIRE) != PIPE_NONE)
		return;
	int e = errno;
	int r = look_at(probe);
	if (r != 0)   /* libunwind's pipe, now known; or the numbers went elsewhere */
		__atomic_store_n(&pipe_state, r == 1 ? PIPE_KNOWN : PIPE_UNKNOWN, __ATOMIC_RELEASE);
	errno = e;
}
