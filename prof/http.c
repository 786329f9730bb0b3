/* prof/http.c — HEAP_PROFILE_HTTP: the heap profile served over HTTP/1.1 at
 * the paths Go's net/http/pprof serves for memory, on the helper thread.
 *
 *   GET /debug/pprof/           an HTML index
 *   GET /debug/pprof/heap       gzipped profile.proto, default inuse_space
 *   GET /debug/pprof/allocs     the same, default alloc_space
 *       ?seconds=N (1..300)     the delta over the next N seconds
 *       ?debug=1                the gperftools text form (a .heap dump)
 *   GET /debug/pprof/symbol     "num_symbols: 0" (pprof asks it for names)
 *   HEAD as GET without the body; another method 405; another path 404.
 *
 * No threads of its own and no library: the listening socket and up to
 * NSLOT connections are polled by the helper thread's loop (helper.c asks
 * ha_http_poll_set for its descriptors and hands the results back to
 * ha_http_poll_done), so a scrape never needs a thread nor blocks the
 * helper's dumps and timeline rows.  Every socket is non-blocking.  A
 * connection reads its request head into 8 KiB (431 past it) within
 * DEADLINE_MS, and gets its response within DEADLINE_MS more, then is
 * closed once what the client still sends is drained (LINGER_MS at most:
 * unread bytes would reset the answer away).  Responses are built one at a time (under ha_prof_dump_lock, as a
 * dump is, so allocating threads wait only for the table copy) and written
 * one at a time; a full set of slots drops its oldest unfinished head for a
 * new connection, so half-open connections cannot lock a scraper out.  A
 * delta waits in its slot (its start snapshot held) while the loop goes on;
 * at most NDELTA wait at once (503 beyond).
 *
 * Never calls the public malloc (raw memory, ha_dump_mem under the dump
 * lock), never raises SIGPIPE (MSG_NOSIGNAL).  Fork: the child closes the
 * listener and the connections (ha_http_postfork_child) and never serves;
 * exec'd descendants find HEAPALLOC_HTTP_ROOT and do not serve either.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "prof/prof.h"

#define NSLOT 8                    /* connections open at once */
#define NDELTA 4                   /* ?seconds= requests waiting at once */
#define HEAD_MAX 8192              /* request line + headers */
#define DEADLINE_MS 5000           /* to read the head; again to write */
#define LINGER_MS 1000             /* to drain what the client still sends */
#define MAX_SECONDS 300            /* the longest delta window */

enum { FREE, READ, READY, DELTA, WRITE, LINGER };
enum { HEAP, ALLOCS };

typedef struct slot {
	int fd, state;
	int64_t since;                 /* ms: accepted (READ), done reading (READY) */
	int64_t deadline;              /* ms: READ and WRITE */
	char *head;                    /* HEAD_MAX bytes of raw memory */
	size_t hlen;
	/* the request, once parsed */
	int what, head_only;
	int delta;                     /* READY: a delta whose window is over */
	/* DELTA: the window's start */
	int64_t due, start_ms;
	ha_line *base;
	size_t nbase;
	uint32_t gen;
	/* WRITE: status line and headers, then the body */
	char hdr[512];
	size_t hdr_len, off;
	char *body;                    /* raw memory, or NULL (the body is static) */
	const char *cbody;
	size_t body_len;
} slot;

static int listen_fd = -1;
static pid_t owner;                /* the process that serves */
static slot slots[NSLOT];
static char *unix_path;            /* unix:PATH we bound, unlinked at exit */
static int64_t accept_pause;       /* ms: out of descriptors, wait before accepting */

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* ---- the listening socket ------------------------------------------------ */

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
	extern char **environ;
	static char var[48];
	if (!environ)
		return;
	ha_snprintf(var, sizeof var, "HEAPALLOC_HTTP_ROOT=%d", (int)getpid());
	size_t n = 0;
	while (environ[n])
		n++;
	char **e = ha_raw_malloc((n + 2) * sizeof *e);
	if (!e)
		return;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "HEAPALLOC_HTTP_ROOT=", 20) != 0)
			e[k++] = environ[i];
	e[k++] = var;
	e[k] = NULL;
	environ = e;
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
		slots[i].fd = -1;
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
	owner = getpid();
	__atomic_store_n(&listen_fd, fd, __ATOMIC_RELEASE);
	mark_descendants();
	return 0;
}

