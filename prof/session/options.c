/* prof/session/options.c — every profiler switch, in ONE table, with ONE parser.
 *
 * Owns: ha_prof_opt; the grammar of each kind of value is alloc/env.c's.
 * Reads straight from `environ` (never getenv: it may be
 * called while libc is still starting, and must not allocate).  A value that
 * does not parse gets one stderr line naming the variable, the bad value and
 * the value used instead, and the default.  gperftools' names and defaults
 * (docs/heap-profile-spec.md §5); heapalloc accepts more (size
 * suffixes such as 64M, signal names such as SIGUSR2), never less.
 * Never allocates.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "prof/prof.h"
#include "alloc/env.h"

#include <errno.h>
#include <string.h>

extern char **environ;

ha_prof_options ha_prof_opt;
int ha_prof_opt_loaded;

typedef enum { OPT_STR, OPT_SIZE, OPT_SECONDS, OPT_COUNT, OPT_BOOL, OPT_SIGNAL,
	       OPT_FORMAT, OPT_FRACTION } opt_type;

typedef struct opt_row {
	const char *name;
	opt_type type;
	int64_t def;
	int64_t *var;             /* numeric options */
	const char **str;         /* OPT_STR */
	int64_t *present;         /* set to 1 when the variable exists, or NULL */
} opt_row;
/* A row's description: read from this source by tools/gen-options, never
 * compiled into the library. */
#define DOC(markdown)

/* The table, and the one place each variable is described (DOC, in the
 * README's Markdown): tools/gen-options writes the README's table,
 * heapalloc(3)'s ENVIRONMENT and the command's help (tools/ha_options.py)
 * from it; tests/integration/options_table.sh fails when one of them is stale. */
