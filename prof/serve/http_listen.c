/* prof/serve/http_listen.c — HEAP_PROFILE_HTTP's listening socket (see http.h):
 * the address parsed (no resolver: it allocates), bound and listened on,
 * the chosen address told; exec'd descendants marked so they do not serve;
 * the fork child's copies closed and a bound unix socket removed at exit.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "prof/environ.h"
#include "prof/serve/http.h"

int ha_http_listen_fd = -1;
pid_t ha_http_owner;               /* the process that serves */
static char *unix_path;            /* unix:PATH we bound, unlinked at exit */

/* "127.0.0.1:6060", "[::1]:6060", "0.0.0.0:6060", "localhost:6060" or
 * "unix:/path" into sa; 0 or a message for the one stderr line. */
static const char *parse_addr(const char *s, struct sockaddr_storage *sa, socklen_t *len)
{
	memset(sa, 0, sizeof *sa);
	if (strncmp(s, "unix:", 5) == 0) {
		struct sockaddr_un *u = (struct sockaddr_un *)sa;
		size_t n = strlen(s + 5);
		if (!n || s[5] != '/')
			return "a unix socket needs an absolute path";
		if (n >= sizeof u->sun_path)
			return "the unix socket path is too long";
		u->sun_family = AF_UNIX;
		memcpy(u->sun_path, s + 5, n + 1);
		*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
		return NULL;
	}
	const char *colon = strrchr(s, ':');
	if (!colon || !colon[1])
		return "no port: give HOST:PORT, [IPV6]:PORT or unix:PATH";
	unsigned long port = 0;
	for (const char *p = colon + 1; *p; p++) {
		if (*p < '0' || *p > '9' || (port = port * 10 + (unsigned long)(*p - '0')) > 65535)
			return "the port is not a number from 0 to 65535";
	}
	char host[64];
	size_t hl = (size_t)(colon - s);
	if (hl == 0)
		return "no host: give 127.0.0.1:PORT, or 0.0.0.0:PORT for every interface";
	if (hl >= sizeof host)
		return "the host is not an IP address";
	memcpy(host, s, hl);
	host[hl] = 0;
	if (host[0] == '[') {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)sa;
		if (hl < 3 || host[hl - 1] != ']')
			return "an IPv6 address goes in brackets: [::1]:PORT";
		host[hl - 1] = 0;
		if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1)
			return "the host is not an IPv6 address";
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		*len = sizeof *a6;
		return NULL;
	}
	struct sockaddr_in *a4 = (struct sockaddr_in *)sa;
	if (strcmp(host, "localhost") == 0)
		memcpy(host, "127.0.0.1", 10);    /* no resolver: it allocates */
	if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
		return "the host is not an IP address (name resolution is not done)";
	a4->sin_family = AF_INET;
	a4->sin_port = htons((uint16_t)port);
	*len = sizeof *a4;
	return NULL;
}

/* sa as HOST:PORT, [HOST]:PORT or unix:PATH. */
static void format_addr(const struct sockaddr_storage *sa, char *buf, size_t cap)
{
	char h[INET6_ADDRSTRLEN];
	if (sa->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &a->sin_addr, h, sizeof h);
		ha_snprintf(buf, cap, "%s:%u", h, (unsigned)ntohs(a->sin_port));
	} else if (sa->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &a->sin6_addr, h, sizeof h);
		ha_snprintf(buf, cap, "[%s]:%u", h, (unsigned)ntohs(a->sin6_port));
	} else {
		ha_snprintf(buf, cap, "unix:%s", ((const struct sockaddr_un *)sa)->sun_path);
	}
}

/* A unix socket path left by a process that is gone: nobody accepts on it. */
static int stale_socket(const struct sockaddr_storage *sa, socklen_t len)
{
	struct stat st;
	const char *path = ((const struct sockaddr_un *)sa)->sun_path;
	if (lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode))
		return 0;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	int gone = connect(fd, (const struct sockaddr *)sa, len) != 0 && errno == ECONNREFUSED;
	close(fd);
	return gone;
}

static void fill_addr(ha_out *o, void *arg)
{
	ha_out_str(o, arg);
}

/* Descendants started by exec inherit HEAP_PROFILE_HTTP: they find this
 * marker and do not try the address (it is ours). */
