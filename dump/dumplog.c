/* dump/dumplog.c — the dump log, PREFIX[_PID].log: one line per dump with
 * its number, the wall time, the totals, the process's RSS, the file and
 * the reason, so a run's timeline can be charted without opening every
 * profile.  Tab-separated under a header line; a process's first start
 * truncates it, every dump appends one line with one write (O_APPEND).
 * Never allocates: stack buffers, raw system calls.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dump/prof.h"

static const char header[] =
	"# heapalloc dump log: bytes, seconds since the epoch\n"
	"# seq\ttime\tallocated\tfreed\tin_use\trss\tfile\treason\n";
static int warned;

static void complain(const char *path, int e)
{
	if (!warned) {
		warned = 1;
		ha_log("heapalloc: cannot write the dump log %s (errno %d); dumps go on without it\n",
		       path, e);
	}
}

void ha_dumplog_start(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		complain(path, errno);
		return;
	}
	int e = ha_write_all(fd, header, sizeof header - 1);
	if (e)
		complain(path, e);
	close(fd);
}

/* Resident bytes from /proc/self/statm (0 if unreadable). */
static uint64_t rss_bytes(void)
{
	char buf[128];
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	const char *s = buf;
	while (*s && *s != ' ')       /* skip the size field */
		s++;
	uint64_t pages = 0;
	for (s++; *s >= '0' && *s <= '9'; s++)
		pages = pages * 10 + (uint64_t)(*s - '0');
	return pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

void ha_dumplog_line(const char *path, uint64_t seq, const uint64_t t[2], const char *file,
		     const char *reason)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	char line[4608];
	long ms = now.tv_nsec / 1000000;
	const char *pad = ms < 10 ? "00" : ms < 100 ? "0" : "";
	int n = ha_snprintf(line, sizeof line, "%llu\t%lld.%s%ld\t%llu\t%llu\t%llu\t%llu\t%s\t%s\n",
			    (unsigned long long)seq, (long long)now.tv_sec, pad, ms,
			    (unsigned long long)t[0], (unsigned long long)t[1],
			    (unsigned long long)(t[0] - t[1]), (unsigned long long)rss_bytes(),
			    base, reason);
	if (n <= 0)
		return;
	if ((size_t)n >= sizeof line) {    /* cut: keep the line whole */
		n = sizeof line - 1;
		line[n - 1] = '\n';
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		complain(path, errno);
		return;
	}
	struct stat st;
	int e = 0;
	if (fstat(fd, &st) == 0 && st.st_size == 0)   /* a fork child's new log */
		e = ha_write_all(fd, header, sizeof header - 1);
	if (!e)
		e = ha_write_all(fd, line, (size_t)n);
	if (e)
		complain(path, e);
	close(fd);
}
