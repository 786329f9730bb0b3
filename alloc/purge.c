/* alloc/purge.c — the caches' clock: the decay step at the program's slow
 * paths (ha_purge_tick), and the purge thread, an opt-in clock of its own.
 *
 * What the caches keep, and for how long, is alloc/retain.h's.  By default
 * no clock of our own runs: each cache decides at free time what may stay
 * (ha_keep_cap) and gives back what has been idle HA_DECAY_MS at the
 * program's own slow paths.  A
 * thread of ours would make glibc's fork take its atfork lock (a fork from
 * a signal handler that interrupted fork then deadlocks), and makes
 * single-thread-only calls (unshare(CLONE_NEWUSER)) fail.
 *
 * HEAPALLOC_PURGE_THREAD=1 starts this thread instead, and the caches keep
 * more (up to their hot maximum) because it ages them out:
 *   - It starts the first time a cache holds more than its resident floor
 *     (ha_purge_kick), not at init.
 *   - While any cache holds bytes that will decay it wakes every TICK_MS
 *     and runs each cache's decay step; when none does it sleeps on a futex
 *     with no timeout, and the next cache to pass its floor wakes it.
 *   - It never allocates, runs with every signal blocked and takes
 *     heapalloc locks only through the decay steps, one at a time.
 *     pthread_create may call malloc and take glibc's fork lock, so it is
 *     started only by a caller that holds no heapalloc lock.
 *   - Fork: the child has no such thread; a child handler marks it absent
 *     and the child starts its own at its first kick.
 *   - pthread_create allocates (the new thread's TLS vector) through
 *     malloc: those bytes are taken out of the books (ha_books_own_begin),
 *     so the profiles' totals count the program's heap only.  Profiling,
 *     always on by default, no longer keeps the thread from starting.
 *   - Until it runs the caches behave as by default; a failed start is
 *     retried after RETRY_MS.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* pthread_attr_setsigmask_np */
#endif
#include "alloc/internal.h"
#include "alloc/env.h"
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
	more |= ha_tcache_decay(now);
	/* The quiet: no span used for a decay period.  Then, after every
	 * cache has decayed, cold spans go back to mimalloc and its empty
	 * segments to the kernel, and so do the page map's and the span
	 * records' unused pages.  Not before: in a busy program they would
	 * be given back and faulted in again tick after tick, each give-back
	 * a TLB shootdown on every core the program runs on. */
	if (ha_central_pool_idle(now)) {
		uint64_t lhot, lcold, phot, pcold;
		ha_arena_cache_bytes(&lhot, &lcold);
		ha_central_pool_bytes(&phot, &pcold);
		if (lcold | pcold) {
			ha_arena_decommit_now(1);
			ha_central_release_cold();
			ha_arena_collect();
			ha_arena_decommit_now(0);
		}
		ha_pagemap_decay(now);
		ha_spanrec_decay();
	}
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
		/* read at the first kick, when the environment is surely set up,
		 * a boolean as every variable's (alloc/env.c: 1, true, yes, on...;
		 * no AT_SECURE concern: a thread that ages caches out grants
		 * nothing); junk is said as the profiler's table says it */
		const char *v = ha_env_get("HEAPALLOC_PURGE_THREAD");
		int64_t on = 0;
		if (v && ha_env_parse_bool(v, &on) && !warned++) {   /* once, children included */
			char shown[80];
			ha_snprintf(shown, sizeof shown, "%s", v);
			for (char *c = shown; *c; c++)
				if (*c == '\n' || *c == '\r')
					*c = '?';
			ha_log("heapalloc: HEAPALLOC_PURGE_THREAD=\"%s\" is not a boolean; using "
			       "false\n", shown);
		}
		if (!on) {
			__atomic_store_n(&state, DISABLED, __ATOMIC_RELEASE);
			return;
		}
	}
	if (!atfork_done && pthread_atfork(NULL, NULL, purge_child) == 0)
		atfork_done = 1;
	pthread_attr_t attr;
	pthread_t t;
	sigset_t all;
	/* glibc mallocs the attribute's sigmask and the thread's TLS: ours */
	int64_t mark[5];
	ha_books_own_begin(mark);
	int rc = pthread_attr_init(&attr);
	if (rc == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, STACK_BYTES);
		/* born with every signal blocked; the caller's mask untouched */
		sigfillset(&all);
		rc = pthread_attr_setsigmask_np(&attr, &all);
		if (rc == 0)
			rc = pthread_create(&t, &attr, purge_main, NULL);
		pthread_attr_destroy(&attr);
	}
	ha_books_own_end(mark);
	if (rc != 0)
		failed_at = ha_now_ms();
	__atomic_store_n(&state, rc == 0 ? RUNNING : FAILED, __ATOMIC_RELEASE);
}

int ha_purge_running(void)
{
	return __atomic_load_n(&state, __ATOMIC_RELAXED) == RUNNING;
}

static uint32_t ticked;   /* ms clock of the last ha_purge_tick step */

void ha_purge_tick(uint32_t now)
{
	uint32_t last = __atomic_load_n(&ticked, __ATOMIC_RELAXED);
	if ((uint32_t)(now - last) < HA_DECAY_MS / 8)
		return;
	if (!__atomic_compare_exchange_n(&ticked, &last, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;   /* another thread runs this step */
	ha_keep_fade(now);
	decay_all(now);
}

void ha_purge_kick(void)
{
	int st = __atomic_load_n(&state, __ATOMIC_RELAXED);
	if (HA_LIKELY(st == DISABLED))
		return;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);   /* the cache's bytes, then asleep */
	if (HA_LIKELY(st == RUNNING)) {
		if (__atomic_load_n(&asleep, __ATOMIC_RELAXED) &&
		    __atomic_exchange_n(&asleep, 0, __ATOMIC_SEQ_CST))
			syscall(SYS_futex, &asleep, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		return;
	}
	if (!ha_locks_held)
		start();
}
