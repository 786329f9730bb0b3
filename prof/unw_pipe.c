/* prof/unw_pipe.c — libunwind's address-validation pipe, kept from touching
 * the program's files.
 *
 * libunwind 1.6 (Debian 12) opens a pipe at its one-time set-up and, when
 * a walk must validate an address (a frame without unwind info, a signal
 * frame: its fast trace's fallback), reads a byte from the pipe's read end
 * and writes one byte of the address to its write end, by fd number.  A
 * program that closes every descriptor it did not open (closefrom(3), as
 * daemons and ssh do) and then opens files gets those numbers back, and
 * the next validation reads a byte out of one file and writes one into the
 * other (gperftools #1283).  With sampling on in every process that risk is
 * everywhere, so the unwinder calls libunwind's fast trace only while both
 * numbers still name the pipe libunwind opened: noted here when libunwind
 * starts, checked (two fstat calls) before each fast trace.  When the pipe
 * is gone or unknown, a walk ends at the frame the rows cannot describe.
 * A thread that closes and reopens a number between the check and the
 * write is not covered: libunwind reads its numbers unlocked.
 */
#define _GNU_SOURCE 1   /* pipe2 */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include "prof/prof.h"
#include "prof/frame_rules.h"
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static int unw_fd[2] = { -1, -1 };
static dev_t unw_dev;
static ino_t unw_ino;

static int same_pipe(int fd)
{
	struct stat st;
	return fd >= 0 && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && st.st_dev == unw_dev &&
	       st.st_ino == unw_ino;
}

void ha_unw_start(void)
{
	int e = errno, probe[2];
	/* libunwind's pipe2 takes the lowest free numbers: learn them first */
	int have = pipe2(probe, O_CLOEXEC) == 0;
	if (have) {
		close(probe[0]);
		close(probe[1]);
	}
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
	struct stat a, b;
	/* as libunwind opens it: one pipe, read end first, non-blocking,
	 * close-on-exec */
	int fl0 = have ? fcntl(probe[0], F_GETFL) : -1, fl1 = have ? fcntl(probe[1], F_GETFL) : -1;
	if (have && fstat(probe[0], &a) == 0 && fstat(probe[1], &b) == 0 && S_ISFIFO(a.st_mode) &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino && fl0 >= 0 && fl1 >= 0 &&
	    (fl0 & O_ACCMODE) == O_RDONLY && (fl1 & O_ACCMODE) == O_WRONLY &&
	    (fl0 & fl1 & O_NONBLOCK) && (fcntl(probe[0], F_GETFD) & fcntl(probe[1], F_GETFD) & FD_CLOEXEC)) {
		unw_dev = a.st_dev;
		unw_ino = a.st_ino;
		unw_fd[0] = probe[0];
		unw_fd[1] = probe[1];
	}
	/* otherwise libunwind had started before us, or another thread took
	 * the numbers: the pipe stays unknown and the fast trace unused */
	errno = e;
}

int ha_unw_pipe_ok(void)
{
	int e = errno;
	int ok = unw_fd[0] >= 0 && same_pipe(unw_fd[0]) && same_pipe(unw_fd[1]);
	errno = e;
	return ok;
}
