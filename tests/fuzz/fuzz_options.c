/* tests/fuzz/fuzz_options.c — libFuzzer target for the profiler's switches
 * (prof/session/options.c): the value parsers and ha_options_load() over a whole
 * environment built from the input, with alloc/log.c's real message
 * formatting (its write(2) is captured by the stand-ins).
 *
 * ha_options_load_from(env) is the seam prof/ added for this target.
 * Input: NUL-separated strings.  The first is also fed to each parser
 * directly; each string becomes an environment entry — as is when it holds
 * '=', else as the value of the variable chosen by its first byte.
 * Checks, beyond ASan/UBSan:
 *   - parse_size: accepts exactly  digits [kKmMgGtT [i]] [B|b after a
 *     suffix]  with no overflow past INT64_MAX, and gives that value;
 *   - parse_bool: 0 or 1; parse_signal: 1..NSIG-1, never SIGKILL/SIGSTOP;
 *   - after ha_options_load: every number >= 0, sample interval >= 1, the
 *     prefix NULL or a non-empty string inside the environment, the signal
 *     0 or valid; at most one message per variable, each naming it, each
 *     starting "heapalloc: ".
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof/prof.h"
#include "tests/fuzz/standins.h"

static const char *const names[] = {
	"HEAPPROFILE", "HEAP_PROFILE_SAMPLE_INTERVAL", "HEAP_PROFILE_ALLOCATION_INTERVAL",
	"HEAP_PROFILE_DEALLOCATION_INTERVAL", "HEAP_PROFILE_INUSE_INTERVAL",
	"HEAP_PROFILE_TIME_INTERVAL", "HEAPPROFILESIGNAL", "HEAPPROFILE_USE_PID",
	"HEAP_PROFILE_CLEANUP", "HEAP_PROFILE_EXACT_TOTALS", "HEAP_PROFILE_FORMAT",
	"HEAP_PROFILE_KEEP", "HEAP_PROFILE_MIN_SECONDS", "HEAP_PROFILE_PEAK_INTERVAL",
	"HEAP_PROFILE_STATS", "HEAP_PROFILE_RSS_INTERVAL", "HEAP_PROFILE_OOM_FRACTION",
	"HEAP_PROFILE_TIMELINE_MS", "HEAPALLOC_PROFILE_ROOT", "HEAP_PROFILE_MMAP",
	"HEAP_PROFILE_SYMBOLIZE",
	"HEAP_PROFILE_CALIBRATE", "HEAP_PROFILE_SEED", "HEAP_PROFILE_LEAKS",
	"HEAP_PROFILE_LEAKS_STATUS",
	"HEAP_PROFILE_HTTP", "HEAP_PROFILE_HTTP_ADDR_FILE", "HEAPALLOC_HTTP_ROOT",
};
#define NNAMES (sizeof names / sizeof names[0])

static void die(const char *why, const char *s)
{
	fprintf(stderr, "fuzz_options: %s (input '%.200s')\n", why, s ? s : "");
	abort();
}

/* Reference size parser, written from the grammar in options.c's comment. */
static int ref_size(const char *s, int64_t *out)
{
	const char *p = s;
	unsigned __int128 v = 0;
	if (*p < '0' || *p > '9')
		return EINVAL;
	while (*p >= '0' && *p <= '9') {
		v = v * 10 + (unsigned)(*p++ - '0');
		if (v > ((unsigned __int128)1 << 80))
			return EINVAL;
	}
	int shift = 0;
	if (*p && strchr("kK", *p)) shift = 10;
	else if (*p && strchr("mM", *p)) shift = 20;
	else if (*p && strchr("gG", *p)) shift = 30;
	else if (*p && strchr("tT", *p)) shift = 40;
	if (shift) {
		p++;
		if (*p == 'i')
			p++;
		if (*p == 'B' || *p == 'b')
			p++;
	} else if (*p == 'B') {
		p++;
	}
	if (*p)
		return EINVAL;
	v <<= shift;
	if (v > (unsigned __int128)INT64_MAX)
		return EINVAL;
	*out = (int64_t)v;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz_reset();
	char *buf = malloc(size + 1);
	memcpy(buf, data, size);
	buf[size] = 0;

	/* the parsers on the first string */
	int64_t a = -7, b = -7;
	int ea = ha_env_parse_size(buf, &a), eb = ref_size(buf, &b);
	if ((ea == 0) != (eb == 0))
		die(ea ? "parse_size refused a valid size" : "parse_size accepted junk", buf);
	if (ea == 0 && a != b)
		die("parse_size gave the wrong value", buf);
	a = -7;
	if (ha_env_parse_bool(buf, &a) == 0 && a != 0 && a != 1)
		die("parse_bool gave neither 0 nor 1", buf);
	a = -7;
	if (ha_env_parse_signal(buf, &a) == 0 &&
	    (a < 1 || a >= NSIG || a == SIGKILL || a == SIGSTOP))
		die("parse_signal accepted an invalid signal", buf);

	/* an environment */
	size_t n = 0;
	for (size_t i = 0; i <= size; i++)
		n += buf[i] == 0;
	char **env = calloc(n + 1, sizeof *env);
	size_t k = 0;
	for (char *s = buf; s <= buf + size && k < n; s += strlen(s) + 1) {
		if (strchr(s, '=')) {
			env[k++] = strdup(s);
		} else {
			const char *name = names[(unsigned char)s[0] % NNAMES];
			const char *val = *s ? s + 1 : s;
			env[k] = malloc(strlen(name) + strlen(val) + 2);
			sprintf(env[k++], "%s=%s", name, val);
		}
	}
	ha_options_load_from(env);          /* the seam: any environment array */

	ha_prof_options *o = &ha_prof_opt;
	if (o->sample_interval < 1 || o->alloc_interval < 0 || o->dealloc_interval < 0 ||
	    o->inuse_interval < 0 || o->time_interval < 0 || o->keep < 0 || o->min_seconds < 0)
		die("a negative interval after load", buf);
	if (o->signal && (o->signal < 1 || o->signal >= NSIG || o->signal == SIGKILL ||
			  o->signal == SIGSTOP))
		die("an invalid signal after load", buf);
	if ((o->use_pid != 0 && o->use_pid != 1) || (o->cleanup != 0 && o->cleanup != 1) ||
	    (o->exact_totals != 0 && o->exact_totals != 1))
		die("a boolean that is neither 0 nor 1", buf);
	if (o->prefix) {
		int inside = 0;
		for (size_t i = 0; i < k; i++)
			if (o->prefix > env[i] && o->prefix <= env[i] + strlen(env[i]))
				inside = 1;
		if (!inside || !*o->prefix)
			die("the prefix does not point into the environment, or is empty", buf);
	}
	/* messages: each starts "heapalloc: " and names a variable, at most one
	 * per variable */
	int per[NNAMES] = { 0 };
	fz.log_off[fz.log_n] = fz.log_len;
	for (int mi = 0; mi < fz.log_n; mi++) {
		const char *m = fz.log + fz.log_off[mi];
		size_t left = fz.log_off[mi + 1] - fz.log_off[mi];
		if (left < 11 || memcmp(m, "heapalloc: ", 11))
			die("a message that does not start with 'heapalloc: '", buf);
		size_t best = 0;
		int which = -1;
		for (size_t i = 0; i < NNAMES; i++) {
			size_t l = strlen(names[i]);
			if (left >= 11 + l + 1 && !memcmp(m + 11, names[i], l) && m[11 + l] == '=' &&
			    l > best)
				best = l, which = (int)i;
		}
		if (which < 0)
			die("a message that does not name the variable first", buf);
		if (++per[which] > 1)
			die("two messages for one variable", buf);
	}
	for (size_t i = 0; i < k; i++)
		free(env[i]);
	free(env);
	free(buf);
	return 0;
}
