/* prof/session/session.c — a profiling session: start and stop, fork, the start
 * from HEAPPROFILE (constructor) and the exit dump (atexit).
 *
 * Owns the session's state (ha_session, prof/session/session.h), ha_prof_dump_lock,
 * the thread's re-entrancy guard (ha_prof_busy) and the fork window.  A
 * start or stop holds ha_prof_dump_lock; ha_session.running changes under
 * the threshold lock too.  Never unwinds, dladdr's or dl_iterate_phdr's
 * while holding a lock (ha_stack_init and ha_stack_calibrate run with
 * none); never calls the public malloc (raw memory only).  Lock order and
 * fork rules: prof/prof.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prof/session/session.h"

pthread_mutex_t ha_prof_dump_lock = PTHREAD_MUTEX_INITIALIZER;
HA_TLS int ha_prof_busy;
struct ha_session ha_session;
HA_TLS int ha_prof_fork_window;  /* this thread holds every lock (prefork) */

uint64_t ha_prof_dumps(void)
{
	return ha_session.written;
}

uint64_t ha_prof_samples(void)
{
	return __atomic_load_n(&ha_session.samples, __ATOMIC_RELAXED);
}

int ha_prof_running(void)
{
	return __atomic_load_n(&ha_session.running, __ATOMIC_ACQUIRE);
}

int ha_prof_running_api(void)
{
	return ha_prof_running() && !ha_session.background;
}

int64_t ha_prof_r;

int ha_prof_compat(void)
{
	return ha_session.compat;
}

uint32_t ha_prof_generation(void)
{
	return __atomic_load_n(&ha_session.gen, __ATOMIC_ACQUIRE);
}

/* prefix NULL: the file-less session of HEAP_PROFILE_HTTP alone, which
 * samples for the endpoint and writes nothing (no dumps, log, peak); with
 * background, the always-on sampling of a process where nothing was set
 * (never in compatibility mode: no block header unless asked for). */