/* ---- responses ------------------------------------------------------------ */

static const char *reason_of(int code)
{
	switch (code) {
	case 200: return "OK";
	case 301: return "Moved Permanently";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 431: return "Request Header Fields Too Large";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Internal Server Error";
	}
}

/* Status line and headers for a body of len bytes; the slot goes WRITE. */
static void respond(slot *s, int code, const char *type, const char *extra, size_t len)
{
	int n = ha_snprintf(s->hdr, sizeof s->hdr,
			    "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			    "X-Content-Type-Options: nosniff\r\n%sConnection: close\r\n\r\n",
			    code, reason_of(code), type, len, extra ? extra : "");
	s->hdr_len = n > 0 && (size_t)n < sizeof s->hdr ? (size_t)n : 0;
	s->off = 0;
	s->body_len = s->head_only ? 0 : len;
	s->state = WRITE;
	s->deadline = now_ms() + DEADLINE_MS;
}

static void respond_text(slot *s, int code, const char *msg, const char *extra)
{
	s->cbody = msg;
	respond(s, code, "text/plain; charset=utf-8", extra, strlen(msg));
}

/* A body built in raw memory (ha_out): its buffer is the slot's now. */
static void respond_out(slot *s, ha_out *o, const char *type, const char *extra)
{
	if (o->err) {
		if (o->buf)
			ha_raw_free(o->buf);
		respond_text(s, 503, "heap profile: out of memory\n", NULL);
		return;
	}
	s->body = o->buf;
	s->cbody = o->buf;
	respond(s, 200, type, extra, o->len);
}

static const char index_html[] =
	"<html>\n<head>\n<title>/debug/pprof/</title>\n</head>\n<body>\n"
	"/debug/pprof/<br>\n<br>\n"
	"Types of profiles available (heapalloc: memory only):\n"
	"<table>\n<thead><td>Count</td><td>Profile</td></thead>\n"
	"<tr><td>-</td><td><a href='allocs?debug=1'>allocs</a></td></tr>\n"
	"<tr><td>-</td><td><a href='heap?debug=1'>heap</a></td></tr>\n"
	"</table>\n<br>\n<p>\n<ul>\n"
	"<li><div class=profile-name>allocs: </div> A sampling of all past memory "
	"allocations (gzipped profile.proto, default sample type alloc_space)</li>\n"
	"<li><div class=profile-name>heap: </div> A sampling of memory allocations of live "
	"objects (default sample type inuse_space). ?seconds=N gives the change over the "
	"next N seconds (at most 300); ?debug=1 the gperftools text form.</li>\n"
	"</ul>\n</p>\n</body>\n</html>\n";

static const char pb_type[] = "application/octet-stream";

/* The profile now, as asked; under the dump lock, like a dump. */
static void serve_now(slot *s, int debug)
{
	ha_out o = { NULL, 0, 0, -1, 0 };
	int running = 1;
	if (debug) {
		int busy = ha_prof_busy;
		ha_prof_busy = 1;
		ha_lock(&ha_prof_dump_lock);
		running = ha_prof_running();
		if (running)
			ha_writer_profile(&o, ha_prof_rate());
		ha_unlock(&ha_prof_dump_lock);
		ha_prof_busy = busy;
	} else {
		/* names filled in (prof/names.c); it takes the dump lock itself */
		ha_pprof_how how = { s->what == ALLOCS, 0, 0 };
		int e = ha_pprof_mem_named(&o, ha_prof_rate(), NULL, &how);
		running = e != ENOENT;
		if (e && !o.err)
			o.err = e;
	}
	if (!running) {
		respond_text(s, 503, "heap profiling is stopped\n", NULL);
		return;
	}
	if (debug)
		respond_out(s, &o, "text/plain; charset=utf-8", NULL);
	else
		respond_out(s, &o, pb_type,
			    s->what == ALLOCS ? "Content-Disposition: attachment; filename=\"allocs\"\r\n"
					      : "Content-Disposition: attachment; filename=\"heap\"\r\n");
}

