/* alloc/lock.h — the lock helpers of the allocator, which the profiler uses
 * too.  Never allocates. */
#ifndef HA_ALLOC_LOCK_H
#define HA_ALLOC_LOCK_H
#include <pthread.h>
#include "alloc/base.h"

/* Every allocator and profiler lock is taken through these, which count the
 * locks this thread holds: a fork() from a signal handler that interrupted
 * this thread must not wait for them (init.c, prefork).  The signal fences
 * keep the count ahead of the lock as the same thread's handler sees it. */
extern HA_TLS unsigned ha_locks_held;

static inline void ha_lock(pthread_mutex_t *m)
{
	ha_locks_held++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	pthread_mutex_lock(m);
}

/* ha_lock that gives up at once when m is taken: 1 held, 0 not. */
static inline int ha_trylock(pthread_mutex_t *m)
{
	ha_locks_held++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (pthread_mutex_trylock(m) == 0)
		return 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	ha_locks_held--;
	return 0;
}

static inline void ha_unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	ha_locks_held--;
}

#endif