static const opt_row rows[] = {
	{ "HEAPPROFILE", OPT_STR, 0, NULL, &ha_prof_opt.prefix, NULL,
	  DOC("file prefix; set and non-empty turns profiling on at start") },
	{ "HEAP_PROFILE_SAMPLE_INTERVAL", OPT_SIZE, 2097152,
	  &ha_prof_opt.sample_interval, NULL, &ha_prof_opt.sample_interval_set,
	  DOC("mean bytes between samples (tcmalloc's 2 MiB), for the always-on sampling and a "
	      "session alike; 1 records every allocation; 0 turns the always-on sampling off (a "
	      "session then asked for samples at the default)") },
	{ "HEAP_PROFILE_ALLOCATION_INTERVAL", OPT_SIZE, 1073741824,
	  &ha_prof_opt.alloc_interval, NULL, NULL,
	  DOC("dump every N bytes allocated; 0 = off") },
	{ "HEAP_PROFILE_DEALLOCATION_INTERVAL", OPT_SIZE, 0,
	  &ha_prof_opt.dealloc_interval, NULL, NULL,
	  DOC("dump every N bytes freed; 0 = off") },
	{ "HEAP_PROFILE_INUSE_INTERVAL", OPT_SIZE, 104857600,
	  &ha_prof_opt.inuse_interval, NULL, NULL,
	  DOC("dump when in-use bytes exceed the last high-water mark by N; 0 = off") },
	{ "HEAP_PROFILE_TIME_INTERVAL", OPT_SECONDS, 0,
	  &ha_prof_opt.time_interval, NULL, NULL,
	  DOC("dump every N seconds; 0 = off") },
	{ "HEAPPROFILESIGNAL", OPT_SIGNAL, 0, &ha_prof_opt.signal, NULL, NULL,
	  DOC("dump when this signal (number or name, e.g. `SIGUSR2`) arrives") },
	{ "HEAPPROFILE_USE_PID", OPT_BOOL, 0, &ha_prof_opt.use_pid, NULL,
	  &ha_prof_opt.use_pid_set,
	  DOC("every process, the first included, writes `PREFIX_PID.NNNN.heap`") },
	{ "HEAP_PROFILE_CLEANUP", OPT_BOOL, 1, &ha_prof_opt.cleanup, NULL, NULL,
	  DOC("at start, remove earlier `PREFIX.NNNN.heap` files") },
	{ "HEAP_PROFILE_EXACT_TOTALS", OPT_BOOL, 0, &ha_prof_opt.exact_totals, NULL, NULL,
	  DOC("heapalloc's own: gperftools' compatibility mode (requested-size totals and dump "
	      "points, a 16-byte header per block)") },
	{ "HEAP_PROFILE_FORMAT", OPT_FORMAT, HA_FORMAT_TEXT, &ha_prof_opt.format, NULL, NULL,
	  DOC("heapalloc's own: `text` (`PREFIX.NNNN.heap`), `pprof` (`PREFIX.NNNN.pb.gz`, gzipped "
	      "profile.proto with build IDs) or `both`") },
	{ "HEAP_PROFILE_PEAK_INTERVAL", OPT_SIZE, 16777216, &ha_prof_opt.peak_interval, NULL, NULL,
	  DOC("heapalloc's own: `PREFIX.peak.heap`, the profile at the in-use high, from N bytes in "
	      "use, copied at the turn each 1/128 higher; 0 = off") },
	{ "HEAP_PROFILE_STATS", OPT_BOOL, 1, &ha_prof_opt.stats, NULL, NULL,
	  DOC("heapalloc's own: write `PREFIX.NNNN.stats` beside each dump (heap books and caches "
	      "against the process's RSS)") },
	{ "HEAP_PROFILE_KEEP", OPT_COUNT, 0, &ha_prof_opt.keep, NULL, NULL,
	  DOC("heapalloc's own: keep the first and the newest N dumps this process wrote, removing "
	      "each older one as a new one lands; never touches other runs' or processes' files; 0 = "
	      "keep all") },
	{ "HEAP_PROFILE_MIN_SECONDS", OPT_SECONDS, 0, &ha_prof_opt.min_seconds, NULL, NULL,
	  DOC("heapalloc's own: at most one threshold (allocation, deallocation, in-use) dump per N "
	      "seconds; a crossing in between is counted, and the next dump of any kind says `; K "
	      "crossings folded` after its reason; exit and API dumps are never held back; 0 = off") },
	{ "HEAP_PROFILE_RSS_INTERVAL", OPT_SIZE, 0, &ha_prof_opt.rss_interval, NULL, NULL,
	  DOC("dump when the resident set (`/proc/self/statm`) has grown by more than N bytes since "
	      "the last RSS dump (the first at start RSS + N); checked every 100 ms by the helper "
	      "thread; 0 = off") },
	{ "HEAP_PROFILE_OOM_FRACTION", OPT_FRACTION, 900000, &ha_prof_opt.oom_fraction, NULL, NULL,
	  DOC("dump once when memory use reaches this fraction (`0.9` or `90%`) of the smallest "
	      "limit: cgroup v2 `memory.max` / v1 `memory.limit_in_bytes` (against the cgroup's "
	      "usage) or `RLIMIT_AS` (against the address space); 0 = off") },
	{ "HEAP_PROFILE_TIMELINE_MS", OPT_COUNT, 100, &ha_prof_opt.timeline_ms, NULL, NULL,
	  DOC("heapalloc's own: every N ms while the heap moves, the helper thread adds a row of the "
	      "totals and RSS to `PREFIX.log` (reason `timeline`), so `heapalloc timeline` draws the "
	      "run between dumps too; the helper runs in the default mode, not with "
	      "`HEAP_PROFILE_EXACT_TOTALS`; 0 = off") },
	{ "HEAPALLOC_PROFILE_ROOT", OPT_COUNT, 0, &ha_prof_opt.profile_root, NULL, NULL,
	  DOC("set by heapalloc, not by you: the profiled root's pid, in its descendants' "
	      "environment; a descendant prints no `Starting tracking the heap` line (one per process "
	      "tree) and writes its command line at the top of its dump log") },
	{ "HEAP_PROFILE_MMAP", OPT_BOOL, 0, &ha_prof_opt.mmap, NULL, NULL,
	  DOC("also profile the program's `mmap`, `mmap64`, `mremap` and `munmap` calls (gperftools' "
	      "`HEAP_PROFILE_MMAP` before 2.17); mapped bytes count in the totals") },
	{ "HEAP_PROFILE_SYMBOLIZE", OPT_BOOL, 1, &ha_prof_opt.symbolize, NULL, NULL,
	  DOC("heapalloc's own: profiles served from memory (`heapalloc_profile_pprof`, the crate's "
	      "`pprof_heap()`, the HTTP endpoint) carry function names, file:line and inlined frames, "
	      "read in the process by the plugin `libheapalloc-sym.so` (docs/reference.md); false = "
	      "addresses and build IDs only; dump files are never named in-process") },
	{ "HEAP_PROFILE_CALIBRATE", OPT_BOOL, 1, &ha_prof_opt.calibrate, NULL, NULL,
	  DOC("heapalloc's own: scale a sampled profile's estimates so that its totals equal the "
	      "allocator's exact books, the figures the dump prints (text lines then carry `@ "
	      "heapprofile`); false writes pprof's raw estimates with `@ heap_v2/R`; nothing to scale "
	      "at interval 1") },
	{ "HEAP_PROFILE_SEED", OPT_COUNT, 0, &ha_prof_opt.seed, NULL, NULL,
	  DOC("heapalloc's own: the sampler's seed, so that a run is sampled alike each time (threads "
	      "seeded in the order they first sample); 0 = a fresh seed per thread") },
	{ "HEAP_PROFILE_LEAKS", OPT_BOOL, 0, &ha_prof_opt.leaks, NULL, NULL,
	  DOC("heapalloc's own: at exit, look for the sampled live blocks nothing points to (the scan "
	      "of `heapalloc leaks PID`, in the process, as gperftools' `HEAPCHECK` did) and report "
	      "them per site on stderr, and in `PREFIX.leaks.pb.gz` with `HEAPPROFILE`; set "
	      "`HEAP_PROFILE_SAMPLE_INTERVAL` low (e.g. 1) to see small leaks") },
	{ "HEAP_PROFILE_LEAKS_STATUS", OPT_COUNT, 0, &ha_prof_opt.leaks_status, NULL, NULL,
	  DOC("heapalloc's own: with `HEAP_PROFILE_LEAKS`, the exit status when a leak is found (stdio "
	      "is flushed and the rest of exit skipped, as LeakSanitizer does); 0 = the program's own") },
	{ "HEAP_PROFILE_HTTP", OPT_STR, 0, NULL, &ha_prof_opt.http, NULL,
	  DOC("heapalloc's own: serve `/debug/pprof/heap` and `/debug/pprof/allocs` on "
	      "`127.0.0.1:PORT`, `[::1]:PORT`, `0.0.0.0:PORT` or `unix:PATH` (port 0: any free one); "
	      "turns sampling on, writes files only with `HEAPPROFILE`; ignored in setuid programs "
	      "and in descendants (docs/reference.md)") },
	{ "HEAP_PROFILE_HTTP_ADDR_FILE", OPT_STR, 0, NULL, &ha_prof_opt.http_addr_file, NULL,
	  DOC("heapalloc's own: write the address `HEAP_PROFILE_HTTP` bound (the port picked for port "
	      "0) to this file; without it, port 0 prints one stderr line with the address") },
	{ "HEAPALLOC_HTTP_ROOT", OPT_COUNT, 0, &ha_prof_opt.http_root, NULL, NULL,
	  DOC("set by heapalloc, not by you: the serving process's pid, in its descendants' "
	      "environment; a descendant does not serve") },
};

