/* alloc/purge.c — the purge thread: the clock the caches decay by.
 *
 * Freed memory stays resident for a while so that a program that allocates
 * again does not fault it back in: free spans (central.c), freed large
 * blocks (arena.c), free huge pages (huge.c).  Each gives what has been idle
 * for HA_DECAY_MS back to the kernel, but a clock read at the allocator's
 * slow paths never ticks for a program that sleeps, or whose allocations
 * all stay within its thread caches; such a program kept every cached byte
 * for good.  This thread is the clock.
 *
 *   - It starts the first time a cache holds more than its resident floor
 *     (ha_purge_kick), not at init: most programs never need it.
 *   - While any cache holds bytes that will decay it wakes every TICK_MS
 *     and runs each cache's decay step; when none does it sleeps on a futex
 *     with no timeout (an idle process sees no wake-ups), and the next
 *     cache to pass its floor wakes it: a fence and a load on that cache's
 *     slow path, a system call only when the thread was asleep.
 *   - It never allocates, runs with every signal blocked (the program's
 *     handlers never run on it) and takes heapalloc locks only through the
 *     decay steps, one at a time.  pthread_create and pthread_atfork may
 *     call malloc and take glibc's fork lock, so the thread is started only
 *     by a caller that holds no heapalloc lock.
 *   - Fork: the child has no such thread.  A child handler marks it absent
 *     and the child starts its own at its first kick.  Caches the thread
 *     was releasing at the fork (taken off their lists, not yet put back)
 *     stay out of the child's lists: address space only, never reused.
 *   - Not started while profiling is on: pthread_create allocates (the new
 *     thread's TLS vector) through malloc, and those bytes would show in
 *     the profile and its exact totals as if the program had asked for
 *     them.  A thread started before profiling began keeps running.
 *   - HEAPALLOC_PURGE_THREAD=0 keeps a program single-threaded: never
 *     started (read at the first kick, when the environment is surely set
 *     up; turning a thread off needs no AT_SECURE guard).
 *   - Until it runs (profiling, switched off, or the thread cannot be
 *     created) the caches decay at their own slow paths, and malloc_trim
 *     gives everything back at once; a failed start is retried after
 *     RETRY_MS.
 */
#include "alloc/internal.h"
#include <linux/futex.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

#define TICK_MS 250
#define RETRY_MS 10000
#define STACK_BYTES ((size_t)64 << 10)

enum { ABSENT, STARTING, RUNNING, FAILED, DISABLED };
static int state;            /* ABSENT .. DISABLED, atomic */
static int asleep;           /* futex word: 1 while the thread waits on it */
static uint32_t failed_at;   /* ms clock of the last failed start */
static int atfork_done;
static int warned;           /* a bad HEAPALLOC_PURGE_THREAD was reported */

/* Every cache's decay step: nonzero while one still holds bytes that
 * will decay (come back later). */
static int decay_all(uint32_t now)
{
	int more = ha_central_decay(now);
	more |= ha_arena_decay(now);
	more |= ha_huge_decay(now);
	return more;
}

static void *purge_main(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "heapalloc-purge", 0, 0, 0);
	for (;;) {
		if (decay_all(ha_now_ms())) {
			struct timespec t = { 0, TICK_MS * 1000000L };
			nanosleep(&t, NULL);
			continue;
		}
		/* announce the sleep, then look once more: a cache that passed
		 * its floor after its step looked either sees asleep == 1 and
		 * wakes us, or is seen here (both sides fence: store, then load) */
		__atomic_store_n(&asleep, 1, __ATOMIC_SEQ_CST);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (!decay_all(ha_now_ms()))
			while (__atomic_load_n(&asleep, __ATOMIC_ACQUIRE))
				syscall(SYS_futex, &asleep, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
		__atomic_store_n(&asleep, 0, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* In the child of a fork: the thread did not come along. */
static void purge_child(void)
{
	if (state != DISABLED)
		state = ABSENT;
	asleep = 0;
}

static void start(void)
{
	int st = __atomic_load_n(&state, __ATOMIC_RELAXED);
	if (st == DISABLED || (st == FAILED && (uint32_t)(ha_now_ms() - failed_at) < RETRY_MS))
		return;
	if (!__atomic_compare_exchange_n(&state, &st, STARTING, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return;   /* someone else is starting it (maybe this thread, inside pthread_create) */
	if (st == ABSENT) {
		const char *v = getenv("HEAPALLOC_PURGE_THREAD");
		if (v && v[0] == '0' && !v[1]) {
			__atomic_store_n(&state, DISABLED, __ATOMIC_RELEASE);
			return;
		}
		if (v && !(v[0] == '1' && !v[1]) && !warned++)   /* once, children included */
			ha_log("heapalloc: HEAPALLOC_PURGE_THREAD=%s is not 0 or 1; "
			       "the purge thread stays on\n", v);
	}
	if (!atfork_done && pthread_atfork(NULL, NULL, purge_child) == 0)
		atfork_done = 1;
	pthread_attr_t attr;
	pthread_t t;
	sigset_t all, old;
	int rc = pthread_attr_init(&attr);
	if (rc == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, STACK_BYTES);
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);   /* the thread inherits it */
		rc = pthread_create(&t, &attr, purge_main, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&attr);
	}
	if (rc != 0)
		failed_at = ha_now_ms();
	__atomic_store_n(&state, rc == 0 ? RUNNING : FAILED, __ATOMIC_RELEASE);
}

void ha_purge_kick(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);   /* the cache's bytes, then asleep */
	if (HA_LIKELY(__atomic_load_n(&state, __ATOMIC_RELAXED) == RUNNING)) {
		if (__atomic_load_n(&asleep, __ATOMIC_RELAXED) &&
		    __atomic_exchange_n(&asleep, 0, __ATOMIC_SEQ_CST))
			syscall(SYS_futex, &asleep, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		return;
	}
	if (!ha_locks_held && ha_hot.prof_mode == HA_PROF_OFF)
		start();
}
