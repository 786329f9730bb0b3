/* prof/session/helper.c — the helper thread: time dumps, signal dumps, threshold
 * dumps queued by allocating threads (triggers.c), the dump log's timeline
 * rows (dump.c), and the polling of memwatch.c (RSS growth, the pre-OOM
 * dump).
 *
 * A signal handler may not take locks or allocate, so the HEAPPROFILESIGNAL
 * handler only writes one byte to a non-blocking pipe (async-signal-safe)
 * and chains to the handler that was installed before it, if any.  The
 * helper thread polls the pipe with a timeout equal to the time left until
 * the next HEAP_PROFILE_TIME_INTERVAL dump, and writes every dump itself:
 * one dump per signal delivered (none are skipped while another dump is
 * being written, they queue in the pipe), and time dumps every N seconds
 * from the start (not at once, unlike gperftools).
 * A thread that crosses a threshold queues its dump and writes a byte to
 * the same pipe (ha_helper_wake), so malloc returns at once; a full pipe
 * loses nothing, the helper is awake already.
 * A delivered signal is also counted (pending): whoever claims it writes its
 * dump, the helper when it reads the byte or the exit dump first if the
 * process exits before the helper ran, so a signal right before exit is
 * never lost nor dumped twice.
 * After fork the child has no helper thread and must not share the
 * parent's pipe: postfork closes it, and the child starts no thread from
 * inside malloc (a child on its way to exec, or one that keeps to one
 * thread, stays as it is).  It runs as a process whose helper could not
 * start: its crossings write their own dumps, a signal delivered to it is
 * dumped when it stops profiling or exits; time, RSS and timeline dumps
 * are its parent's alone.  A session it starts itself starts a helper.
 * The helper never samples its own allocations (ha_prof_busy stays set on
 * it).
 * HEAP_PROFILE_HTTP's sockets (http_conn.c) are polled in the same loop: the
 * loop's timeout is also the nearest connection deadline or delta's end.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prof/prof.h"

static int pipe_rd = -1, pipe_wr = -1;
static int64_t interval;      /* seconds, 0 = no time dumps */
static int signo;
static struct sigaction old_action;
static int installed;
static pid_t helper_pid;      /* process that owns the running helper */
static int queue;             /* writes queued threshold dumps */
static int pending;           /* signals delivered, not yet dumped (atomic) */

