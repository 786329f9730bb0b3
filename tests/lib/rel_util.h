/* tests/lib/rel_util.h — shared helpers of the reliability tests.
 *
 * Scratch directories, re-executing the test under profiler environment
 * variables (HEAPPROFILE is read at process start, so a test that needs it
 * sets it and execs itself), capturing our own stderr into a file, a
 * watchdog, VmRSS, and the "is this profile whole" check used on every file
 * the profiler writes.  Header-only: each rel_ test is one small program.
 */
#ifndef HA_TESTS_REL_UTIL_H
#define HA_TESTS_REL_UTIL_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/check.h"

/* A fresh scratch directory under $TMPDIR (or /tmp). */
static inline void rel_mkdtemp(char *out, size_t cap, const char *tag)
{
	const char *t = getenv("TMPDIR");
	snprintf(out, cap, "%s/ha_%s_XXXXXX", t && *t ? t : "/tmp", tag);
	if (!mkdtemp(out))
		HARD_ERROR("mkdtemp failed");
}

/* rm -rf dir (one level of subdirectories is enough here). */
static inline void rel_rmtree(const char *dir)
{
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		char p[8192];
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
			struct stat st;
			if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
				rel_rmtree(p);
			else
				unlink(p);
		}
		closedir(d);
	}
	rmdir(dir);
}

/* If REL_CHILD is not set: set REL_CHILD=1 plus the NAME=VALUE pairs given
 * (NULL-terminated) and exec this program again with the same arguments. */
static inline void rel_reexec(char **argv, ...)
{
	if (getenv("REL_CHILD"))
		return;
	setenv("REL_CHILD", "1", 1);
	va_list ap;
	va_start(ap, argv);
	const char *kv;
	while ((kv = va_arg(ap, const char *))) {
		char *c = strdup(kv), *eq = strchr(c, '=');
		*eq = 0;
		setenv(c, eq + 1, 1);
		free(c);
	}
	va_end(ap);
	execv("/proc/self/exe", argv);
	HARD_ERROR("re-exec failed");
}

/* Send our stderr to path from now on; returns a dup of the old stderr. */
static inline int rel_capture_stderr(const char *path)
{
	fflush(stderr);
	int old = dup(2);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (old < 0 || fd < 0)
		HARD_ERROR("cannot redirect stderr");
	dup2(fd, 2);
	close(fd);
	return old;
}

static inline void rel_restore_stderr(int old)
{
	fflush(stderr);
	dup2(old, 2);
	close(old);
}

/* Whole file into a malloc'ed NUL-terminated buffer (NULL if unreadable). */
static inline char *rel_slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	size_t cap = 1 << 16, n = 0;
	char *b = malloc(cap + 1);
	for (;;) {
		if (n == cap)
			b = realloc(b, (cap *= 2) + 1);
		ssize_t r = read(fd, b + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	b[n] = 0;
	if (len)
		*len = n;
	return b;
}

/* Lines of text containing every one of the given needles (NULL-terminated). */
static inline int rel_count_lines(const char *text, ...)
{
	int count = 0;
	const char *line = text;
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t ll = nl ? (size_t)(nl - line) : strlen(line);
		char *l = strndup(line, ll);
		va_list ap;
		va_start(ap, text);
		const char *needle;
		int all = 1;
		while ((needle = va_arg(ap, const char *)))
			if (!strstr(l, needle))
				all = 0;
		va_end(ap);
		count += all;
		free(l);
		line = nl ? nl + 1 : NULL;
	}
	return count;
}

/* 1 if path is a whole gperftools heap profile: the header line, bucket
 * lines of the shape both pprofs accept, a blank line, MAPPED_LIBRARIES:
 * with at least one mapping, and a final newline.  Prints why not. */
