/* tests/fuzz/fuzz_maps.c — libFuzzer target for the profile writer
 * (prof/output/writer.c): the /proc/self/maps copy that normalises the 4th
 * permission character, the number formatting, the output buffer and the
 * temp-file + rename protocol, under every fault the stand-ins can inject
 * (short reads and writes, EINTR, a write failing or returning 0 part way,
 * close/rename/open failing, raw malloc failing).
 *
 * Input: 8 control bytes, then up to 4 stack-table lines, then the bytes
 * /proc/self/maps reads back.  Checks, beyond ASan/UBSan:
 *   - success: the file is exactly the expected profile (header = sums of
 *     the lines, lines in gperftools' widths, a blank line,
 *     MAPPED_LIBRARIES:, the maps with only the 4th permission character of
 *     each line's 2nd field changed from s to p); written under PATH.tmp,
 *     renamed to PATH once, nothing unlinked once it was created (clearing
 *     PATH.tmp before creating it is allowed, nothing else);
 *   - ha_writer_maps_copy() alone, into a memory buffer, gives the same
 *     normalised maps;
 *   - failure: an errno is returned, PATH.tmp is unlinked (when it was
 *     created), nothing is renamed into place, the temp file is closed.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof/prof.h"
#include "tests/fuzz/standins.h"

extern ha_line *fz_lines;
extern size_t fz_nlines;

#define PATH "/fuzz/dir/p.0001.heap"

static void die(const char *why)
{
	fprintf(stderr, "fuzz_maps: %s\n", why);
	abort();
}

static void app(char **b, size_t *n, const char *s, size_t k)
{
	*b = realloc(*b, *n + k + 1);
	memcpy(*b + *n, s, k);
	*n += k;
}

static void appf(char **b, size_t *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void appf(char **b, size_t *n, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	app(b, n, tmp, (size_t)k);
}

static uint32_t rd32(const uint8_t **p, size_t *left)
{
	uint32_t v = 0;
	for (int i = 0; i < 4 && *left; i++, (*p)++, (*left)--)
		v |= (uint32_t)**p << (8 * i);
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 8)
		return 0;
	fz_reset();
	fz.expect_tmp = PATH ".tmp";
	const uint8_t *c = data;
	fz.read_chunk = c[0] ? (size_t)c[0] * 7 % 8192 + 1 : 8192;
	fz.read_eintr = c[1] & 1 ? 3 : 0;
	fz.write_chunk = c[2] ? (size_t)c[2] * 13 + 1 : (size_t)-1;
	fz.write_eintr = c[2] & 1 ? 4 : 0;
	int fault = c[3] % 16;
	size_t fail_at = (size_t)c[4] * 37;
	int64_t r = c[5] ? (int64_t)c[5] * 4096 : 1;
	unsigned nl = c[6] % 5;
	/* c[7]: spare */
	switch (fault) {
	case 4: fz.write_fail_at = fail_at + 1; fz.write_fail_errno = ENOSPC; break;
	case 5: fz.write_fail_at = fail_at + 1; fz.write_zero = 1; break;
	case 6: fz.close_fail = EIO; break;
	case 7: fz.rename_fail = EACCES; break;
	case 8: fz.out_open_fail = ENOENT; break;
	case 9: fz.maps_open_fail = ENOENT; break;
	case 10: fz.maps_open_fail = EINTR; break;
	case 11: fz.malloc_fail_at = 1 + c[4] % 3; break;
	case 12: fz.write_fail_at = fail_at + 1; fz.write_fail_errno = EFBIG; break;
	}
	const uint8_t *p = data + 8;
	size_t left = size - 8;

	/* the stack-table snapshot */
	ha_line lines[4];
	ha_bucket *bk[4];
	for (unsigned i = 0; i < nl; i++) {
		unsigned depth = 1 + (left ? *p % 4 : 0);
		bk[i] = calloc(1, sizeof(ha_bucket) + depth * sizeof(uintptr_t));
		bk[i]->depth = depth;
		for (unsigned d = 0; d < depth; d++)
			bk[i]->pcs[d] = (uintptr_t)rd32(&p, &left) << (d % 2 ? 12 : 0);
		lines[i].b = bk[i];
		lines[i].alloc_count = 1 + rd32(&p, &left) % 100000;
		lines[i].alloc_bytes = lines[i].alloc_count * (1 + rd32(&p, &left) % 65536);
		lines[i].free_count = rd32(&p, &left) % (lines[i].alloc_count + 1);
		lines[i].free_bytes = lines[i].alloc_bytes / lines[i].alloc_count * lines[i].free_count;
	}
	fz_lines = lines;
	fz_nlines = nl;
	fz.maps = p;
	fz.maps_len = left;

	/* the expected file, written independently */
	char *want = NULL;
	size_t wn = 0;
	uint64_t t[4] = { 0, 0, 0, 0 };
	for (unsigned i = 0; i < nl; i++) {
		t[0] += lines[i].alloc_count - lines[i].free_count;
		t[1] += lines[i].alloc_bytes - lines[i].free_bytes;
		t[2] += lines[i].alloc_count;
		t[3] += lines[i].alloc_bytes;
	}
	appf(&want, &wn, "heap profile: %6llu: %8llu [%6llu: %8llu] @ ", (unsigned long long)t[0],
	     (unsigned long long)t[1], (unsigned long long)t[2], (unsigned long long)t[3]);
	if (r > 1)
		appf(&want, &wn, "heap_v2/%lld\n", (long long)r);
	else
		appf(&want, &wn, "heapprofile\n");
	for (unsigned i = 0; i < nl; i++) {
		appf(&want, &wn, "%6llu: %8llu [%6llu: %8llu] @",
		     (unsigned long long)(lines[i].alloc_count - lines[i].free_count),
		     (unsigned long long)(lines[i].alloc_bytes - lines[i].free_bytes),
		     (unsigned long long)lines[i].alloc_count,
		     (unsigned long long)lines[i].alloc_bytes);
		for (unsigned d = 0; d < bk[i]->depth; d++)   /* the leaf minus 1 */
			appf(&want, &wn, " 0x%llx", (unsigned long long)(bk[i]->pcs[d] - (d == 0)));
		appf(&want, &wn, "\n");
	}
	appf(&want, &wn, "\nMAPPED_LIBRARIES:\n");
	size_t maps_at = wn;
	if (fault != 9) {
		app(&want, &wn, (const char *)fz.maps, fz.maps_len);
		/* normalise: 2nd space-separated field of each line, 4th char */
		char *m = want + maps_at, *end = want + wn;
		while (m < end) {
			char *eol = memchr(m, '\n', (size_t)(end - m));
			if (!eol)
				eol = end;
			char *sp = memchr(m, ' ', (size_t)(eol - m));
			if (sp && eol - (sp + 1) > 3 && sp[4] == 's' &&
			    !memchr(sp + 1, ' ', 3))
				sp[4] = 'p';
			m = eol + 1;
		}
	}

	int err = ha_writer_file(PATH, r);

	int fails = fault == 6 || fault == 7 || fault == 8 ||
		((fault == 4 || fault == 5 || fault == 12) && fz.write_fail_at < wn);
	if (fault == 11 && err == 0 && fz.out_len != wn)
		fails = 0;          /* snapshot lost to ENOMEM: an empty profile (reported) */
	if (fault == 11 && err)
		fails = 1;
	if (fails != (err != 0)) {
		fprintf(stderr, "fault %d: ha_writer_file returned %d, want %s (output %zu of %zu bytes)\n",
			fault, err, fails ? "an error" : "0", fz.out_len, wn);
		die("wrong result");
	}
	if (fz.opened_out && strcmp(fz.out_path, PATH ".tmp"))
		die("temporary file is not PATH.tmp");
	if (fz.opened_out && fz.closed_out != 1)
		die("temporary file not closed exactly once");
	if (!err) {
		if (fz.renamed != 1 || strcmp(fz.rename_from, PATH ".tmp") || strcmp(fz.rename_to, PATH))
			die("success without exactly one rename PATH.tmp -> PATH");
		if (fz.unlinked)
			die("success but something was unlinked");
		if (fault != 11 && (fz.out_len != wn || memcmp(fz.out, want, wn))) {
			size_t i = 0;
			while (i < wn && i < fz.out_len && fz.out[i] == want[i])
				i++;
			fprintf(stderr, "output differs at byte %zu of %zu (got %zu bytes)\n", i, wn,
				fz.out_len);
			die("wrong profile bytes");
		}
	} else {
		if (fz.renamed && !fz.rename_fail)
			die("failure but the file was renamed into place");
		if (fz.opened_out && (fz.unlinked != 1 || strcmp(fz.unlink_path, PATH ".tmp")))
			die("failure but PATH.tmp was not removed");
	}
	/* the seam: the maps copy alone, into memory */
	if (fault != 9 && fault != 11) {
		fz.maps_pos = 0;
		fz.reads = 0;
		ha_out mo = { NULL, 0, 0, -1, 0 };
		ha_writer_maps_copy(&mo, FZ_MAPS_FD);
		if (mo.err || mo.len != wn - maps_at ||
		    (mo.len && memcmp(mo.buf, want + maps_at, mo.len)))
			die("ha_writer_maps_copy gave other bytes than the reference");
		ha_raw_free(mo.buf);
	}
	free(want);
	for (unsigned i = 0; i < nl; i++)
		free(bk[i]);
	return 0;
}
