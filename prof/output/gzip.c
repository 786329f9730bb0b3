/* prof/output/gzip.c — gzip of an encoded profile, through zlib loaded on first use
 * (dlopen), so that a program that never writes a compressed profile never
 * maps libz.  The only includer of <zlib.h> (its types and constants; no
 * symbol of it is linked).  Without libz.so.1 the profile goes out
 * uncompressed, which pprof reads as well, after one stderr line.
 *
 * ha_gzip_load dlopens with no profiler lock held: a session that writes
 * pprof files calls it as it starts (a pre-OOM dump may find no address
 * space left to map zlib), the dump and serving entry points before their
 * locks; ha_gzip_to never loads (it runs under the dump lock, and prof.h's
 * rules keep the loader out of that): before a load it writes uncompressed.
 * ha_gzip_file hands the result to writer.c's temp-name-and-rename.
 * A load that failed for want of a descriptor is tried again at the next
 * profile (the one in hand goes uncompressed): a moment of EMFILE must
 * not leave the process writing uncompressed profiles for good.
 * Never calls the public malloc for zlib's state: it lives in ha_dump_mem
 * memory (raw memory, or the pre-OOM reserve).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "prof/prof.h"

typedef int (*init_fn)(z_streamp, int, int, int, int, int, const char *, int);
typedef int (*deflate_fn)(z_streamp, int);
typedef int (*end_fn)(z_streamp);

static struct {
	init_fn init;     /* deflateInit2_ (zlib.h's deflateInit2 macro); NULL: none */
	deflate_fn deflate;
	end_fn end;
} zlib;
static pthread_once_t zlib_once = PTHREAD_ONCE_INIT;
static int zlib_tried;   /* load() ran (atomic) */
static int zlib_retry;   /* it failed for want of a descriptor (atomic) */
static int zlib_said;    /* that failure's stderr line written */

static void load(void)
{
	int busy = ha_prof_busy;
	ha_prof_busy = 1;        /* the loader's mallocs are not sampled ... */
	int64_t mark[5];
	ha_books_own_begin(mark);   /* ... nor counted as the program's heap */
	void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
	const char *why = h ? NULL : dlerror();
	int retry = !h && ha_fds_short();
	if (h) {
		init_fn init = (init_fn)dlsym(h, "deflateInit2_");
		zlib.deflate = (deflate_fn)dlsym(h, "deflate");
		zlib.end = (end_fn)dlsym(h, "deflateEnd");
		if (!init || !zlib.deflate || !zlib.end)
			why = "no deflateInit2_, deflate or deflateEnd in it";
		else    /* last: a reader that sees init sees the other two */
			__atomic_store_n(&zlib.init, init, __ATOMIC_RELEASE);
	}
	ha_books_own_end(mark);
	ha_prof_busy = busy;
	if (retry && !zlib_said)
		ha_log("heapalloc: cannot load zlib now (libz.so.1: %s); pprof profiles are written "
		       "uncompressed until a descriptor is free\n", why ? why : "unknown error");
	else if (!retry && !zlib.init)
		ha_log("heapalloc: cannot load zlib (libz.so.1: %s); pprof profiles are written "
		       "uncompressed\n", why ? why : "unknown error");
	zlib_said |= retry;
	__atomic_store_n(&zlib_retry, retry, __ATOMIC_RELEASE);
	__atomic_store_n(&zlib_tried, 1, __ATOMIC_RELEASE);
}

void ha_gzip_load(void)
{
	pthread_once(&zlib_once, load);
	/* the exchange: one caller at a time tries again */
	if (__atomic_load_n(&zlib_retry, __ATOMIC_ACQUIRE) &&
	    __atomic_exchange_n(&zlib_retry, 0, __ATOMIC_ACQ_REL))
		load();
}

/* zlib's allocator: raw memory, never the public malloc. */
static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
	(void)opaque;
	if (size && items > SIZE_MAX / size)
		return Z_NULL;
	return ha_dump_mem((size_t)items * size);
}

static void z_free(voidpf opaque, voidpf p)
{
	(void)opaque;
	if (p)
		ha_dump_mem_free(p);
}

static int put(ha_out *dst, const void *p, size_t n)
{
	if (dst->fd >= 0)
		return ha_write_all(dst->fd, p, n);
	ha_out_bytes(dst, p, n);
	return dst->err;
}

int ha_gzip_to(ha_out *dst, const char *data, size_t n)
{
	if (!__atomic_load_n(&zlib_tried, __ATOMIC_ACQUIRE) ||
	    !__atomic_load_n(&zlib.init, __ATOMIC_ACQUIRE))
		return put(dst, data, n);   /* no zlib: the protobuf as it is */
	z_stream z;
	memset(&z, 0, sizeof z);
	z.zalloc = z_alloc;
	z.zfree = z_free;
	/* 15 + 16: a gzip wrapper; memLevel 8 (~260 KiB of state) */
	if (zlib.init(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
		   (int)sizeof z) != Z_OK)
		return ENOMEM;
	enum { CHUNK = 64 * 1024 };
	unsigned char *out = ha_dump_mem(CHUNK);
	int err = out ? 0 : ENOMEM;
	z.next_in = (Bytef *)(uintptr_t)data;
	z.avail_in = (uInt)n;     /* a profile is far below 4 GiB */
	int zr = Z_OK;
	while (!err && zr != Z_STREAM_END) {
		z.next_out = out;
		z.avail_out = CHUNK;
		zr = zlib.deflate(&z, Z_FINISH);
		if (zr == Z_STREAM_ERROR) {
			err = EIO;
			break;
		}
		err = put(dst, out, CHUNK - z.avail_out);
	}
	zlib.end(&z);
	if (out)
		ha_dump_mem_free(out);
	return err;
}

struct gz_job {
	const char *buf;
	size_t len;
};

/* ha_write_file's filler: the data gzipped into the file; a failure is the
 * output's error, so no partial file is renamed into place. */
static void fill_gz(ha_out *f, void *arg)
{
	const struct gz_job *j = arg;
	int e = ha_gzip_to(f, j->buf, j->len);
	if (e && !f->err)
		f->err = e;
}

int ha_gzip_file(const char *path, const char *data, size_t n)
{
	struct gz_job j = { data, n };
	return ha_write_file(path, fill_gz, &j);   /* temp name, rename (writer.c) */
}