static void mark_descendants(void)
{
	static char var[48];
	char *add[1] = { var };
	if (!environ)
		return;
	ha_snprintf(var, sizeof var, "HEAPALLOC_HTTP_ROOT=%d", (int)getpid());
	ha_environ_put(add, 1, "HEAPALLOC_HTTP_ROOT=");   /* an ancestor's is not ours */
}

int ha_http_start(const char *addr)
{
	struct sockaddr_storage sa;
	socklen_t len;
	const char *why = parse_addr(addr, &sa, &len);
	char shown[80];
	ha_snprintf(shown, sizeof shown, "%s", addr);
	if (strlen(addr) > 64)
		memcpy(shown + 64, "...", 4);
	if (why) {
		ha_log("heapalloc: HEAP_PROFILE_HTTP=\"%s\": %s; not serving\n", shown, why);
		return EINVAL;
	}
	for (int i = 0; i < NSLOT; i++)
		ha_http_slots[i].fd = -1;
	int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int err = fd < 0 ? errno : 0;
	if (!err && sa.ss_family != AF_UNIX) {
		int one = 1;        /* a restart binds through the old TIME_WAITs */
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (sa.ss_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	}
	if (!err && bind(fd, (struct sockaddr *)&sa, len) != 0) {
		err = errno;
		if (err == EADDRINUSE && sa.ss_family == AF_UNIX && stale_socket(&sa, len)) {
			unlink(((struct sockaddr_un *)&sa)->sun_path);
			err = bind(fd, (struct sockaddr *)&sa, len) == 0 ? 0 : errno;
		}
	}
	if (!err && listen(fd, 64) != 0)
		err = errno;
	if (err) {
		ha_log("heapalloc: HEAP_PROFILE_HTTP=\"%s\": cannot listen (%s, errno %d); "
		       "not serving\n", shown,
		       err == EADDRINUSE ? "address in use" : err == EACCES ? "permission denied" :
		       err == EADDRNOTAVAIL ? "no such local address" : "error", err);
		if (fd >= 0)
			close(fd);
		return err;
	}
	struct sockaddr_storage bound;
	socklen_t bl = sizeof bound;
	if (sa.ss_family == AF_UNIX || getsockname(fd, (struct sockaddr *)&bound, &bl) != 0)
		bound = sa;
	char where[160];
	format_addr(&bound, where, sizeof where);
	if (sa.ss_family == AF_UNIX) {
		size_t n = strlen(((struct sockaddr_un *)&sa)->sun_path);
		unix_path = ha_raw_malloc(n + 1);
		if (unix_path)
			memcpy(unix_path, ((struct sockaddr_un *)&sa)->sun_path, n + 1);
	}
	if (ha_prof_opt.http_addr_file) {
		char line[176];
		ha_snprintf(line, sizeof line, "%s\n", where);
		int e = ha_write_file(ha_prof_opt.http_addr_file, fill_addr, line);
		if (e)
			ha_log("heapalloc: cannot write HEAP_PROFILE_HTTP_ADDR_FILE %s (errno %d)\n",
			       ha_prof_opt.http_addr_file, e);
	} else if (sa.ss_family != AF_UNIX &&
		   (sa.ss_family == AF_INET ? ((struct sockaddr_in *)&sa)->sin_port
					    : ((struct sockaddr_in6 *)&sa)->sin6_port) == 0) {
		/* port 0: the only way to learn which port was chosen */
		ha_log("heapalloc: serving heap profiles on http://%s/debug/pprof/\n", where);
	}
	ha_http_owner = getpid();
	__atomic_store_n(&ha_http_listen_fd, fd, __ATOMIC_RELEASE);
	mark_descendants();
	return 0;
}
void ha_http_postfork_child(void)
{
	int fd = ha_http_listen_fd;
	if (fd < 0)
		return;
	/* the parent serves; the child closes its copies and stays silent
	 * (unix_path is the parent's to remove) */
	__atomic_store_n(&ha_http_listen_fd, -1, __ATOMIC_RELEASE);
	close(fd);
	for (int i = 0; i < NSLOT; i++)
		if (ha_http_slots[i].fd >= 0) {
			close(ha_http_slots[i].fd);
			ha_http_slots[i].fd = -1;
			ha_http_slots[i].state = FREE;
		}
	unix_path = NULL;
}

void ha_http_exit(void)
{
	if (unix_path && ha_http_owner == getpid())
		unlink(unix_path);
}
