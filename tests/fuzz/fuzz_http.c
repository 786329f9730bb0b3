/* tests/fuzz/fuzz_http.c — libFuzzer target for prof/serve/http_*.c, the
 * HEAP_PROFILE_HTTP server, driven through its real socket and the helper
 * loop's two calls (ha_http_poll_set, ha_http_poll_done): each input is sent
 * as one client's bytes on a fresh TCP connection, the client half-closes,
 * and the loop runs until the server closes.  Checks: the answer is empty
 * (a head never finished) or one HTTP/1.1 response with a known status,
 * its head ended by a blank line, and a body of exactly Content-Length
 * bytes (or none, for HEAD).  The profile itself is a stand-in (the
 * profiler is not linked): prof/output/writer.c's real text writer over an empty
 * table, and a few fixed bytes for the pprof encoder.  Test-only. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "prof/prof.h"

/* ---- the profiler's parts http_*.c call (prof/session/session.c, pprof.c, options.c) */
pthread_mutex_t ha_prof_dump_lock = PTHREAD_MUTEX_INITIALIZER;
HA_TLS int ha_prof_busy;
ha_prof_options ha_prof_opt;

int ha_prof_running(void)
{
	return 1;
}

int64_t ha_prof_r = 524288;   /* read by the inline ha_prof_rate() */

uint32_t ha_prof_generation(void)
{
	return 1;
}

int ha_pprof_mem_named(ha_out *gz, int64_t r, const ha_lineset *set, const ha_pprof_how *how)
{
	(void)r;
	(void)set;
	ha_out_bytes(gz, "\x1f\x8b stand-in profile", 20);
	if (how && how->alloc_default)
		ha_out_str(gz, " allocs");
	return gz->err;
}

/* ---- the harness ------------------------------------------------------- */
static struct sockaddr_in addr;

static void start(void)
{
	char path[64];
	snprintf(path, sizeof path, "/tmp/fuzz_http.%d.addr", (int)getpid());
	ha_prof_opt.http_addr_file = path;
	if (ha_http_start("127.0.0.1:0") != 0)
		abort();
	FILE *f = fopen(path, "r");
	unsigned port = 0;
	if (!f || fscanf(f, "127.0.0.1:%u", &port) != 1)
		abort();
	fclose(f);
	unlink(path);
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t)port);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

/* One turn of the helper's loop, waiting at most ms. */
static void turn(int ms)
{
	struct pollfd p[HA_HTTP_NFDS];
	int64_t to = ms;
	int k = ha_http_poll_set(p, HA_HTTP_NFDS, &to);
	int n = poll(p, (nfds_t)k, (int)to);
	ha_http_poll_done(p, n > 0 ? k : 0);
}

static void bad(const char *why, const char *r, size_t n)
{
	fprintf(stderr, "fuzz_http: %s; the answer (%zu bytes): %.*s\n", why, n, (int)(n < 600 ? n : 600), r);
	abort();
}

static void check_answer(const char *r, size_t n, int head_req)
{
	if (n == 0)
		return;                       /* closed before a whole head came */
	static const char *const ok[] = { "200", "301", "400", "404", "405", "431", "503", "505" };
	if (n < 12 || memcmp(r, "HTTP/1.1 ", 9) != 0)
		bad("not an HTTP/1.1 status line", r, n);
	int known = 0;
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		known |= memcmp(r + 9, ok[i], 3) == 0;
	if (!known)
		bad("an unknown status", r, n);
	const char *end = memmem(r, n, "\r\n\r\n", 4);
	const char *cl = memmem(r, n, "\r\nContent-Length: ", 18);
	if (!end || !cl || cl > end)
		bad("no blank line or no Content-Length", r, n);
	size_t body = n - (size_t)(end + 4 - r);
	unsigned long want = strtoul(cl + 18, NULL, 10);
	if (body != want && !(head_req && body == 0))
		bad("the body is not Content-Length bytes", r, n);
}

int LLVMFuzzerTestOneInput(const unsigned char *d, size_t n)
{
	static int started;
	if (!started) {
		started = 1;
		start();
	}
	int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (c < 0)
		abort();
	if (connect(c, (struct sockaddr *)&addr, sizeof addr) != 0 && errno != EINPROGRESS)
		abort();
	size_t sent = 0;
	static char r[1 << 16];
	size_t got = 0;
	int shut = 0;
	for (int i = 0; i < 2000; i++) {
		if (sent < n) {
			ssize_t k = send(c, d + sent, n - sent, MSG_NOSIGNAL);
			if (k > 0)
				sent += (size_t)k;
			else if (k < 0 && errno != EAGAIN && errno != ENOTCONN)
				break;               /* reset: the server answered early */
		} else if (!shut) {
			shutdown(c, SHUT_WR);
			shut = 1;
		}
		turn(shut ? 5 : 0);
		ssize_t k = recv(c, r + got, sizeof r - got, 0);
		if (k == 0 || (k < 0 && errno != EAGAIN) || got == sizeof r)
			break;
		if (k > 0)
			got += (size_t)k;
	}
	close(c);
	for (int i = 0; i < 3; i++)
		turn(0);                      /* the server's side of it closes */
	check_answer(r, got, n >= 5 && memcmp(d, "HEAD ", 5) == 0);
	return 0;
}
