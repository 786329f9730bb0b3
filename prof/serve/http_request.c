/* prof/serve/http_request.c — HEAP_PROFILE_HTTP's requests and their answers
 * (see http.h): the request line parsed (METHOD SP TARGET SP HTTP/1.x,
 * origin- or absolute-form; headers are not looked at), its query
 * (seconds=, debug=) and path; then the status line and headers, the index,
 * the profile now (under the dump lock, as a dump) or the ?seconds= delta
 * (a start snapshot held in the slot, subtracted bucket by bucket when the
 * window is over).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <string.h>

#include "prof/serve/http.h"

/* ---- the answers ------------------------------------------------------------ */

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
void ha_http_respond(slot *s, int code, const char *type, const char *extra, size_t len)
{
	int n = ha_snprintf(s->hdr, sizeof s->hdr,
			    "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			    "X-Content-Type-Options: nosniff\r\n%sConnection: close\r\n\r\n",
			    code, reason_of(code), type, len, extra ? extra : "");
	s->hdr_len = n > 0 && (size_t)n < sizeof s->hdr ? (size_t)n : 0;
	s->off = 0;
	s->body_len = s->head_only ? 0 : len;
	s->state = WRITE;
	s->deadline = ha_http_now_ms() + DEADLINE_MS;
}

void ha_http_respond_text(slot *s, int code, const char *msg, const char *extra)
{
	s->cbody = msg;
	ha_http_respond(s, code, "text/plain; charset=utf-8", extra, strlen(msg));
}

/* A body built in raw memory (ha_out): its buffer is the slot's now. */
static void respond_out(slot *s, ha_out *o, const char *type, const char *extra)
{
	if (o->err) {
		if (o->buf)
			ha_raw_free(o->buf);
		ha_http_respond_text(s, 503, "heap profile: out of memory\n", NULL);
		return;
	}
	s->body = o->buf;
	s->cbody = o->buf;
	ha_http_respond(s, 200, type, extra, o->len);
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

void ha_http_serve_index(slot *s)
{
	s->cbody = index_html;
	ha_http_respond(s, 200, "text/html; charset=utf-8", NULL, sizeof index_html - 1);
}

static const char pb_type[] = "application/octet-stream";

/* The profile now, as asked; under the dump lock, like a dump. */
void ha_http_serve_now(slot *s, int debug)
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
		/* names filled in (prof/output/sym_loader.c); it takes the dump lock itself */
		ha_pprof_how how = { s->what == ALLOCS, 0, 0 };
		int e = ha_pprof_mem_named(&o, ha_prof_rate(), NULL, &how);
		running = e != ENOENT;
		if (e && !o.err)
			o.err = e;
	}
	if (!running) {
		ha_http_respond_text(s, 503, "heap profiling is stopped\n", NULL);
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
		n += ha_http_slots[i].state == DELTA;
	return n;
}

/* ?seconds=N: copy the table's counts now; the loop answers at the end. */
void ha_http_delta_begin(slot *s, int64_t secs)
{
	if (deltas_waiting() >= NDELTA) {
		ha_http_respond_text(s, 503, "too many ?seconds= profiles in progress\n", NULL);
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
		ha_http_respond_text(s, 503, "heap profiling is stopped\n", NULL);
		return;
	}
	if (!lines && n) {
		ha_http_respond_text(s, 503, "heap profile: out of memory\n", NULL);
		return;
	}
	s->base = (ha_line *)(uintptr_t)lines;   /* own: a fresh snapshot */
	s->nbase = n;
	s->start_ms = ha_http_now_ms();
	s->due = s->start_ms + secs * 1000;
	s->state = DELTA;
}

void ha_http_drop_base(slot *s)
{
	if (s->base)
		ha_raw_free(s->base);
	s->base = NULL;
	s->nbase = 0;
}

/* The window is over: today's counts minus the start's, bucket by bucket
 * (a bucket lives as long as the session; the session's generation says
 * it is still the same one). */
void ha_http_delta_end(slot *s)
{
	ha_out o = { NULL, 0, 0, -1, 0 };
	int code = 200;
	int busy = ha_prof_busy;
	ha_prof_busy = 1;
	ha_lock(&ha_prof_dump_lock);
	ha_line *lines = NULL;
	uint32_t *at = NULL;
	ha_lineset set = { NULL, 0, 0, { 0, 0 }, 0 };
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
		ha_pprof_how how = { s->what == ALLOCS, (ha_http_now_ms() - s->start_ms) * 1000000, s->gen };
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
	ha_http_drop_base(s);
	if (code == 503)
		ha_http_respond_text(s, 503, "heap profiling stopped or restarted during the window\n",
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
void ha_http_handle(slot *s, const char *h, size_t n)
{
	const char *end = memchr(h, '\n', n), *p = h;
	s->head_only = 0;              /* the slot's last request may have been a HEAD */
	/* request line: METHOD SP TARGET SP HTTP/1.x */
	const char *m = p;
	while (p < end && tchar(*p))
		p++;
	size_t mlen = (size_t)(p - m);
	if (!mlen || p >= end || *p != ' ') {
		ha_http_respond_text(s, 400, "malformed request line\n", NULL);
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
			ha_http_respond_text(s, 505, "only HTTP/1.0 and HTTP/1.1\n", NULL);
		else
			ha_http_respond_text(s, 400, "malformed request line\n", NULL);
		return;
	}
	/* absolute-form (a proxy's): skip the scheme and authority */
	if (tlen > 7 && (memcmp(t, "http://", 7) == 0)) {
		const char *slash = memchr(t + 7, '/', tlen - 7);
		if (!slash) {
			ha_http_respond_text(s, 400, "malformed request target\n", NULL);
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
					ha_http_respond_text(s, 400, "seconds: a whole number from 0 to 300\n",
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
		ha_http_respond_text(s, 200, "num_symbols: 0\n", NULL);
		return;
	}
	int known = IS("/debug/pprof/") || IS("/debug/pprof") || IS("/debug/pprof/heap") ||
		    IS("/debug/pprof/allocs");
	if (!known) {
		ha_http_respond_text(s, 404, "404 page not found\n", NULL);
		return;
	}
	/* a known path: only GET and HEAD */
	int get = mlen == 3 && memcmp(m, "GET", 3) == 0;
	s->head_only = mlen == 4 && memcmp(m, "HEAD", 4) == 0;
	if (!get && !s->head_only) {
		ha_http_respond_text(s, 405, "method not allowed: GET or HEAD\n", "Allow: GET, HEAD\r\n");
		return;
	}
	if (IS("/debug/pprof/")) {
		ha_http_serve_index(s);
		return;
	}
	if (IS("/debug/pprof")) {
		ha_http_respond_text(s, 301, "/debug/pprof/\n", "Location: /debug/pprof/\r\n");
		return;
	}
#undef IS
	s->what = plen == sizeof "/debug/pprof/heap" - 1 ? HEAP : ALLOCS;
	if (secs > 0 && debug) {
		ha_http_respond_text(s, 400, "seconds and debug params are incompatible\n", NULL);
		return;
	}
	if (secs > 0)
		ha_http_delta_begin(s, secs);
	else
		ha_http_serve_now(s, debug != 0);
}