static int start(const char *prefix, int from_env, int background)
{
	int files = prefix != NULL;
	if (!files)
		prefix = "";
	else if (!*prefix)
		return EINVAL;
	/* a start with files replaces the endpoint's file-less session */
	if (files && ha_prof_running() && ha_session.nofiles)
		ha_prof_stop();
	size_t pl = strlen(prefix);
	if (pl > HA_PREFIX_MAX) {
		ha_log("heapalloc: HEAPPROFILE prefix is too long (%zu bytes, at most %d); "
		       "not profiling\n", pl, HA_PREFIX_MAX);
		return ENAMETOOLONG;
	}
	int busy = ha_prof_busy;
	ha_prof_busy = 1;
	ha_alloc_init();
	if (!ha_prof_opt_loaded)      /* an API start before our constructor */
		ha_options_load();
	ha_stack_init();              /* dl_iterate_phdr: before any lock */
	if (files && (ha_prof_opt.format & HA_FORMAT_PPROF))
		ha_gzip_load();       /* now, not at a pre-OOM dump that could not map it */
	ha_objmap_init();
	/* the helper writes the default mode's threshold dumps: started before
	 * the books' baseline, so that its thread's own start-up memory is not
	 * part of the program's profile */
	int queue = files && !ha_prof_opt.exact_totals && (ha_prof_opt.alloc_interval > 0 ||
			ha_prof_opt.dealloc_interval > 0 || ha_prof_opt.inuse_interval > 0);
	if ((queue || (files && ha_prof_opt.timeline_ms > 0 && !ha_prof_opt.exact_totals)) &&
	    !ha_prof_running())
		ha_helper_start(ha_prof_opt.time_interval, (int)ha_prof_opt.signal, queue);
	ha_lock(&ha_prof_dump_lock);
	if (ha_session.running) {
		ha_unlock(&ha_prof_dump_lock);
		ha_prof_busy = busy;
		return EBUSY;
	}
	ha_remote_begin();            /* a reader outside skips what follows */
	int err = ha_table_init();
	if (err) {
		ha_remote_end();
		ha_unlock(&ha_prof_dump_lock);
		ha_prof_busy = busy;
		return err;
	}
	int use_pid = from_env ? (int)ha_prof_opt.use_pid : 0;
	if (strcmp(ha_session.prefix, prefix) != 0 || use_pid != ha_session.use_pid) {
		ha_kept_dumps.n = ha_kept_dumps.head = 0;     /* a new naming: the old files stay as they are */
		ha_kept_dumps.have_first = 0;
	}
	memcpy(ha_session.prefix, prefix, pl + 1);
	ha_session.use_pid = use_pid;
	ha_session.keep = ha_prof_opt.keep;
	ha_session.min_ns = ha_prof_opt.min_seconds > INT64_MAX / 1000000000 ? INT64_MAX
		   : ha_prof_opt.min_seconds * 1000000000;
	ha_session.last_thr = -1;
	ha_session.folded = ha_session.qfolded = 0;
	__atomic_store_n(&ha_session.pending, 0, __ATOMIC_SEQ_CST);
	ha_session.root_pid = ha_session.cur_pid = getpid();
	__atomic_store_n(&ha_prof_r, background ? ha_prof_opt.always_on : ha_prof_opt.sample_interval,
			 __ATOMIC_RELAXED);
	if (ha_prof_opt.seed)
		ha_sampler_seed((uint64_t)ha_prof_opt.seed);
	ha_session.nofiles = !files;
	ha_session.a_int = files ? ha_prof_opt.alloc_interval : 0;
	ha_session.d_int = files ? ha_prof_opt.dealloc_interval : 0;
	ha_session.i_int = files ? ha_prof_opt.inuse_interval : 0;
	ha_session.compat = ha_prof_opt.exact_totals != 0 && !background;
	ha_session.background = background;
	ha_books(ha_session.base, ha_session.base_req);
	ha_session.last_alloc = ha_session.last_free = ha_session.high_water = 0;
	ha_session.samples = 0;
	ha_session.rec[0] = ha_session.rec[1] = 0;
	ha_peak_reset(files ? ha_prof_opt.peak_interval : 0, ha_prof_rate());
	ha_mmaps_reset();
	clock_gettime(CLOCK_MONOTONIC, &ha_session.last_time);
	if (files && from_env && ha_prof_opt.cleanup)
		ha_naming_cleanup();
	char lp[HA_PREFIX_MAX + 64];
	ha_naming_log(lp, sizeof lp);
	if (files)
		ha_dumplog_start(lp);
	__atomic_fetch_add(&ha_session.gen, 1, __ATOMIC_RELEASE);
	ha_usdt_session_start();      /* probe-only sampling, if any, ends here */
	__atomic_store_n(&ha_session.running, 1, __ATOMIC_RELEASE);
	ha_alloc_profiling(ha_session.compat ? HA_PROF_COMPAT : HA_PROF_ON, ha_prof_records_all());
	ha_alloc_mmap_profiling(ha_prof_opt.mmap != 0 && !background);
	ha_remote_end();
	/* gperftools' line, once per process tree: a descendant started by
	 * the environment names its command in its own log instead */
	if (!files)
		;                         /* the endpoint's: no files, no line */
	else if (!from_env || !ha_prof_opt.profile_root)
		ha_log("Starting tracking the heap\n");
	else
		ha_dumplog_command(lp);
	ha_unlock(&ha_prof_dump_lock);
	if (ha_stack_calibrate(ha_prof_opt.mmap != 0)) {   /* static links only; no lock held */
		ha_lock(&ha_prof_dump_lock);
		ha_remote_begin();
		ha_books(ha_session.base, ha_session.base_req);   /* the probe's blocks do not count */
		ha_remote_end();
		ha_unlock(&ha_prof_dump_lock);
	}
	/* the helper thread runs only when something needs it: time or signal
	 * dumps, RSS dumps, a memory limit to dump before, or (above) threshold
	 * dumps to write */
	if (files && (ha_memwatch_start() || ha_prof_opt.time_interval > 0 ||
		      ha_prof_opt.signal > 0))
		ha_helper_start(ha_prof_opt.time_interval, (int)ha_prof_opt.signal, 0);
	ha_prof_busy = busy;
	return 0;
}

int ha_prof_start(const char *prefix, int from_env)
{
	return prefix ? start(prefix, from_env, 0) : EINVAL;
}

/* HEAP_PROFILE_SAMPLE_INTERVAL=0 is the off switch of the always-on
 * sampling (a session asked for, by HEAPPROFILE or the API, then samples
 * at the default interval). */
static int background_on(void)
{
	if (!ha_prof_opt_loaded)
		ha_options_load();
	return ha_prof_opt.always_on != 0;
}

void ha_prof_background(void)
{
	if (background_on() && !ha_prof_running())
		start(NULL, 1, 1);
}

void ha_prof_stop(void)
{
	int busy = ha_prof_busy;
	ha_prof_busy = 1;
	ha_lock(&ha_prof_dump_lock);
	if (ha_session.running) {
		ha_helper_flush_held();   /* a signal just before the stop keeps its dump */
		ha_prof_write_pending_locked();
		ha_alloc_mmap_profiling(0);
		ha_alloc_profiling(HA_PROF_OFF, 0);
		ha_plock_lock(&ha_prof_thr_lock);
		__atomic_store_n(&ha_session.running, 0, __ATOMIC_RELEASE);
		/* a crossing racing the stop */
		__atomic_store_n(&ha_session.pending, 0, __ATOMIC_SEQ_CST);
		ha_session.qfolded = 0;
		ha_plock_unlock(&ha_prof_thr_lock);
		ha_peak_drop();    /* a turn past this point sees the stop */
		ha_remote_begin();
		ha_table_lock();
		ha_objmap_lock_all();
		ha_objmap_destroy();
		ha_table_destroy();
		ha_objmap_unlock_all();
		ha_table_unlock();
		ha_session.background = 0;
		ha_remote_end();
	}
	ha_unlock(&ha_prof_dump_lock);
	ha_prof_busy = busy;
}

