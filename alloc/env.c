/* alloc/env.c — the grammar of heapalloc's variables: one parser per kind
 * of value, for the profiler's table (prof/session/options.c), the allocator's own
 * HEAPALLOC_PURGE_THREAD (alloc/purge.c) and `heapalloc run`'s check of its
 * flags (tools/heapalloc-options), so that a value means the same wherever
 * it is read.  Lives below the profiler, with the allocator's other shared
 * helpers (log.h, sys.h), because the allocator may not reach prof/.
 *
 * Reads straight from `environ` (never getenv: it may be called while libc
 * is still starting).  Never allocates, never logs: a caller says what it
 * does with junk.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "alloc/env.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <strings.h>

extern char **environ;

const char *ha_env_get(const char *name)
{
	return ha_env_lookup(environ, name);
}

const char *ha_env_lookup(char *const *e, const char *name)
{
	size_t n = strlen(name);
	if (!e)
		return NULL;
	for (; *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

/* Decimal with an optional binary suffix: k K m M g G t T, optionally
 * followed by i, iB or B ("64M", "512KiB", "1g").  No sign, no overflow. */
int ha_env_parse_size(const char *s, int64_t *out)
{
	uint64_t v = 0;
	const char *p = s;
	if (*p < '0' || *p > '9')
		return EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		uint64_t d = (uint64_t)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return EINVAL;
		v = v * 10 + d;
	}
	unsigned shift = 0;
	switch (*p) {
	case 'k': case 'K': shift = 10; p++; break;
	case 'm': case 'M': shift = 20; p++; break;
	case 'g': case 'G': shift = 30; p++; break;
	case 't': case 'T': shift = 40; p++; break;
	}
	if (shift && *p == 'i')
		p++;
	if (*p == 'B' || (shift && *p == 'b'))
		p++;
	if (*p)
		return EINVAL;
	if (v > ((uint64_t)INT64_MAX >> shift))
		return EINVAL;
	*out = (int64_t)(v << shift);
	return 0;
}

/* docs/heap-profile-spec.md §5: true for t T y Y 1 and the empty string.  heapalloc also
 * takes the words true/yes/on and, for false, f F n N 0 false/no/off;
 * anything else (e.g. "12abc", "2") is junk. */
int ha_env_parse_bool(const char *s, int64_t *out)
{
	static const char *const yes[] = { "", "t", "T", "y", "Y", "1", "true", "yes", "on" };
	static const char *const no[] = { "f", "F", "n", "N", "0", "false", "no", "off" };
	for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
		if (strcasecmp(s, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
	for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
		if (strcasecmp(s, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	return EINVAL;
}

static const struct { const char *name; int no; } signames[] = {
	{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT },
	{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "PIPE", SIGPIPE },
	{ "ALRM", SIGALRM }, { "TERM", SIGTERM }, { "CHLD", SIGCHLD },
	{ "CONT", SIGCONT }, { "TSTP", SIGTSTP }, { "TTIN", SIGTTIN },
	{ "TTOU", SIGTTOU }, { "URG", SIGURG }, { "XCPU", SIGXCPU },
	{ "XFSZ", SIGXFSZ }, { "VTALRM", SIGVTALRM }, { "PROF", SIGPROF },
	{ "WINCH", SIGWINCH }, { "IO", SIGIO }, { "PWR", SIGPWR },
	{ "SYS", SIGSYS }, { "TRAP", SIGTRAP },
};

/* A number 1..NSIG-1, or a name with or without SIG (SIGUSR2, usr2),
 * or RTMIN+n / RTMAX-n.  SIGKILL and SIGSTOP cannot be caught: junk. */
int ha_env_parse_signal(const char *s, int64_t *out)
{
	int64_t v;
	if (*s >= '0' && *s <= '9') {
		if (ha_env_parse_size(s, &v) || strpbrk(s, "kKmMgGtTiBb"))
			return EINVAL;
	} else {
		if (strncasecmp(s, "SIG", 3) == 0)
			s += 3;
		v = -1;
		for (size_t i = 0; i < sizeof signames / sizeof signames[0]; i++)
			if (strcasecmp(s, signames[i].name) == 0)
				v = signames[i].no;
		if (v < 0 && strncasecmp(s, "RTMIN", 5) == 0) {
			int64_t k = 0;
			if (s[5] && (s[5] != '+' || ha_env_parse_size(s + 6, &k)))
				return EINVAL;
			v = SIGRTMIN + k;
		} else if (v < 0 && strncasecmp(s, "RTMAX", 5) == 0) {
			int64_t k = 0;
			if (s[5] && (s[5] != '-' || ha_env_parse_size(s + 6, &k)))
				return EINVAL;
			v = SIGRTMAX - k;
		}
	}
	if (v <= 0 || v >= NSIG || v == SIGKILL || v == SIGSTOP)
		return EINVAL;
	*out = v;
	return 0;
}

/* text | pprof | both -> HA_ENV_FORMAT_* bits. */
int ha_env_parse_format(const char *s, int64_t *out)
{
	if (strcasecmp(s, "text") == 0)
		*out = HA_ENV_FORMAT_TEXT;
	else if (strcasecmp(s, "pprof") == 0)
		*out = HA_ENV_FORMAT_PPROF;
	else if (strcasecmp(s, "both") == 0)
		*out = HA_ENV_FORMAT_TEXT | HA_ENV_FORMAT_PPROF;
	else
		return EINVAL;
	return 0;
}

/* A fraction of 1 in parts per million: decimal "0.9", ".9", "1", or a
 * percentage "90%", "92.5%"; digits past the millionth are dropped.  More
 * than 1 (100%) is junk: a bare "90" is a mistake for 90% or 0.9. */
int ha_env_parse_fraction(const char *s, int64_t *out)
{
	uint64_t v = 0;             /* value times 10^6 */
	int digits = 0;
	const char *p = s;
	for (; *p >= '0' && *p <= '9'; p++, digits++) {
		if (v > 100000000000ull)
			return EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	v *= 1000000;
	if (*p == '.') {
		p++;
		uint64_t unit = 100000;
		for (; *p >= '0' && *p <= '9'; p++, digits++) {
			v += (uint64_t)(*p - '0') * unit;
			unit /= 10;
		}
	}
	if (!digits)
		return EINVAL;
	if (*p == '%') {
		v /= 100;
		p++;
	}
	if (*p || v > 1000000)
		return EINVAL;
	*out = (int64_t)v;
	return 0;
}

int ha_env_parse_count(const char *s, int64_t *out)
{
	if (strpbrk(s, "kKmMgGtTiBb"))
		return EINVAL;
	return ha_env_parse_size(s, out);
}

int ha_env_parse(const char *kind, const char *s, int64_t *out)
{
	static const struct { const char *kind; int (*parse)(const char *, int64_t *); } kinds[] = {
		{ "size", ha_env_parse_size }, { "seconds", ha_env_parse_count },
		{ "count", ha_env_parse_count }, { "bool", ha_env_parse_bool },
		{ "signal", ha_env_parse_signal }, { "format", ha_env_parse_format },
		{ "fraction", ha_env_parse_fraction },
	};
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		if (strcmp(kind, kinds[i].kind) == 0)
			return kinds[i].parse(s, out);
	return ENOENT;
}
