/* alloc/init.c — process-level state: first-call init, fork, thread exit.
 *
 * The first malloc (or the constructor below, whichever comes first) builds
 * the size-class tables and the central caches, creates the thread-exit key
 * and only then registers the fork handlers, because pthread_atfork itself
 * may allocate: by then the allocator serves that call normally.
 * Fork: prepare takes libc's stdio list lock, then every lock of ours in the
 * documented order (internal.h); parent releases them, child re-initialises
 * them.
 */
#include "alloc/internal.h"
#include <string.h>
#include <sys/auxv.h>
#include <sys/single_threaded.h>

/* glibc's stdio list lock (exported, recursive; no public prototype).  Weak:
 * a libc without them leaves the order to its own fork. */
extern void _IO_list_lock(void) __attribute__((weak));
extern void _IO_list_unlock(void) __attribute__((weak));
extern void _IO_list_resetlock(void) __attribute__((weak));

int ha_ready;
pthread_key_t ha_thread_key;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

HA_TLS unsigned ha_locks_held;

/* A fork() from a signal handler can interrupt this thread inside fork
 * itself (between prepare and parent) or while it holds one of our locks:
 * waiting for a lock then would wait for ourselves.  Such a fork takes no
 * lock; its child re-initialises them all, and only the outermost fork of a
 * thread, the one that took them, releases them in the parent. */
static HA_TLS unsigned fork_depth;   /* prepare run, parent/child not yet */
static HA_TLS int fork_locked;       /* this thread's outermost fork holds every lock */

/* glibc's fork runs the prepare handlers and only then takes the stdio list
 * lock, which fflush(NULL) holds while it waits for a stream's lock, whose
 * holder may be allocating that stream's buffer.  Taking our locks first
 * would close a cycle (forker -> fflush -> stream -> forker), so prepare
 * takes the list lock before them, as glibc orders its own malloc's locks:
 * fork's own take of it then recurses.  Only in a threaded process, as glibc
 * does: a single-threaded fork may come from a signal handler that
 * interrupted this thread inside stdio. */
static HA_TLS int fork_took_io;   /* this thread's fork holds the list lock */

static void prefork(void)
{
	unsigned depth = ++fork_depth;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (depth > 1 || ha_locks_held)
		return;
	fork_took_io = !__libc_single_threaded && _IO_list_lock;
	if (fork_took_io)
		_IO_list_lock();
	ha_prof_prefork();
	ha_tcache_prefork();
	ha_central_prefork();
	ha_spanrec_prefork();
	ha_huge_prefork();
	ha_pagemap_prefork();
	ha_meta_prefork();
	ha_mmap_prefork();
	fork_locked = 1;   /* the count stays: the parent's unlocks take it back to 0 */
}

static void postfork(int child)
{
	if (child) {
		if (!fork_locked && (fork_depth > 1 || ha_locks_held))
			child = HA_FORK_CHILD_TORN;
		else
			ha_locks_held = 0;
	} else if (!fork_locked || fork_depth > 1) {
		goto out;   /* a handler's fork: it took nothing */
	}
	ha_mmap_postfork(child);
	ha_meta_postfork(child);
	ha_pagemap_postfork(child);
	ha_huge_postfork(child);
	ha_spanrec_postfork(child);
	ha_central_postfork(child);
	ha_tcache_postfork(child);
	if (child)
		ha_keep_forget();
	ha_prof_postfork(child);
	if (fork_took_io) {
		/* a threaded fork's child has it reset by glibc already; again
		 * is harmless, and covers a libc that did not take it */
		if (child)
			_IO_list_resetlock();
		else
			_IO_list_unlock();
		fork_took_io = 0;
	}
	HA_ASSERT(child || ha_locks_held == 0);   /* every prefork lock dropped */
	fork_locked = 0;
out:
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (fork_depth)
		fork_depth--;
}

static void postfork_parent(void)
{
	postfork(HA_FORK_PARENT);
}

static void postfork_child(void)
{
	postfork(HA_FORK_CHILD);
}

/* Random bits for the profiled-block check word (alloc/compat.c): the
 * kernel's AT_RANDOM bytes mixed with an address. */
static uint64_t header_secret(void)
{
	uint64_t v = (uint64_t)(uintptr_t)&ha_ready * 0x9e3779b97f4a7c15ull;
	const unsigned char *r = (const unsigned char *)getauxval(AT_RANDOM);
	if (r) {
		uint64_t x;
		memcpy(&x, r + 8, sizeof x);
		v ^= x;
	}
	/* a cleared check word (0) must never read as a header: bits 3..31 of
	 * the secret (the flags take bits 0-2, alloc/compat.c) not all zero */
	return v | 8;
}

void ha_init_slow(void)
{
	if (__atomic_load_n(&ha_ready, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&init_lock);
	if (!ha_ready) {
		ha_size_class_init();
		ha_tcache_init();
		ha_pagemap_init();
		ha_hdr_secret = header_secret();
		ha_arena_init();
		ha_central_init();
		if (pthread_key_create(&ha_thread_key, ha_tcache_thread_exit) != 0)
			ha_fatal("cannot create the thread-exit key", NULL);
		__atomic_store_n(&ha_ready, 1, __ATOMIC_RELEASE);
		pthread_atfork(prefork, postfork_parent, postfork_child);
	}
	pthread_mutex_unlock(&init_lock);
}

void ha_alloc_init(void)
{
	ha_ensure_init();
}

__attribute__((constructor(101))) static void ha_ctor(void)
{
	ha_ensure_init();
}