static inline int rel_profile_whole(const char *path)
{
	static regex_t hdr, line, map;
	static int compiled;
	if (!compiled) {
		compiled = 1;
		if (regcomp(&hdr, "^heap profile: *[0-9]+: +[0-9]+ \\[ *[0-9]+: +[0-9]+\\] @ "
			    "(heapprofile|heap_v2/[0-9]+)$", REG_EXTENDED | REG_NOSUB) ||
		    regcomp(&line, "^ *[0-9]+: +[0-9]+ \\[ *[0-9]+: +[0-9]+\\] @( 0x[0-9a-f]+)+$",
			    REG_EXTENDED | REG_NOSUB) ||
		    regcomp(&map, "^[0-9a-f]+-[0-9a-f]+ [-r][-w][-x]p [0-9a-f]+ ",
			    REG_EXTENDED | REG_NOSUB))
			HARD_ERROR("regcomp");
	}
	size_t len;
	char *b = rel_slurp(path, &len);
	if (!b) {
		fprintf(stderr, "%s: cannot read: %s\n", path, strerror(errno));
		return 0;
	}
	int ok = 1, state = 0, maps = 0;
	const char *why = NULL;
	if (len == 0 || b[len - 1] != '\n') {
		ok = 0;
		why = "empty or no final newline";
	}
	for (char *l = b; ok && *l;) {
		char *nl = strchr(l, '\n');
		if (nl)
			*nl = 0;
		if (state == 0) {
			if (regexec(&hdr, l, 0, NULL, 0)) {
				ok = 0;
				why = "bad header line";
			}
			state = 1;
		} else if (state == 1) {
			if (!*l)
				state = 2;
			else if (regexec(&line, l, 0, NULL, 0)) {
				ok = 0;
				why = "bad bucket line";
			}
		} else if (state == 2) {
			if (strcmp(l, "MAPPED_LIBRARIES:")) {
				ok = 0;
				why = "no MAPPED_LIBRARIES: after the blank line";
			}
			state = 3;
		} else {
			if (regexec(&map, l, 0, NULL, 0)) {
				ok = 0;
				why = "bad mapping line";
			}
			maps++;
		}
		l = nl ? nl + 1 : l + strlen(l);
	}
	if (ok && state != 3) {
		ok = 0;
		why = "truncated before MAPPED_LIBRARIES:";
	}
	if (ok && maps == 0) {
		ok = 0;
		why = "no mappings";
	}
	if (!ok)
		fprintf(stderr, "%s: not a whole profile (%zu bytes): %s\n", path, len, why);
	free(b);
	return ok;
}

/* Number of directory entries whose name ends with suffix (NULL: all). */
/* Files in dir ending in suffix (NULL: all), leaving out the sidecars
 * that are not numbered dumps — PREFIX.NNNN.stats and PREFIX.peak.* (their
 * own tests are prof_stats.sh and prof_peak.sh); a leftover .tmp of any
 * of them still counts. */
static inline int rel_ends_with(const char *name, const char *tail)
{
	size_t l = strlen(name), t = strlen(tail);
	return l >= t && !strcmp(name + l - t, tail);
}

static inline int rel_is_sidecar(const char *name)
{
	return rel_ends_with(name, ".stats") || rel_ends_with(name, ".peak.heap") ||
	       rel_ends_with(name, ".peak.pb.gz");
}

static inline int rel_count_files(const char *dir, const char *suffix)
{
	DIR *d = opendir(dir);
	int n = 0;
	if (!d)
		return -1;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || rel_is_sidecar(e->d_name))
			continue;
		size_t l = strlen(e->d_name), sl = suffix ? strlen(suffix) : 0;
		if (!suffix || (l >= sl && !strcmp(e->d_name + l - sl, suffix)))
			n++;
	}
	closedir(d);
	return n;
}

/* The dump log at path (prof/output/dumplog.c): -1, with a line on stderr, unless
 * it is the two header lines and then only whole lines of 8 tab-separated
 * fields numbered upwards (timeline rows between them keep the last dump's
 * number); else the number of dump lines.  When last is not
 * NULL it gets a copy of the last line's file field ("" when none). */