static const char *type_name(opt_type t)
{
	switch (t) {
	case OPT_SIZE: return "a size in bytes";
	case OPT_SECONDS: return "a number of seconds";
	case OPT_COUNT: return "a whole number";
	case OPT_BOOL: return "a boolean";
	case OPT_SIGNAL: return "a signal";
	case OPT_FORMAT: return "text, pprof or both";
	case OPT_FRACTION: return "a fraction such as 0.9 or 90%";
	default: return "a string";
	}
}

void ha_options_load(void)
{
	ha_options_load_from(environ);
}

void ha_options_load_from(char *const *env)
{
	ha_prof_opt_loaded = 1;
	/* every option is HEAP*: look among those entries only, not the whole
	 * environment once per option (40k instructions at every start) */
	char *heap[64];
	size_t k = 0;
	int many = 0;
	for (char *const *e = env; e && *e; e++)
		if ((*e)[0] == 'H' && strncmp(*e, "HEAP", 4) == 0) {
			if (k < sizeof heap / sizeof heap[0] - 1)
				heap[k++] = *e;
			else
				many = 1;
		}
	heap[k] = NULL;
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		const opt_row *r = &rows[i];
		int mine = !many && strncmp(r->name, "HEAP", 4) == 0;
		const char *v = ha_env_lookup(mine ? heap : env, r->name);
		if (r->present)
			*r->present = v != NULL;
		if (r->type == OPT_STR) {
			*r->str = (v && *v) ? v : NULL;
			continue;
		}
		*r->var = r->def;
		if (!v)
			continue;
		int64_t x = 0;
		int err;
		switch (r->type) {
		case OPT_BOOL: err = ha_env_parse_bool(v, &x); break;
		case OPT_SIGNAL: err = ha_env_parse_signal(v, &x); break;
		case OPT_FORMAT: err = ha_env_parse_format(v, &x); break;
		case OPT_FRACTION: err = ha_env_parse_fraction(v, &x); break;
		case OPT_SECONDS:
		case OPT_COUNT: err = ha_env_parse_count(v, &x); break;
		default: err = ha_env_parse_size(v, &x); break;
		}
		if (err) {
			/* one line whatever the value: show at most 64 bytes of it */
			char shown[80];
			size_t n = strlen(v);
			ha_snprintf(shown, sizeof shown, "%s", v);
			if (n > 64)
				memcpy(shown + 64, "...", 4);
			for (char *c = shown; *c; c++)
				if (*c == '\n' || *c == '\r')
					*c = '?';
			if (r->type == OPT_FORMAT)
				ha_log("heapalloc: %s=\"%s\" is not %s; using text\n", r->name,
				       shown, type_name(r->type));
			else if (r->type == OPT_FRACTION) {
				char d[16];  /* the default as written: 0.9 */
				int k = ha_snprintf(d, sizeof d, "%lld.%06lld",
						    (long long)(r->def / 1000000),
						    (long long)(r->def % 1000000));
				while (k > 2 && d[k - 1] == '0' && d[k - 2] != '.')
					d[--k] = 0;
				ha_log("heapalloc: %s=\"%s\" is not %s; using %s\n", r->name,
				       shown, type_name(r->type), d);
			}
			else
				ha_log("heapalloc: %s=\"%s\" is not %s; using %lld\n", r->name,
				       shown, type_name(r->type), (long long)r->def);
			continue;
		}
		*r->var = x;
	}
	/* 0 is the off switch of the always-on sampling; a session asked for
	 * then samples at the default interval, the row's (one default: the
	 * always-on sampling and a session draw alike) */
	int off = ha_prof_opt.sample_interval_set && ha_prof_opt.sample_interval == 0;
	if (ha_prof_opt.sample_interval < 1)
		for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
			if (rows[i].var == &ha_prof_opt.sample_interval)
				ha_prof_opt.sample_interval = rows[i].def;
	ha_prof_opt.always_on = off ? 0 : ha_prof_opt.sample_interval;
}
