/* alloc/log.c — messages on stderr that never allocate.
 *
 * A tiny printf subset formats into a caller's (or a stack) buffer, capped
 * at 1 KiB per message, and one write(2) sends it, retrying on EINTR.
 * Safe inside allocator paths, the profiler and after fork.
 */
#include "alloc/internal.h"
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct out { char *p, *end; size_t n; } out;

static void put(out *o, char c)
{
	if (o->p < o->end)
		*o->p++ = c;
	o->n++;
}

static void put_num(out *o, unsigned long long v, unsigned base, int neg, int width, char pad)
{
	char tmp[24];
	int i = 0;
	do {
		tmp[i++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	if (neg)
		tmp[i++] = '-';
	for (int w = i; w < width; w++)
		put(o, pad);
	while (i)
		put(o, tmp[--i]);
}

static int vformat(char *buf, size_t cap, const char *f, va_list ap)
{
	out o = { buf, buf + (cap ? cap - 1 : 0), 0 };
	for (; *f; f++) {
		if (*f != '%') {
			put(&o, *f);
			continue;
		}
		f++;
		char pad = ' ';
		int width = 0, lng = 0, sz = 0;
		if (*f == '0') {
			pad = '0';
			f++;
		}
		while (*f >= '0' && *f <= '9')
			width = width * 10 + (*f++ - '0');
		while (*f == 'l') {
			lng++;
			f++;
		}
		if (*f == 'z') {
			sz = 1;
			f++;
		}
		switch (*f) {
		case 'd': case 'i': {
			long long v = sz ? (long long)va_arg(ap, ssize_t)
				     : lng ? (lng > 1 ? va_arg(ap, long long) : va_arg(ap, long))
					   : va_arg(ap, int);
			put_num(&o, v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v, 10, v < 0, width, pad);
			break;
		}
		case 'u': case 'x': {
			unsigned long long v = sz ? va_arg(ap, size_t)
				: lng ? (lng > 1 ? va_arg(ap, unsigned long long) : va_arg(ap, unsigned long))
				      : va_arg(ap, unsigned);
			put_num(&o, v, *f == 'x' ? 16 : 10, 0, width, pad);
			break;
		}
		case 'p':
			put(&o, '0');
			put(&o, 'x');
			put_num(&o, (uintptr_t)va_arg(ap, void *), 16, 0, 0, ' ');
			break;
		case 's': {
			const char *s = va_arg(ap, const char *);
			if (!s)
				s = "(null)";
			int len = 0;
			for (const char *t = s; *t; t++)
				len++;
			for (; len < width; width--)
				put(&o, ' ');
			while (*s)
				put(&o, *s++);
			break;
		}
		case 'c':
			put(&o, (char)va_arg(ap, int));
			break;
		case '%':
			put(&o, '%');
			break;
		default:
			put(&o, '%');
			if (*f)
				put(&o, *f);
			else
				f--;
		}
	}
	if (cap)
		*o.p = 0;
	return (int)o.n;
}

int ha_snprintf(char *buf, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vformat(buf, cap, fmt, ap);
	va_end(ap);
	return n;
}

static void write_all(const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(2, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

void ha_log(const char *fmt, ...)
{
	char buf[1024];
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	int n = vformat(buf, sizeof buf, fmt, ap);
	va_end(ap);
	write_all(buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
	errno = saved;
}

void ha_fatal(const char *what, const void *p)
{
	if (p)
		ha_log("heapalloc: %s: %p; aborting\n", what, p);
	else
		ha_log("heapalloc: %s; aborting\n", what);
	abort();
}