/* Take one delivered signal's dump for the caller; 0 when none is left. */
static int claim(void)
{
	int n = __atomic_load_n(&pending, __ATOMIC_ACQUIRE);
	while (n > 0)
		if (__atomic_compare_exchange_n(&pending, &n, n - 1, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return 1;
	return 0;
}

static void on_signal(int sig, siginfo_t *info, void *uc)
{
	int saved = errno;
	__atomic_fetch_add(&pending, 1, __ATOMIC_RELEASE);
	int fd = __atomic_load_n(&pipe_wr, __ATOMIC_RELAXED);
	if (fd >= 0) {
		char c = 's';
		ssize_t w = write(fd, &c, 1);
		(void)w;
	}
	errno = saved;
	if (old_action.sa_flags & SA_SIGINFO) {
		if (old_action.sa_sigaction)
			old_action.sa_sigaction(sig, info, uc);
	} else if (old_action.sa_handler != SIG_DFL && old_action.sa_handler != SIG_IGN &&
		   old_action.sa_handler) {
		old_action.sa_handler(sig);
	}
}

static int64_t ms_until(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	int64_t ns = (int64_t)(t->tv_sec - now.tv_sec) * 1000000000 + (t->tv_nsec - now.tv_nsec);
	int64_t ms = (ns + 999999) / 1000000;     /* up: never wake before t */
	return ms < 0 ? 0 : ms;
}

static void *helper_main(void *arg)
{
	int rd = (int)(intptr_t)arg;
	ha_prof_busy = 1;
	sigset_t all;
	sigfillset(&all);
	/* signals go elsewhere; blocked here rather than through the
	 * attributes, whose sigmask extension glibc mallocs */
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	struct timespec next, row;
	clock_gettime(CLOCK_MONOTONIC, &next);
	row = next;
	next.tv_sec += interval;
	for (;;) {
		struct pollfd pfd[1 + HA_HTTP_NFDS] = { { rd, POLLIN, 0 } };
		int64_t to = interval > 0 ? ms_until(&next) : -1;
		int watch = ha_memwatch_period_ms();
		if (watch > 0 && (to < 0 || to > watch))
			to = watch;
		int64_t tick = ha_prof_timeline_on() ? ha_prof_opt.timeline_ms : 0;
		if (tick > 0 && (to < 0 || to > ms_until(&row)))
			to = ms_until(&row);
		int nh = ha_http_poll_set(pfd + 1, HA_HTTP_NFDS, &to);
		int n = poll(pfd, 1 + (nfds_t)nh, to > INT32_MAX ? INT32_MAX : (int)to);
		if (n < 0 && errno != EINTR)
			break;
		if (n > 0 && pfd[0].revents) {
			char buf[64];
			ssize_t k = read(rd, buf, sizeof buf);
			if (k == 0)
				break;            /* pipe closed (fork child cleanup) */
			ha_helper_flush();        /* the bytes wake; pending counts */
			ha_prof_write_pending();
		}
		if (nh)
			ha_http_poll_done(pfd + 1, n > 0 ? nh : 0);
		if (watch > 0)
			ha_memwatch_poll();
		if (tick > 0 && ms_until(&row) == 0) {
			ha_prof_timeline_row();
			clock_gettime(CLOCK_MONOTONIC, &row);
			row.tv_nsec += (long)(tick % 1000) * 1000000;
			row.tv_sec += tick / 1000 + row.tv_nsec / 1000000000;
			row.tv_nsec %= 1000000000;
		}
		if (interval > 0 && ms_until(&next) == 0)
			ha_prof_time_dump(interval, &next);
	}
	/* gone (poll failed): crossings write their own dumps from now on */
	__atomic_store_n(&helper_pid, 0, __ATOMIC_RELEASE);
	return NULL;
}

static int spawn(void)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
		return errno;
	/* the read side blocks in poll only, so non-blocking reads are fine */
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	int err = pthread_create(&t, &a, helper_main, (void *)(intptr_t)fds[0]);
	pthread_attr_destroy(&a);
	if (err) {
		close(fds[0]);
		close(fds[1]);
		return err;
	}
	pipe_rd = fds[0];
	/* the owner before the pipe: ha_helper_wake checks both */
	__atomic_store_n(&helper_pid, getpid(), __ATOMIC_RELEASE);
	__atomic_store_n(&pipe_wr, fds[1], __ATOMIC_RELEASE);
	return 0;
}

int ha_helper_start(int64_t secs, int sig, int q)
{
	queue |= q;
	if (helper_pid == getpid()) {
		/* already running: wake it to pick up a new memwatch period (a
		 * byte that finds no pending signal dumps nothing) */
		int fd = __atomic_load_n(&pipe_wr, __ATOMIC_RELAXED);
		char c = 'w';
		if (fd >= 0 && write(fd, &c, 1) < 0) {
			/* full pipe: the helper wakes anyway */
		}
		return 0;
	}
	interval = secs;
	signo = sig;
	int err = spawn();
	if (err) {
		ha_log("heapalloc: cannot start the profiler's helper thread (errno %d)\n", err);
		return err;
	}
	if (sig > 0 && !installed) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = on_signal;
		sa.sa_flags = SA_SIGINFO | SA_RESTART;
		sigemptyset(&sa.sa_mask);
		if (sigaction(sig, &sa, &old_action) != 0) {
			ha_log("heapalloc: cannot handle signal %d (errno %d)\n", sig, errno);
			return errno;
		}
		installed = 1;
	}
	return 0;
}

void ha_helper_postfork_child(void)
{
	/* the thread did not survive the fork; the pipe is the parent's */
	int wr = pipe_wr;
	__atomic_store_n(&pipe_wr, -1, __ATOMIC_RELEASE);
	if (wr >= 0)
		close(wr);
	if (pipe_rd >= 0)
		close(pipe_rd);
	pipe_rd = -1;
	helper_pid = 0;
	__atomic_store_n(&pending, 0, __ATOMIC_RELAXED);   /* the parent's to dump */
}

int ha_helper_wake(void)
{
	int fd = __atomic_load_n(&pipe_wr, __ATOMIC_ACQUIRE);
	if (fd < 0 || __atomic_load_n(&helper_pid, __ATOMIC_ACQUIRE) != getpid())
		return ESRCH;
	int saved = errno;
	char c = 'd';
	if (write(fd, &c, 1) < 0) {
		/* EAGAIN: a full pipe, the helper wakes anyway */
	}
	errno = saved;
	return 0;
}

/* Signals are claimed under the dump lock, which ha_prof_stop holds while
 * it flushes what is left and ends the session: a signal delivered before
 * the stop is dumped once, never claimed by the helper and then found the
 * session gone. */
void ha_helper_flush_held(void)
{
	while (claim())
		ha_prof_dump_held("signal");
}

void ha_helper_flush(void)
{
	ha_prof_dump_holding(ha_helper_flush_held);
}