static inline int rel_log_lines(const char *path, char *last, size_t cap)
{
	static const char hdr[] = "# heapalloc dump log: bytes, seconds since the epoch\n"
				  "# seq\ttime\tallocated\tfreed\tin_use\trss\tfile\treason\n";
	size_t len;
	char *b = rel_slurp(path, &len);
	const char *why = NULL;
	int n = 0;
	unsigned long long prev = 0;
	if (last && cap)
		last[0] = 0;
	if (!b) {
		fprintf(stderr, "%s: cannot read the dump log\n", path);
		return -1;
	}
	if (len < sizeof hdr - 1 || memcmp(b, hdr, sizeof hdr - 1))
		why = "no header";
	for (char *l = b + sizeof hdr - 1; !why && l < b + len; n++) {
		char *nl = memchr(l, '\n', (size_t)(b + len - l));
		if (!nl) {
			why = "a line without its newline";
			break;
		}
		if (*l == '#') {          /* a descendant's "# command:" line */
			n--;
			l = nl + 1;
			continue;
		}
		int tabs = 0;
		for (char *c = l; c < nl; c++)
			tabs += *c == '\t';
		unsigned long long seq = strtoull(l, NULL, 10);
		/* a timeline row (the helper's, between dumps) carries the
		 * last dump's number: it must not go back, and is no dump */
		int row = nl - l > 9 && !memcmp(nl - 9, "\ttimeline", 9);
		if (tabs != 7)
			why = "a line without 8 fields";
		else if (row ? seq < prev : seq <= prev)
			why = "dump numbers not going up";
		prev = seq;
		if (row) {
			n--;
			l = nl + 1;
			continue;
		}
		if (last && cap) {
			char *f = l;
			for (int k = 0; k < 6; k++)
				f = strchr(f, '\t') + 1;
			size_t fl = (size_t)(strchr(f, '\t') - f);
			snprintf(last, cap, "%.*s", (int)fl, f);
		}
		l = nl + 1;
	}
	if (why)
		fprintf(stderr, "%s: not a whole dump log (%zu bytes): %s\n", path, len, why);
	free(b);
	return why ? -1 : n;
}

/* Open file descriptors of this process. */
static inline int rel_count_fds(void)
{
	return rel_count_files("/proc/self/fd", NULL) - 1;   /* less opendir's own */
}

/* VmRSS of this process in KiB. */
static inline long rel_rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char l[256];
	long v = -1;
	while (f && fgets(l, sizeof l, f))
		if (!strncmp(l, "VmRSS:", 6))
			v = atol(l + 6);
	if (f)
		fclose(f);
	return v;
}

/* A watchdog that does not use a signal timer (tests may own ITIMER_REAL):
 * after `seconds`, print what hung and exit 1. */
static const char *rel_watchdog_what;
static int rel_watchdog_fd = 2;   /* the real stderr, even while captured */
static inline void *rel_watchdog_main(void *arg)
{
	unsigned s = (unsigned)(uintptr_t)arg;
	while (s) {
		s = sleep(s);
	}
	dprintf(rel_watchdog_fd, "WATCHDOG: %s did not finish in time (hang or deadlock)\n",
		rel_watchdog_what ? rel_watchdog_what : "test");
	_exit(1);
	return NULL;
}

static inline void rel_watchdog(unsigned seconds, const char *what)
{
	pthread_t t;
	sigset_t all, old;
	rel_watchdog_what = what;
	rel_watchdog_fd = dup(2);
	/* the thread starts with every signal blocked: the test's own (a
	 * SIGALRM timer) go to its threads, and never cut the sleep short
	 * (sleep rounds what is left down; qemu-user hands a process's
	 * signals to whichever thread it likes) */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_create(&t, NULL, rel_watchdog_main, (void *)(uintptr_t)seconds);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_detach(t);
}
/* Capture our own stderr in memory through a pipe drained by a thread (a
 * file would be subject to RLIMIT_FSIZE / a full disk in the fault tests).
 * rel_stderr_end() restores stderr and returns what was written. */
static struct {
	int old, rd;
	pthread_t t;
	char buf[1 << 20];
	size_t len;
} rel_err;

static inline void *rel_stderr_drain(void *arg)
{
	(void)arg;
	for (;;) {
		ssize_t r = read(rel_err.rd, rel_err.buf + rel_err.len,
				 sizeof rel_err.buf - 1 - rel_err.len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		rel_err.len += (size_t)r;
		if (rel_err.len == sizeof rel_err.buf - 1)
			rel_err.len = 0;     /* flood: keep the tail */
	}
	return NULL;
}

static inline void rel_stderr_begin(void)
{
	int p[2];
	fflush(stderr);
	if (pipe(p) != 0)
		HARD_ERROR("pipe");
	rel_err.old = dup(2);
	rel_err.rd = p[0];
	rel_err.len = 0;
	dup2(p[1], 2);
	close(p[1]);
	pthread_create(&rel_err.t, NULL, rel_stderr_drain, NULL);
}

static inline const char *rel_stderr_end(void)
{
	fflush(stderr);
	dup2(rel_err.old, 2);      /* closes the last write end: EOF */
	close(rel_err.old);
	pthread_join(rel_err.t, NULL);
	close(rel_err.rd);
	rel_err.buf[rel_err.len] = 0;
	return rel_err.buf;
}
#endif