/* ------------------------------------------------------------------ */
/* fork                                                                */

void ha_prof_prefork(void)
{
	ha_prof_busy++;
	ha_prof_fork_window = 1;
	ha_stack_prefork();
	ha_lock(&ha_prof_dump_lock);
	ha_peak_prefork();
	ha_plock_lock(&ha_prof_thr_lock);
	ha_table_lock();
	ha_mmaps_lock();
	ha_objmap_lock_all();
}

void ha_prof_postfork(int child)
{
	if (child) {
		pthread_mutex_init(&ha_prof_dump_lock, NULL);
		ha_peak_postfork(1);
		ha_plock_init(&ha_prof_thr_lock);
		ha_table_postfork_child();
		ha_mmaps_postfork_child();
		ha_objmap_postfork_child();
		ha_helper_postfork_child();
		ha_names_postfork_child();
		ha_http_postfork_child();
		/* the parent's crossings and queued dump are the parent's to
		 * report and write */
		ha_session.folded = ha_session.qfolded = 0;
		__atomic_store_n(&ha_session.pending, 0, __ATOMIC_SEQ_CST);
		ha_session.last_thr = -1;
		ha_remote_end();          /* the root names the child's pid */
		/* the child keeps its parent's table (the objects are its own
		 * now too); ha_session.cur_pid != getpid() renames it at its first dump */
	} else {
		ha_objmap_unlock_all();
		ha_mmaps_unlock();
		ha_table_unlock();
		ha_plock_unlock(&ha_prof_thr_lock);
		ha_peak_postfork(0);
		ha_unlock(&ha_prof_dump_lock);
	}
	/* the torn child's prefork ran none of this */
	ha_stack_postfork(child, child != HA_FORK_CHILD_TORN);
	if (child != HA_FORK_CHILD_TORN) {
		ha_prof_fork_window = 0;
		ha_prof_busy--;
	}
}

/* ------------------------------------------------------------------ */
/* process start and exit                                              */

static void exit_leaks(void)
{
	ha_leaks_at_exit();
}

static void exit_dump(void)
{
	ha_http_exit();
	if (!ha_prof_running() || ha_session.nofiles)
		return;
	ha_helper_flush();        /* a signal just before exit keeps its dump */
	ha_prof_timeline_end();
	uint64_t t[2];
	ha_prof_totals(t);
	uint64_t inuse = ha_inuse_of(t);
	char reason[64];
	if (inuse >> 20)
		ha_snprintf(reason, sizeof reason, "Exiting, %llu MB in use",
			    (unsigned long long)(inuse >> 20));
	else if (inuse >> 10)
		ha_snprintf(reason, sizeof reason, "Exiting, %llu kB in use",
			    (unsigned long long)(inuse >> 10));
	else
		ha_snprintf(reason, sizeof reason, "Exiting, %llu bytes in use",
			    (unsigned long long)inuse);
	ha_prof_dump(reason, 0);
}

__attribute__((constructor(201))) static void ha_prof_ctor(void)
{
	ha_options_load();
	atexit(exit_leaks);           /* after the exit dump (handlers run in reverse) */
	atexit(exit_dump);
	/* HEAP_PROFILE_HTTP: not in a descendant of the process that serves
	 * (the address is its), nor where the environment is not trusted */
	int http = ha_prof_opt.http && (!ha_prof_opt.http_root ||
					ha_prof_opt.http_root == (int64_t)getpid());
	ha_remote_init();
	if (!ha_prof_opt.prefix && !http) {
		ha_prof_background();     /* nothing set: the always-on sampling */
		return;
	}
	int setuid = getuid() != geteuid() || getgid() != getegid();
	if (http && (setuid || getauxval(AT_SECURE))) {
		ha_log("heapalloc: HEAP_PROFILE_HTTP ignored in a setuid/setgid program\n");
		http = 0;
	}
	/* the endpoint's helper before the books' baseline: its thread's
	 * start-up memory is not the program's */
	int files = ha_prof_opt.prefix && !setuid;   /* the helper's time and signal dumps */
	if (http && ha_http_start(ha_prof_opt.http) != 0)
		http = 0;
	else if (http && ha_helper_start(files ? ha_prof_opt.time_interval : 0,
					 files ? (int)ha_prof_opt.signal : 0, 0) != 0) {
		ha_http_exit();               /* nobody would answer: let the address go */
		ha_http_postfork_child();
		http = 0;
	}
	if (ha_prof_opt.prefix && setuid) {
		ha_log("heapalloc: HEAPPROFILE ignored in a setuid/setgid program\n");
	} else if (ha_prof_opt.prefix) {
		if (ha_prof_start(ha_prof_opt.prefix, 1) == 0)
			ha_naming_mark_descendants();
	}
	if (http && !ha_prof_running())
		start(NULL, 1, 0);
	ha_prof_background();         /* a HEAPPROFILE that did not start */
}
