/* prof/session/naming.c — the names of the profiler's files and their upkeep:
 * PREFIX[_PID].NNNN.heap / .pb.gz / .stats, PREFIX[_PID].peak.*, the dump
 * log's PREFIX[_PID].log; which processes name theirs with the pid (a fork
 * child, HEAPPROFILE_USE_PID, the descendants of a HEAPPROFILE start);
 * HEAP_PROFILE_KEEP's removal of old dumps and HEAP_PROFILE_CLEANUP's of an
 * earlier run's.
 *
 * Owns the books of the dumps kept on disk (ha_kept_dumps).  Removes only
 * files it can name as its own; never opendir's (getdents64: no malloc)
 * and never calls the public malloc (raw memory only).  Called under
 * ha_prof_dump_lock, or at start before profiling runs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "prof/environ.h"
#include "prof/session/session.h"

struct ha_kept_dumps ha_kept_dumps;

/* PREFIX[_PID].NNNN.heap into buf. */
void ha_naming_file(char *buf, size_t cap, uint64_t n)
{
	pid_t pid = getpid();
	int with_pid = ha_session.use_pid || pid != ha_session.root_pid;
	char num[24];
	int k = ha_snprintf(num, sizeof num, "%llu", (unsigned long long)n);
	char pad[8] = "";
	for (int i = k; i < 4; i++)
		pad[i - k] = '0';
	pad[k < 4 ? 4 - k : 0] = 0;
	if (with_pid)
		ha_snprintf(buf, cap, "%s_%d.%s%s.heap", ha_session.prefix, (int)pid, pad, num);
	else
		ha_snprintf(buf, cap, "%s.%s%s.heap", ha_session.prefix, pad, num);
}

/* PREFIX[_PID].peak.heap and .peak.pb.gz into text and pb. */
void ha_naming_peak(char *text, char *pb, size_t cap)
{
	pid_t pid = getpid();
	if (ha_session.use_pid || pid != ha_session.root_pid) {
		ha_snprintf(text, cap, "%s_%d.peak.heap", ha_session.prefix, (int)pid);
		ha_snprintf(pb, cap, "%s_%d.peak.pb.gz", ha_session.prefix, (int)pid);
	} else {
		ha_snprintf(text, cap, "%s.peak.heap", ha_session.prefix);
		ha_snprintf(pb, cap, "%s.peak.pb.gz", ha_session.prefix);
	}
}

int ha_naming_leaks(char *pb, size_t cap)
{
	if (!ha_session.running || ha_session.nofiles || !ha_session.prefix[0])
		return 0;
	pid_t pid = getpid();
	if (ha_session.use_pid || pid != ha_session.root_pid)
		ha_snprintf(pb, cap, "%s_%d.leaks.pb.gz", ha_session.prefix, (int)pid);
	else
		ha_snprintf(pb, cap, "%s.leaks.pb.gz", ha_session.prefix);
	return 1;
}

/* PREFIX[_PID].log, the dump log's name for this process. */
void ha_naming_log(char *buf, size_t cap)
{
	pid_t pid = getpid();
	if (ha_session.use_pid || pid != ha_session.root_pid)
		ha_snprintf(buf, cap, "%s_%d.log", ha_session.prefix, (int)pid);
	else
		ha_snprintf(buf, cap, "%s.log", ha_session.prefix);
}

/* PREFIX[_PID].NNNN.pb.gz from the .heap name of the same dump. */
void ha_naming_pb(char *pb, const char *path)
{
	size_t pl = strlen(path);
	memcpy(pb, path, pl - 5);
	memcpy(pb + pl - 5, ".pb.gz", 7);
}

/* PREFIX[_PID].NNNN.stats from the .heap name of the same dump. */
void ha_naming_stats(char *sp, const char *path)
{
	size_t pl = strlen(path);
	memcpy(sp, path, pl - 5);
	memcpy(sp + pl - 5, ".stats", 7);
}

/* HEAP_PROFILE_KEEP: dump n was written in the formats `written`; remember
 * it and remove whatever falls out of the newest ha_session.keep. */