static int deltas_waiting(void)
{
	int n = 0;
	for (int i = 0; i < NSLOT; i++)
		n += slots[i].state == DELTA;
	return n;
}

/* ?seconds=N: copy the table's counts now; the loop answers at the end. */
static void delta_begin(slot *s, int64_t secs)
{
	if (deltas_waiting() >= NDELTA) {
		respond_text(s, 503, "too many ?seconds= profiles in progress\n", NULL);
		return;
	}
	size_t n = 0;
	int own = 0, running;
	int busy = ha_prof_busy;
	ha_prof_busy = 1;
	ha_lock(&ha_prof_dump_lock);
	running = ha_prof_running();
	const ha_line *lines = running ? ha_lines_of(NULL, &n, &own) : NULL;
	s->gen = ha_prof_generation();
	ha_unlock(&ha_prof_dump_lock);
	ha_prof_busy = busy;
	if (!running) {
		respond_text(s, 503, "heap profiling is stopped\n", NULL);
		return;
	}
	if (!lines && n) {
		respond_text(s, 503, "heap profile: out of memory\n", NULL);
		return;
	}
	s->base = (ha_line *)(uintptr_t)lines;   /* own: a fresh snapshot */
	s->nbase = n;
	s->start_ms = now_ms();
	s->due = s->start_ms + secs * 1000;
	s->state = DELTA;
}

static void drop_base(slot *s)
{
	if (s->base)
		ha_raw_free(s->base);
	s->base = NULL;
	s->nbase = 0;
}

/* The window is over: today's counts minus the start's, bucket by bucket
 * (a bucket lives as long as the session; the session's generation says
 * it is still the same one). */
static void delta_end(slot *s)
{
	ha_out o = { NULL, 0, 0, -1, 0 };
	int code = 200;
	int busy = ha_prof_busy;
	ha_prof_busy = 1;
	ha_lock(&ha_prof_dump_lock);
	ha_line *lines = NULL;
	uint32_t *at = NULL;
	ha_lineset set = { NULL, 0, 0, { 0, 0 } };
	if (!ha_prof_running() || ha_prof_generation() != s->gen) {
		code = 503;
	} else {
		size_t n = 0;
		int own = 0;
		lines = (ha_line *)(uintptr_t)ha_lines_of(NULL, &n, &own);
		uint32_t top = 0;
		for (size_t i = 0; i < n; i++)
			if (lines[i].b->idx >= top)
				top = lines[i].b->idx + 1;
		at = n ? ha_dump_mem((size_t)top * sizeof *at) : NULL;
		if (n && (!lines || !at)) {
			o.err = ENOMEM;
		} else {
			memset(at, 0, (size_t)top * sizeof *at);
			for (size_t i = 0; i < s->nbase; i++)
				if (s->base[i].b->idx < top)
					at[s->base[i].b->idx] = (uint32_t)i + 1;
			for (size_t i = 0; i < n; i++) {
				uint32_t k = at[lines[i].b->idx];
				if (!k)
					continue;
				const ha_line *b = &s->base[k - 1];
				lines[i].alloc_count -= b->alloc_count;
				lines[i].alloc_bytes -= b->alloc_bytes;
				lines[i].free_count -= b->free_count;
				lines[i].free_bytes -= b->free_bytes;
			}
			set.v = lines;
			set.n = n;
		}
	}
	ha_unlock(&ha_prof_dump_lock);
	if (code == 200 && !o.err) {
		/* named without the dump lock held (it takes it itself); the
		 * buckets are good while the session is the same */
		ha_pprof_how how = { s->what == ALLOCS, (now_ms() - s->start_ms) * 1000000, s->gen };
		int e = ha_pprof_mem_named(&o, ha_prof_rate(), &set, &how);
		if (e == ENOENT)
			code = 503;
		else if (e && !o.err)
			o.err = e;
	}
	ha_lock(&ha_prof_dump_lock);   /* ha_dump_mem's reserve is the lock's */
	if (at)
		ha_dump_mem_free(at);
	if (lines)
		ha_dump_mem_free(lines);
	ha_unlock(&ha_prof_dump_lock);
	ha_prof_busy = busy;
	drop_base(s);
	if (code == 503)
		respond_text(s, 503, "heap profiling stopped or restarted during the window\n",
			     NULL);
	else
		respond_out(s, &o, pb_type, s->what == ALLOCS
			    ? "Content-Disposition: attachment; filename=\"allocs-delta\"\r\n"
			    : "Content-Disposition: attachment; filename=\"heap-delta\"\r\n");
}

