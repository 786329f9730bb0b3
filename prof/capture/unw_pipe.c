/* prof/capture/unw_pipe.c — libunwind started without its address-validation pipe.
 *
 * libunwind 1.6 (Debian 12) opens a pipe at its one-time set-up and, when
 * a walk must validate an address (unw_step, which Debian's build runs
 * with conservative checks on every local step, and the fast trace
 * unw_backtrace), reads a byte from the read end and writes one byte of
 * the address to the write end, by fd number.  A program that closes every
 * descriptor it did not open (closefrom(3)) and then opens files gets
 * those numbers, and the next validation reads a byte out of one file and
 * writes one into the other (gperftools #1283).
 *
 * The profiler calls neither: its walks (frame_rules.c) use only
 * unw_init_local, unw_reg_states_iterate, unw_apply_reg_state and the
 * register getters, none of which validate, and check their own reads
 * where no unwind info vouches for them.  What is left is the pipe the
 * set-up opens: our first call into libunwind runs here, once, with this
 * thread's pipe2 refusing (EMFILE) the one pipe libunwind asks for
 * (close-on-exec, non-blocking), so libunwind keeps (-1, -1) and opens one
 * only if the program itself later makes a validating call.  Nothing of
 * the process changes: no limit, no signal mask, no descriptor; another
 * thread's pipe2 is never refused.  libunwind blocks every signal of this
 * thread for its set-up, so a handler cannot meet the refusal either, but
 * in the few instructions before libunwind's lock.
 */
#define _GNU_SOURCE 1   /* pipe2 */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include "prof/prof.h"
#include "prof/capture/frame_rules.h"
#include "prof/unit.h"   /* ha_unw_refused, for the unit test build */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { UNW_COLD, UNW_STARTING };
int ha_unw_state = UNW_COLD;      /* HA_UNW_READY once set up */
static HA_TLS int refusing;       /* this thread runs libunwind's set-up */
HA_TESTABLE int ha_unw_refused;   /* pipes refused (0 or 1) */

/* libc's pipe2, but for the one libunwind's set-up asks while refusing. */
HA_EXPORT int pipe2(int fd[2], int flags)
{
	if (HA_UNLIKELY(refusing) && flags == (O_CLOEXEC | O_NONBLOCK)) {
		refusing = 0;
		__atomic_store_n(&ha_unw_refused, 1, __ATOMIC_RELAXED);
		errno = EMFILE;
		return -1;
	}
	return (int)syscall(SYS_pipe2, fd, flags);
}

void ha_unw_start_slow(void)
{
	int st = UNW_COLD;
	if (!__atomic_compare_exchange_n(&ha_unw_state, &st, UNW_STARTING, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		/* another thread runs the set-up: libunwind's own lock would
		 * make this one wait too, but it must not run it unrefused */
		while (__atomic_load_n(&ha_unw_state, __ATOMIC_ACQUIRE) != HA_UNW_READY)
			sched_yield();
		return;
	}
	int e = errno;
	refusing = 1;
	/* the set-up (its DWARF cache, the local address space, the pipe)
	 * and the caching policy behind the row lookups */
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
	refusing = 0;
	errno = e;
	__atomic_store_n(&ha_unw_state, HA_UNW_READY, __ATOMIC_RELEASE);
}