__attribute__((noinline)) void ha_naming_retain(uint64_t n, int written)
{
	if (ha_session.keep <= 0 || !written)
		return;
	if (!ha_kept_dumps.have_first) {
		ha_kept_dumps.have_first = 1;
		return;
	}
	if (ha_kept_dumps.n == ha_kept_dumps.cap) {
		uint64_t want = ha_kept_dumps.cap ? (uint64_t)ha_kept_dumps.cap * 2 : 16;
		if (want > (uint64_t)ha_session.keep + 1)
			want = (uint64_t)ha_session.keep + 1;
		uint64_t *r = want > ha_kept_dumps.cap ? ha_raw_malloc(want * sizeof *r) : NULL;
		if (!r)
			return;   /* not remembered: this one is never removed */
		for (size_t i = 0; i < ha_kept_dumps.n; i++)
			r[i] = ha_kept_dumps.ring[(ha_kept_dumps.head + i) % ha_kept_dumps.cap];
		if (ha_kept_dumps.ring)
			ha_raw_free(ha_kept_dumps.ring);
		ha_kept_dumps.ring = r;
		ha_kept_dumps.cap = (size_t)want;
		ha_kept_dumps.head = 0;
	}
	ha_kept_dumps.ring[(ha_kept_dumps.head + ha_kept_dumps.n++) % ha_kept_dumps.cap] =
		n << 2 | (uint64_t)written;
	while (ha_kept_dumps.n > (uint64_t)ha_session.keep) {
		uint64_t old = ha_kept_dumps.ring[ha_kept_dumps.head];
		ha_kept_dumps.head = (ha_kept_dumps.head + 1) % ha_kept_dumps.cap;
		ha_kept_dumps.n--;
		char path[HA_PREFIX_MAX + 64], pb[HA_PREFIX_MAX + 64];
		ha_naming_file(path, sizeof path, old >> 2);
		ha_naming_pb(pb, path);
		if (old & HA_FORMAT_TEXT)
			unlink(path);
		if (old & HA_FORMAT_PPROF)
			unlink(pb);
		ha_naming_stats(pb, path);   /* its stats sidecar, if any */
		unlink(pb);
	}
}

/* Remove PREFIX.NNNN.heap and .pb.gz and PREFIX.peak.* (or PREFIX_PID.* when this process uses
 * the pid form) left by an earlier run.  getdents64: no opendir malloc. */
void ha_naming_cleanup(void)
{
	char name[HA_PREFIX_MAX + 32];
	if (ha_session.use_pid)
		ha_snprintf(name, sizeof name, "%s_%d.", ha_session.prefix, (int)getpid());
	else
		ha_snprintf(name, sizeof name, "%s.", ha_session.prefix);
	char *slash = strrchr(name, '/');
	const char *base = slash ? slash + 1 : name;
	char dir[HA_PREFIX_MAX + 32];
	if (slash) {
		size_t dl = (size_t)(slash - name);
		memcpy(dir, name, dl);
		dir[dl ? dl : 1] = 0;
		if (!dl)
			dir[0] = '/';
	} else {
		strcpy(dir, ".");
	}
	size_t bl = strlen(base);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	char buf[8192] __attribute__((aligned(8)));
	for (;;) {
		long n = syscall(SYS_getdents64, dfd, buf, sizeof buf);
		if (n <= 0)
			break;
		for (long off = 0; off < n;) {
			struct { uint64_t ino; int64_t off; unsigned short reclen;
				 unsigned char type; char name[]; } *d = (void *)(buf + off);
			off += d->reclen;
			const char *s = d->name;
			if (strncmp(s, base, bl) != 0)
				continue;
			s += bl;
			int digits = 0;
			while (*s >= '0' && *s <= '9')
				s++, digits++;
			if ((digits >= 4 && (strcmp(s, ".heap") == 0 || strcmp(s, ".pb.gz") == 0 ||
					     strcmp(s, ".stats") == 0)) ||
			    (!digits && (strcmp(s, "peak.heap") == 0 || strcmp(s, "peak.pb.gz") == 0)))
				unlinkat(dfd, d->name, 0);
		}
	}
	close(dfd);
}

/* Tell descendants they are not the root: add HEAPPROFILE_USE_PID=1 to the
 * live environment unless the user set the variable (then their value
 * rules), and HEAPALLOC_PROFILE_ROOT=<our pid> unless a root above us set
 * it.  ASCII only; no user variable changes; no malloc (raw memory, leaked
 * on purpose: environ may be read at any time). */
void ha_naming_mark_descendants(void)
{
	static char var[] = "HEAPPROFILE_USE_PID=1";
	static char root[48];
	int add_pid = !ha_prof_opt.use_pid_set, add_root = !ha_prof_opt.profile_root;
	if ((!add_pid && !add_root) || !environ)
		return;
	ha_snprintf(root, sizeof root, "HEAPALLOC_PROFILE_ROOT=%d", (int)getpid());
	char *add[2];
	size_t n = 0;
	if (add_pid)
		add[n++] = var;
	if (add_root)
		add[n++] = root;
	ha_environ_put(add, n, NULL);
}
