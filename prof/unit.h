/* prof/unit.h — what the unit tier reaches inside prof/ files: the types a
 * file shares with its unit test, and, in the test build (-DHA_TESTING,
 * tests/unit/unit.am), the statics it exposes there (HA_TESTABLE, static in
 * the library).  Included by those files and their tests only.
 */
#ifndef HA_PROF_UNIT_H
#define HA_PROF_UNIT_H

#include "prof/prof.h"

/* ---- stats.c: the walk of /proc/self/smaps (tests/unit/prof_smaps) ---- */
#define HA_STATS_TOP 8            /* largest resident mappings kept, by path */
#define HA_STATS_PATH_CAP 200

typedef struct ha_stats_region {
	uint64_t rss;
	size_t len;               /* of path: compared before the bytes */
	char path[HA_STATS_PATH_CAP];
} ha_stats_region;

#define HA_STATS_OWN_RANGES 64

typedef struct ha_proc_mem {
	uint64_t rss, anon, file_rss, shmem, swap;   /* /proc/self/status */
	ha_stats_region top[HA_STATS_TOP];
	uint64_t stack;                               /* smaps: the main thread's [stack] */
	uint64_t tstacks;                             /* smaps: the other threads' stacks */
	uint64_t files;                               /* smaps: mappings of files, with
							 * their private copies (data) */
	uint64_t arena;                               /* smaps: mimalloc's mappings */
	ha_stats_region cur;                          /* smaps: the run being summed */
	uint64_t anon_all;
	int have_cur;
	/* the mapping being read: a thread's stack is an anonymous rw-p
	 * mapping right above an anonymous ---p guard (glibc's layout) */
	uintptr_t prev_hi;
	int prev_guard, in_stack, in_file, in_own;
	/* mimalloc's mappings, whose ---p reserve is no guard */
	uintptr_t own[HA_STATS_OWN_RANGES][2];
	unsigned nown;
} ha_proc_mem;

/* ---- memwatch.c: the limit the pre-OOM dump watches (tests/unit/prof_memwatch) */
#define HA_MEMWATCH_PATH_CAP 512
enum { HA_LIM_NONE, HA_LIM_CG2, HA_LIM_CG1, HA_LIM_AS };
typedef struct ha_memwatch {
	int64_t rss_step;         /* HEAP_PROFILE_RSS_INTERVAL, 0 off */
	uint64_t rss_base;        /* RSS at the start or the last RSS dump */
	int kind;                 /* HA_LIM_*: which limit applies */
	uint64_t limit, threshold;  /* bytes; threshold = fraction of limit */
	char usage_path[HA_MEMWATCH_PATH_CAP];  /* the cgroup's usage file, "" = use RSS */
	int oom_done;             /* the pre-OOM dump is written once */
	void *reserve;
} ha_memwatch;

#ifdef HA_TESTING
/* stats.c */
void each_line(int fd, void (*fn)(const char *, size_t, void *), void *arg);
void smaps_line(const char *l, size_t n, void *arg);
void keep_top(ha_proc_mem *m, const ha_stats_region *r);
void smaps_walk(int fd, ha_proc_mem *m);
/* memwatch.c */
extern const char *cg_self, *cg_root;   /* where the cgroups are read */
extern ha_memwatch watch;
void find_cgroup_limits(void);
void oom_check(uint64_t as, uint64_t rss);
/* frame_rules.c */
extern unsigned learned_at;   /* frames learned by learn_at */
extern unsigned uncached;     /* frames stepped without the table */
extern unsigned signal_steps; /* signal frames stepped by their record */
extern int no_vm_readv;       /* read_checked's futex check instead */
int read_checked(uintptr_t at, void *out, size_t len);
/* unw_pipe.c */
extern int ha_unw_refused;    /* libunwind's set-up pipe refused */
/* stack.c */
extern unsigned replayed;     /* walks replayed from the thread's last */
#endif

#endif
