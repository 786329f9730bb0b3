/* alloc/lock.h — the lock helpers of the allocator, which the profiler uses
 * too: ha_lock over a pthread mutex, ha_plock (a futex lock for the
 * profiler's short sections), and ha_held_begin/end for anything else a
 * thread holds that a fork must not wait for.  Never allocates. */
#ifndef HA_ALLOC_LOCK_H
#define HA_ALLOC_LOCK_H
#include <errno.h>
#include <pthread.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "alloc/base.h"
#include "alloc/debug.h"

/* Every allocator and profiler lock is taken through these, which count the
 * locks this thread holds: a fork() from a signal handler that interrupted
 * this thread must not wait for them (init.c, prefork).  The signal fences
 * keep the count ahead of the lock as the same thread's handler sees it. */
extern HA_TLS unsigned ha_locks_held;

/* Count one more (fewer) lock held by this thread, for a lock or a critical
 * section that is not a pthread mutex (ha_plock below; the profiler's
 * unwind gate, prof/capture/stack.c).  held_begin before taking it, held_end after
 * dropping it. */
static inline void ha_held_begin(void)
{
	ha_locks_held++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static inline void ha_held_end(void)
{
	HA_ASSERT(ha_locks_held > 0);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	ha_locks_held--;
}

static inline void ha_lock(pthread_mutex_t *m)
{
	ha_held_begin();
	pthread_mutex_lock(m);
}

/* ha_lock that gives up at once when m is taken: 1 held, 0 not. */
static inline int ha_trylock(pthread_mutex_t *m)
{
	ha_held_begin();
	if (pthread_mutex_trylock(m) == 0)
		return 1;
	ha_held_end();
	return 0;
}

static inline void ha_unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
	ha_held_end();
}

/* ha_plock: the profiler's short locks (table, object-map stripes, peak,
 * thresholds, mappings).
 * A futex lock: one compare-and-swap to take it, one exchange to drop it
 * when nobody waits (pthread_mutex_lock + unlock cost ~55 instructions, and
 * a sample and a sampled free each take one of these).  0 free, 1 held,
 * 2 held with possible waiters.  A short spin, then sleep in the kernel.
 * Not recursive; fork: the prepare handler takes them all, the child
 * re-initialises them (ha_plock_init). */
typedef struct ha_plock { int v; } ha_plock;
#define HA_PLOCK_INIT { 0 }

static inline void ha_plock_init(ha_plock *l)
{
	__atomic_store_n(&l->v, 0, __ATOMIC_RELAXED);
}

static __attribute__((noinline, cold, unused)) void ha_plock_slow(ha_plock *l)
{
	for (int i = 0; i < 64; i++) {
		int c = 0;
		if (__atomic_load_n(&l->v, __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(&l->v, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return;
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#elif defined(__aarch64__)
		__asm__ volatile("yield" ::: "memory");   /* the spin-wait hint */
#else
		__asm__ volatile("" ::: "memory");
#endif
	}
	/* from here on we may be sleeping, so whoever drops it must wake */
	int e = errno;
	while (__atomic_exchange_n(&l->v, 2, __ATOMIC_ACQUIRE) != 0)
		syscall(SYS_futex, &l->v, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
	errno = e;
}

static __attribute__((noinline, cold, unused)) void ha_plock_wake(ha_plock *l)
{
	int e = errno;
	syscall(SYS_futex, &l->v, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	errno = e;
}

static inline void ha_plock_lock(ha_plock *l)
{
	int c = 0;
	ha_held_begin();
	if (HA_UNLIKELY(!__atomic_compare_exchange_n(&l->v, &c, 1, 0, __ATOMIC_ACQUIRE,
						     __ATOMIC_RELAXED)))
		ha_plock_slow(l);
}

static inline void ha_plock_unlock(ha_plock *l)
{
	int was = __atomic_exchange_n(&l->v, 0, __ATOMIC_RELEASE);
	HA_ASSERT(was == 1 || was == 2);   /* held (by us: the lock is not recursive) */
	if (HA_UNLIKELY(was == 2))
		ha_plock_wake(l);
	ha_held_end();
}

#endif
