/* prof/serve/http_conn.c — HEAP_PROFILE_HTTP's connections (see http.h): up to
 * NSLOT non-blocking sockets, accepted, read to a complete head, answered
 * one response at a time, written and drained, each against its deadline,
 * all from the helper loop's two calls (ha_http_poll_set, ha_http_poll_done).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "prof/serve/http.h"

slot ha_http_slots[NSLOT];
static int64_t accept_pause;       /* ms: out of descriptors, wait before accepting */

void ha_http_close_slot(slot *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	ha_http_drop_base(s);
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
		if (ha_http_slots[i].state == WRITE)
			return 1;
	return 0;
}

/* Read what came; answer a complete head (if no response is being written). */
static void read_more(slot *s)
{
	for (;;) {
		if (s->hlen == HEAD_MAX) {
			s->state = READY;      /* too long: answered as soon as it may be */
			s->since = ha_http_now_ms();
			return;
		}
		ssize_t k = recv(s->fd, s->head + s->hlen, HEAD_MAX - s->hlen, MSG_DONTWAIT);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (k <= 0) {
			ha_http_close_slot(s);         /* gone before asking */
			return;
		}
		size_t from = s->hlen > 3 ? s->hlen - 3 : 0;
		s->hlen += (size_t)k;
		for (size_t i = from; i + 1 < s->hlen; i++)
			if (s->head[i] == '\n' && (s->head[i + 1] == '\n' ||
			    (s->head[i + 1] == '\r' && i + 2 < s->hlen && s->head[i + 2] == '\n'))) {
				s->state = READY;
				s->since = ha_http_now_ms();
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
			if (ha_http_slots[i].state == READY && !ha_http_slots[i].delta &&
			    (!s || ha_http_slots[i].since < s->since))
				s = &ha_http_slots[i];
		if (!s)
			return;
		if (s->hlen == HEAD_MAX && !memmem(s->head, s->hlen, "\n\n", 2) &&
		    !memmem(s->head, s->hlen, "\n\r\n", 3))
			ha_http_respond_text(s, 431, "request head larger than 8 KiB\n", NULL);
		else
			ha_http_handle(s, s->head, s->hlen);
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
		ha_http_close_slot(s);
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
	s->since = ha_http_now_ms();
	s->deadline = s->since + LINGER_MS;
	drain(s);
}

/* The program closed our listening socket (a daemon closing every
 * descriptor): stop serving rather than poll a descriptor that is not ours. */
static void lost_listener(void)
{
	ha_log("heapalloc: the HEAP_PROFILE_HTTP socket was closed by the program; not serving\n");
	__atomic_store_n(&ha_http_listen_fd, -1, __ATOMIC_RELEASE);
	for (int i = 0; i < NSLOT; i++)
		if (ha_http_slots[i].state != FREE)
			ha_http_close_slot(&ha_http_slots[i]);
}

static void accept_one(void)
{
	slot *s = NULL, *oldest = NULL;
	for (int i = 0; i < NSLOT && !s; i++) {
		if (ha_http_slots[i].state == FREE)
			s = &ha_http_slots[i];
		else if ((ha_http_slots[i].state == READ || ha_http_slots[i].state == LINGER) &&
			 (!oldest || ha_http_slots[i].since < oldest->since))
			oldest = &ha_http_slots[i];
	}
	if (!s && !oldest)
		return;
	int fd = accept4(ha_http_listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM))
		accept_pause = ha_http_now_ms() + 100;     /* the listener stays readable: no spinning */
	else if (fd < 0 && (errno == EBADF || errno == ENOTSOCK || errno == EINVAL))
		lost_listener();
	if (fd < 0)
		return;                    /* EAGAIN, a connection reset: next time */
	if (!s) {
		ha_http_close_slot(oldest);        /* the oldest unfinished head (or drain) gives way */
		s = oldest;
	}
	if (!s->head && !(s->head = ha_raw_malloc(HEAD_MAX))) {
		close(fd);
		return;
	}
	s->fd = fd;
	s->state = READ;
	s->hlen = 0;
	s->since = ha_http_now_ms();
	s->deadline = s->since + DEADLINE_MS;
	read_more(s);                  /* the request often came with the connection */
}

/* Free slot or one that may give way: the listener is worth polling. */
static int can_accept(void)
{
	for (int i = 0; i < NSLOT; i++)
		if (ha_http_slots[i].state == FREE || ha_http_slots[i].state == READ || ha_http_slots[i].state == LINGER)
			return 1;
	return 0;
}

int ha_http_poll_set(struct pollfd *p, int max, int64_t *to_ms)
{
	int fd = __atomic_load_n(&ha_http_listen_fd, __ATOMIC_ACQUIRE);
	if (fd < 0 || ha_http_owner != getpid() || max < NSLOT + 1)
		return 0;
	int64_t now = ha_http_now_ms(), next = INT64_MAX;
	int n = 0;
	if (can_accept() && now >= accept_pause)
		p[n++] = (struct pollfd){ fd, POLLIN, 0 };
	else if (now < accept_pause)
		next = accept_pause;
	for (int i = 0; i < NSLOT; i++) {
		slot *s = &ha_http_slots[i];
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
	if (ha_http_listen_fd < 0 || ha_http_owner != getpid())
		return;
	for (int j = 0; j < n; j++) {
		if (!p[j].revents)
			continue;
		if (p[j].fd == ha_http_listen_fd && (p[j].revents & POLLNVAL)) {
			lost_listener();
			return;
		}
		if (p[j].fd == ha_http_listen_fd) {
			/* a few at a time: the other duties of the loop come first */
			for (int k = 0; k < 4 && can_accept(); k++)
				accept_one();
			continue;
		}
		for (int i = 0; i < NSLOT; i++) {
			slot *s = &ha_http_slots[i];
			if (s->fd != p[j].fd || s->state == FREE)
				continue;
			if (p[j].revents & POLLNVAL) {
				s->fd = -1;        /* closed under us: the number is not ours */
				ha_http_close_slot(s);
				continue;
			}
			if (s->state == READ)
				read_more(s);
			else if (s->state == LINGER)
				drain(s);
			else if (s->state == WRITE)
				write_more(s);
			else if (s->state == DELTA && (p[j].revents & (POLLRDHUP | POLLHUP | POLLERR)))
				ha_http_close_slot(s);     /* the client gave up on the window */
		}
	}
	int64_t now = ha_http_now_ms();
	for (int i = 0; i < NSLOT; i++) {
		slot *s = &ha_http_slots[i];
		if ((s->state == READ || s->state == WRITE || s->state == LINGER) &&
		    now >= s->deadline)
			ha_http_close_slot(s);             /* too slow: no answer for it */
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
			if (ha_http_slots[i].state == READY && ha_http_slots[i].delta)
				d = &ha_http_slots[i];
		if (!d)
			break;
		ha_http_delta_end(d);
	}
	answer_ready();
	/* a response is written at once when the socket takes it all */
	for (int i = 0; i < NSLOT; i++)
		if (ha_http_slots[i].state == WRITE && ha_http_slots[i].off == 0)
			write_more(&ha_http_slots[i]);
}