/* ---- the request ------------------------------------------------------------ */

/* A query value: decimal digits only (at most 9); -1 otherwise. */
static int64_t query_num(const char *v, size_t n)
{
	int64_t x = 0;
	if (!n || n > 9)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (v[i] - '0');
	}
	return x;
}

static int tchar(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The head is complete (h[0..n), ending in a blank line): answer it. */
static void handle(slot *s, const char *h, size_t n)
{
	const char *end = memchr(h, '\n', n), *p = h;
	s->head_only = 0;              /* the slot's last request may have been a HEAD */
	/* request line: METHOD SP TARGET SP HTTP/1.x */
	const char *m = p;
	while (p < end && tchar(*p))
		p++;
	size_t mlen = (size_t)(p - m);
	if (!mlen || p >= end || *p != ' ') {
		respond_text(s, 400, "malformed request line\n", NULL);
		return;
	}
	const char *t = ++p;
	while (p < end && *p != ' ' && (unsigned char)*p > 0x20 && *p != 0x7f)
		p++;
	size_t tlen = (size_t)(p - t);
	const char *ver = p + 1;
	const char *vend = end > h && end[-1] == '\r' ? end - 1 : end;
	if (!tlen || p >= end || *p != ' ' || vend - ver != 8 || memcmp(ver, "HTTP/1.", 7) != 0) {
		if (tlen && p < end && *p == ' ' && vend - ver >= 5 && memcmp(ver, "HTTP/", 5) == 0)
			respond_text(s, 505, "only HTTP/1.0 and HTTP/1.1\n", NULL);
		else
			respond_text(s, 400, "malformed request line\n", NULL);
		return;
	}
	/* absolute-form (a proxy's): skip the scheme and authority */
	if (tlen > 7 && (memcmp(t, "http://", 7) == 0)) {
		const char *slash = memchr(t + 7, '/', tlen - 7);
		if (!slash) {
			respond_text(s, 400, "malformed request target\n", NULL);
			return;
		}
		tlen -= (size_t)(slash - t);
		t = slash;
	}
	const char *q = memchr(t, '?', tlen);
	size_t plen = q ? (size_t)(q - t) : tlen;
	int64_t secs = 0, debug = 0;
	if (q) {
		const char *qe = t + tlen;
		for (const char *k = q + 1; k < qe;) {
			const char *amp = memchr(k, '&', (size_t)(qe - k));
			const char *kend = amp ? amp : qe;
			const char *eq = memchr(k, '=', (size_t)(kend - k));
			const char *v = eq ? eq + 1 : kend;
			size_t klen = (size_t)((eq ? eq : kend) - k), vlen = (size_t)(kend - v);
			if (klen == 7 && memcmp(k, "seconds", 7) == 0) {
				secs = query_num(v, vlen);
				if (secs < 0 || secs > MAX_SECONDS) {
					respond_text(s, 400, "seconds: a whole number from 0 to 300\n",
						     NULL);
					return;
				}
			} else if (klen == 5 && memcmp(k, "debug", 5) == 0) {
				debug = query_num(v, vlen);
				if (debug < 0)
					debug = 0;      /* as Go: junk is 0 */
			}
			k = kend + (amp != NULL);
		}
	}
#define IS(path) (plen == sizeof(path) - 1 && memcmp(t, path, plen) == 0)
	/* pprof asks /debug/pprof/symbol (POST) for names the profile lacks:
	 * "none known" lets it carry on with its own (a 404 stops it) */
	if (IS("/debug/pprof/symbol")) {
		respond_text(s, 200, "num_symbols: 0\n", NULL);
		return;
	}
	int known = IS("/debug/pprof/") || IS("/debug/pprof") || IS("/debug/pprof/heap") ||
		    IS("/debug/pprof/allocs");
	if (!known) {
		respond_text(s, 404, "404 page not found\n", NULL);
		return;
	}
	/* a known path: only GET and HEAD */
	int get = mlen == 3 && memcmp(m, "GET", 3) == 0;
	s->head_only = mlen == 4 && memcmp(m, "HEAD", 4) == 0;
	if (!get && !s->head_only) {
		respond_text(s, 405, "method not allowed: GET or HEAD\n", "Allow: GET, HEAD\r\n");
		return;
	}
	if (IS("/debug/pprof/")) {
		s->cbody = index_html;
		respond(s, 200, "text/html; charset=utf-8", NULL, sizeof index_html - 1);
		return;
	}
	if (IS("/debug/pprof")) {
		respond_text(s, 301, "/debug/pprof/\n", "Location: /debug/pprof/\r\n");
		return;
	}
#undef IS
	s->what = plen == sizeof "/debug/pprof/heap" - 1 ? HEAP : ALLOCS;
	if (secs > 0 && debug) {
		respond_text(s, 400, "seconds and debug params are incompatible\n", NULL);
		return;
	}
	if (secs > 0)
		delta_begin(s, secs);
	else
		serve_now(s, debug != 0);
}

/* ---- the connections ------------------------------------------------------- */

static void close_slot(slot *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	drop_base(s);
	if (s->body)
		ha_raw_free(s->body);
	s->body = NULL;
	s->cbody = NULL;
	s->state = FREE;
	s->delta = 0;
	s->head_only = 0;
	s->hlen = 0;
}

static int writing(void)
{
	for (int i = 0; i < NSLOT; i++)
		if (slots[i].state == WRITE)
			return 1;
	return 0;
}

/* Read what came; answer a complete head (if no response is being written). */
static void read_more(slot *s)
{
	for (;;) {
		if (s->hlen == HEAD_MAX) {
			s->state = READY;      /* too long: answered as soon as it may be */
			s->since = now_ms();
			return;
		}
		ssize_t k = recv(s->fd, s->head + s->hlen, HEAD_MAX - s->hlen, MSG_DONTWAIT);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (k <= 0) {
			close_slot(s);         /* gone before asking */
			return;
		}
		size_t from = s->hlen > 3 ? s->hlen - 3 : 0;
		s->hlen += (size_t)k;
		for (size_t i = from; i + 1 < s->hlen; i++)
			if (s->head[i] == '\n' && (s->head[i + 1] == '\n' ||
			    (s->head[i + 1] == '\r' && i + 2 < s->hlen && s->head[i + 2] == '\n'))) {
				s->state = READY;
				s->since = now_ms();
				return;
			}
	}
}

/* Answer the oldest complete head, when no response is being written. */
static void answer_ready(void)
{
	while (!writing()) {
		slot *s = NULL;
		for (int i = 0; i < NSLOT; i++)
			if (slots[i].state == READY && !slots[i].delta &&
			    (!s || slots[i].since < s->since))
				s = &slots[i];
		if (!s)
			return;
		if (s->hlen == HEAD_MAX && !memmem(s->head, s->hlen, "\n\n", 2) &&
		    !memmem(s->head, s->hlen, "\n\r\n", 3))
			respond_text(s, 431, "request head larger than 8 KiB\n", NULL);
		else
			handle(s, s->head, s->hlen);
	}
}

/* LINGER: discard what comes until the client closes. */
static void drain(slot *s)
{
	char sink[4096];
	for (;;) {
		ssize_t k = recv(s->fd, sink, sizeof sink, MSG_DONTWAIT);
		if (k > 0)
			continue;
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		close_slot(s);
		return;
	}
}

/* Send what the socket takes; close when all is sent. */
static void write_more(slot *s)
{
	while (s->off < s->hdr_len + s->body_len) {
		struct iovec v[2];
		int nv = 0;
		if (s->off < s->hdr_len)
			v[nv++] = (struct iovec){ s->hdr + s->off, s->hdr_len - s->off };
		size_t boff = s->off > s->hdr_len ? s->off - s->hdr_len : 0;
		if (s->body_len > boff)
			v[nv++] = (struct iovec){ (char *)(uintptr_t)s->cbody + boff,
						  s->body_len - boff };
		struct msghdr mh = { 0 };
		mh.msg_iov = v;
		mh.msg_iovlen = (size_t)nv;
		ssize_t k = sendmsg(s->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (k <= 0)
			break;                 /* reset by the client */
		s->off += (size_t)k;
	}
	/* everything sent (or the client went).  Closing with unread bytes
	 * (a request body, the rest of an oversized head) would reset the
	 * connection and could cost the client our answer: end our side, and
	 * drain theirs for at most LINGER_MS first. */
	shutdown(s->fd, SHUT_WR);
	if (s->body)
		ha_raw_free(s->body);
	s->body = NULL;
	s->state = LINGER;
	s->since = now_ms();
	s->deadline = s->since + LINGER_MS;
	drain(s);
}

/* The program closed our listening socket (a daemon closing every
 * descriptor): stop serving rather than poll a descriptor that is not ours. */
static void lost_listener(void)
{
	ha_log("heapalloc: the HEAP_PROFILE_HTTP socket was closed by the program; not serving\n");
	__atomic_store_n(&listen_fd, -1, __ATOMIC_RELEASE);
	for (int i = 0; i < NSLOT; i++)
		if (slots[i].state != FREE)
			close_slot(&slots[i]);
}

static void accept_one(void)
{
	slot *s = NULL, *oldest = NULL;
	for (int i = 0; i < NSLOT && !s; i++) {
		if (slots[i].state == FREE)
			s = &slots[i];
		else if ((slots[i].state == READ || slots[i].state == LINGER) &&
			 (!oldest || slots[i].since < oldest->since))
			oldest = &slots[i];
	}
	if (!s && !oldest)
		return;
	int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM))
		accept_pause = now_ms() + 100;     /* the listener stays readable: no spinning */
	else if (fd < 0 && (errno == EBADF || errno == ENOTSOCK || errno == EINVAL))
		lost_listener();
	if (fd < 0)
		return;                    /* EAGAIN, a connection reset: next time */
	if (!s) {
		close_slot(oldest);        /* the oldest unfinished head (or drain) gives way */
		s = oldest;
	}
	if (!s->head && !(s->head = ha_raw_malloc(HEAD_MAX))) {
		close(fd);
		return;
	}
	s->fd = fd;
	s->state = READ;
	s->hlen = 0;
	s->since = now_ms();
	s->deadline = s->since + DEADLINE_MS;
	read_more(s);                  /* the request often came with the connection */
}

