/* prof/serve/http.h — HEAP_PROFILE_HTTP: the heap profile served over HTTP/1.1 at
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
 *
 * Its files, one noun each (this header is theirs only):
 *   http_listen.c   the listening socket: address, bind, fork and exit
 *   http_conn.c     the connections: slots, the poll loop's two calls
 *   http_request.c  a request parsed and answered: status and headers,
 *                   the index, the profile now or a delta
 */
#ifndef HA_PROF_HTTP_H
#define HA_PROF_HTTP_H

#include <time.h>

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

/* http_listen.c: the listener (-1: not serving) and the process it is for */
extern int ha_http_listen_fd;
extern pid_t ha_http_owner;
/* http_conn.c: the connections */
extern slot ha_http_slots[NSLOT];
void ha_http_close_slot(slot *s);

/* http_request.c: a complete head (h[0..n), ending in a blank line) answered;
 * status line and headers (the slot goes WRITE), and the bodies */
void ha_http_handle(slot *s, const char *h, size_t n);
void ha_http_respond(slot *s, int code, const char *type, const char *extra, size_t len);
void ha_http_respond_text(slot *s, int code, const char *msg, const char *extra);
void ha_http_serve_index(slot *s);
void ha_http_serve_now(slot *s, int debug);
void ha_http_delta_begin(slot *s, int64_t secs);
void ha_http_delta_end(slot *s);
void ha_http_drop_base(slot *s);

static inline int64_t ha_http_now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

#endif
