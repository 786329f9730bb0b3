/* prof/output/dumplog.c — the dump log, PREFIX[_PID].log: one line per dump with
 * its number, the wall time, the totals, the process's RSS, the file and
 * the reason, so a run's timeline can be charted without opening every
 * profile.  Tab-separated under a two-line header.
 *
 * Each process starts its log afresh (truncates it) the first time it
 * writes it — at start, or at a fork child's first dump — and appends
 * after that, also across stop/start.  Every line is one write(2) under
 * O_APPEND (the header rides with the first line); a short write is cut
 * back with ftruncate, so the log never holds half a line.  A log that
 * cannot be written costs one stderr line per process and never a dump.
 * Never allocates (stack buffers, raw system calls); every descriptor it
 * opens is closed before it returns.  The caller holds ha_prof_dump_lock.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "prof/prof.h"

static const char header[] =
	"# heapalloc dump log: bytes, seconds since the epoch\n"
	"# seq\ttime\tallocated\tfreed\tin_use\trss\tfile\treason\n";
#define HEADER_LEN (sizeof header - 1)
#define LINE_MAX_LEN 4608

static pid_t fresh_pid;           /* the process that started the log at fresh_path */
static char fresh_path[4200];
static pid_t warned_pid;          /* the process that complained already */

/* e: an errno, or 0 for a short write. */
static void complain(const char *path, int e)
{
	pid_t pid = getpid();
	if (warned_pid == pid)
		return;
	warned_pid = pid;
	if (e)
		ha_log("heapalloc: cannot write the dump log %s (errno %d); "
		       "dumps go on without it\n", path, e);
	else
		ha_log("heapalloc: cannot write the dump log %s (a short write); "
		       "dumps go on without it\n", path);
}

/* Append the line at buf + HEADER_LEN (n bytes, may be 0) to the log at
 * path, with the header in front when the log starts afresh or is empty;
 * buf has HEADER_LEN bytes of room in front of the line. */
static void append(const char *path, char *buf, size_t n)
{
	pid_t pid = getpid();
	size_t pl = strlen(path);
	int fresh = pid != fresh_pid || strcmp(path, fresh_path) != 0;
	if (!fresh && n == 0)
		return;
	int fd;
	do
		fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW |
				(fresh ? O_TRUNC : 0), 0644);
	while (fd < 0 && errno == EINTR);
	if (fd < 0) {
		complain(path, errno);
		return;
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		complain(path, errno);
		close(fd);
		return;
	}
	off_t at = st.st_size;
	const char *p = buf + HEADER_LEN;
	size_t len = n;
	if (at == 0) {                /* new, truncated, or deleted under us */
		memcpy(buf, header, HEADER_LEN);
		p = buf;
		len += HEADER_LEN;
	}
	/* past RLIMIT_FSIZE a write raises SIGXFSZ, which kills by default */
	struct rlimit lim;
	if (getrlimit(RLIMIT_FSIZE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
	    (uint64_t)at + len > (uint64_t)lim.rlim_cur) {
		complain(path, EFBIG);
		close(fd);
		return;
	}
	ssize_t w;
	do
		w = write(fd, p, len);
	while (w < 0 && errno == EINTR);
	if (w != (ssize_t)len) {
		if (w < 0) {
			complain(path, errno);
		} else {
			if (w > 0)
				(void)!ftruncate(fd, at);   /* take the half line back */
			complain(path, 0);
		}
	} else if (fresh && pl < sizeof fresh_path) {
		memcpy(fresh_path, path, pl + 1);
		fresh_pid = pid;
	}
	close(fd);
}

void ha_dumplog_start(const char *path)
{
	char buf[HEADER_LEN];
	append(path, buf, 0);
}

size_t ha_cmdline(char *out, size_t cap)
{
	size_t n = 0;
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && cap) {
		char arg[LINE_MAX_LEN - 64];
		ssize_t r;
		do
			r = read(fd, arg, sizeof arg);
		while (r < 0 && errno == EINTR);
		/* arguments space-separated; control bytes, which could split
		 * a line, become '?' (as in the file and reason fields) */
		for (ssize_t i = 0; i < r && n + 2 < cap; i++) {
			unsigned char c = (unsigned char)arg[i];
			if (i && arg[i - 1] == 0)
				out[n++] = ' ';
			if (c)
				out[n++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
		}
	}
	if (fd >= 0)
		close(fd);
	if (cap)
		out[n < cap ? n : cap - 1] = 0;
	return n;
}

void ha_dumplog_command(const char *path)
{
	char buf[HEADER_LEN + LINE_MAX_LEN];
	char *line = buf + HEADER_LEN;
	size_t n = (size_t)ha_snprintf(line, LINE_MAX_LEN, "# command: ");
	n += ha_cmdline(line + n, LINE_MAX_LEN - n - 1);
	line[n++] = '\n';
	append(path, buf, n);
}

/* Copy s scrubbed after line[n] (cap bytes in all, 2 kept for "\t" or "\n");
 * the new length.  A field must not split the line or its columns. */
static size_t field(char *line, size_t n, size_t cap, const char *s)
{
	for (; *s && n + 2 < cap; s++)
		line[n++] = *s == '\t' || *s == '\n' || *s == '\r' ? '?' : *s;
	return n;
}

void ha_dumplog_peak(const char *path, const char *file, uint64_t high, uint64_t copy)
{
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	char buf[HEADER_LEN + LINE_MAX_LEN];
	char *line = buf + HEADER_LEN;
	size_t n = (size_t)ha_snprintf(line, LINE_MAX_LEN,
				       "# peak: %llu bytes in use at the peak; ",
				       (unsigned long long)high);
	n = field(line, n, LINE_MAX_LEN - 64, base);
	n += (size_t)ha_snprintf(line + n, LINE_MAX_LEN - n, " holds %llu\n",
				 (unsigned long long)copy);
	append(path, buf, n);
}

void ha_dumplog_line(const char *path, uint64_t seq, const uint64_t t[2], const char *file,
		     const char *reason)
{
	ha_dumplog_row(path, seq, t, file, reason, NULL);
}

void ha_dumplog_row(const char *path, uint64_t seq, const uint64_t t[2], const char *file,
		    const char *reason, const struct timespec *at)
{
	struct timespec now;
	if (at)
		now = *at;
	else
		clock_gettime(CLOCK_REALTIME, &now);
	uint64_t as, rss;
	if (ha_proc_statm(&as, &rss) != 0)
		rss = 0;
	const char *base = "-";
	if (file) {
		base = strrchr(file, '/');
		base = base ? base + 1 : file;
	}
	char buf[HEADER_LEN + LINE_MAX_LEN];
	char *line = buf + HEADER_LEN;
	size_t n = (size_t)ha_snprintf(line, LINE_MAX_LEN,
				       "%llu\t%lld.%03ld\t%llu\t%llu\t%llu\t%llu\t",
				       (unsigned long long)seq, (long long)now.tv_sec,
				       (long)(now.tv_nsec / 1000000), (unsigned long long)t[0],
				       (unsigned long long)t[1], (unsigned long long)(t[0] - t[1]),
				       (unsigned long long)rss);
	n = field(line, n, LINE_MAX_LEN, base);
	line[n++] = '\t';
	n = field(line, n, LINE_MAX_LEN, reason);
	line[n++] = '\n';
	append(path, buf, n);
}