/* Free slot or one that may give way: the listener is worth polling. */
static int can_accept(void)
{
	for (int i = 0; i < NSLOT; i++)
		if (slots[i].state == FREE || slots[i].state == READ || slots[i].state == LINGER)
			return 1;
	return 0;
}

int ha_http_poll_set(struct pollfd *p, int max, int64_t *to_ms)
{
	int fd = __atomic_load_n(&listen_fd, __ATOMIC_ACQUIRE);
	if (fd < 0 || owner != getpid() || max < NSLOT + 1)
		return 0;
	int64_t now = now_ms(), next = INT64_MAX;
	int n = 0;
	if (can_accept() && now >= accept_pause)
		p[n++] = (struct pollfd){ fd, POLLIN, 0 };
	else if (now < accept_pause)
		next = accept_pause;
	for (int i = 0; i < NSLOT; i++) {
		slot *s = &slots[i];
		short ev = s->state == READ || s->state == LINGER ? POLLIN :
			   s->state == WRITE ? POLLOUT :
			   s->state == DELTA ? POLLRDHUP : 0;
		if (!ev)
			continue;
		p[n++] = (struct pollfd){ s->fd, ev, 0 };
		int64_t at = s->state == DELTA ? s->due : s->deadline;
		if (at < next)
			next = at;
	}
	if (next != INT64_MAX) {
		int64_t wait = next > now ? next - now : 0;
		if (*to_ms < 0 || *to_ms > wait)
			*to_ms = wait;
	}
	return n;
}

void ha_http_poll_done(const struct pollfd *p, int n)
{
	if (listen_fd < 0 || owner != getpid())
		return;
	for (int j = 0; j < n; j++) {
		if (!p[j].revents)
			continue;
		if (p[j].fd == listen_fd && (p[j].revents & POLLNVAL)) {
			lost_listener();
			return;
		}
		if (p[j].fd == listen_fd) {
			/* a few at a time: the other duties of the loop come first */
			for (int k = 0; k < 4 && can_accept(); k++)
				accept_one();
			continue;
		}
		for (int i = 0; i < NSLOT; i++) {
			slot *s = &slots[i];
			if (s->fd != p[j].fd || s->state == FREE)
				continue;
			if (p[j].revents & POLLNVAL) {
				s->fd = -1;        /* closed under us: the number is not ours */
				close_slot(s);
				continue;
			}
			if (s->state == READ)
				read_more(s);
			else if (s->state == LINGER)
				drain(s);
			else if (s->state == WRITE)
				write_more(s);
			else if (s->state == DELTA && (p[j].revents & (POLLRDHUP | POLLHUP | POLLERR)))
				close_slot(s);     /* the client gave up on the window */
		}
	}
	int64_t now = now_ms();
	for (int i = 0; i < NSLOT; i++) {
		slot *s = &slots[i];
		if ((s->state == READ || s->state == WRITE || s->state == LINGER) &&
		    now >= s->deadline)
			close_slot(s);             /* too slow: no answer for it */
		else if (s->state == DELTA && now >= s->due) {
			s->state = READY;          /* built when no response is being written */
			s->delta = 1;
			s->since = s->start_ms;
		}
	}
	/* READY deltas are answered by delta_end, others by handle */
	while (!writing()) {
		slot *d = NULL;
		for (int i = 0; i < NSLOT; i++)
			if (slots[i].state == READY && slots[i].delta)
				d = &slots[i];
		if (!d)
			break;
		delta_end(d);
	}
	answer_ready();
	/* a response is written at once when the socket takes it all */
	for (int i = 0; i < NSLOT; i++)
		if (slots[i].state == WRITE && slots[i].off == 0)
			write_more(&slots[i]);
}

void ha_http_postfork_child(void)
{
	int fd = listen_fd;
	if (fd < 0)
		return;
	/* the parent serves; the child closes its copies and stays silent
	 * (unix_path is the parent's to remove) */
	__atomic_store_n(&listen_fd, -1, __ATOMIC_RELEASE);
	close(fd);
	for (int i = 0; i < NSLOT; i++)
		if (slots[i].fd >= 0) {
			close(slots[i].fd);
			slots[i].fd = -1;
			slots[i].state = FREE;
		}
	unix_path = NULL;
}

void ha_http_exit(void)
{
	if (unix_path && owner == getpid())
		unlink(unix_path);
}
