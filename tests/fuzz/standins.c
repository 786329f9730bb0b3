/* tests/fuzz/standins.c — stand-ins for the parts of heapalloc the fuzzed
 * files call (raw memory, the stack table) and for the system calls they
 * make, renamed by the compile line (see standins.h).  Test-only. */
#include "tests/fuzz/standins.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "prof/prof.h"

fz_script fz;

void fz_reset(void)
{
	free(fz.out);
	free(fz.log);
	memset(&fz, 0, sizeof fz);
	fz.read_chunk = 8192;
	fz.expect_tmp = "";
	fz.write_chunk = (size_t)-1;
}

/* ---- raw memory (alloc/arena.c) ---- */
void *ha_raw_malloc(size_t n)
{
	if (fz.malloc_fail_at && (size_t)++fz.mallocs == fz.malloc_fail_at)
		return NULL;
	return malloc(n);
}

void *ha_raw_calloc(size_t n, size_t m)
{
	return calloc(n, m);
}

void ha_raw_free(void *p)
{
	free(p);
}

HA_TLS unsigned ha_locks_held;   /* alloc/init.c */

/* prof/output/calibrate.c: nothing calibrated, the writer writes the raw lines */
uint64_t *ha_calib_values(const ha_line *lines, size_t n, int64_t r, const ha_lineset *set,
			  ha_calib *c)
{
	(void)lines;
	(void)n;
	(void)set;
	memset(c, 0, sizeof *c);
	c->r = r;
	return NULL;
}

/* ---- the stack table (prof/capture/stack_table.c): a snapshot set by the target */
ha_line *fz_lines;
size_t fz_nlines;
int fz_table_locked;

void ha_table_lock(void)
{
	if (fz_table_locked++)
		abort();                  /* the writer must not nest it */
}

void ha_table_unlock(void)
{
	if (--fz_table_locked)
		abort();
}

ha_line *ha_table_snapshot(size_t *n)
{
	if (!fz_table_locked)
		abort();                  /* called without the table lock */
	*n = 0;
	if (!fz_nlines)
		return NULL;
	ha_line *l = ha_raw_malloc(fz_nlines * sizeof *l);
	if (!l)
		return NULL;
	memcpy(l, fz_lines, fz_nlines * sizeof *l);
	*n = fz_nlines;
	return l;
}

/* ---- system calls ---- */
int fz_open(const char *path, int flags, ...)
{
	(void)flags;
	if (!strcmp(path, "/proc/self/maps")) {
		if (fz.maps_open_fail) {
			errno = fz.maps_open_fail;
			if (fz.maps_open_fail == EINTR)
				fz.maps_open_fail = 0;     /* once */
			return -1;
		}
		fz.maps_pos = 0;
		return FZ_MAPS_FD;
	}
	if (fz.out_open_fail) {
		errno = fz.out_open_fail;
		return -1;
	}
	if (fz.opened_out)
		abort();                  /* one temp file per dump */
	fz.opened_out = 1;
	strncpy(fz.out_path, path, sizeof fz.out_path - 1);
	return FZ_OUT_FD;
}

ssize_t fz_read(int fd, void *buf, size_t n)
{
	if (fd != FZ_MAPS_FD)
		abort();
	fz.reads++;
	if (fz.read_eintr && fz.reads % fz.read_eintr == 0) {
		errno = EINTR;
		return -1;
	}
	size_t left = fz.maps_len - fz.maps_pos;
	size_t k = n < fz.read_chunk ? n : fz.read_chunk;
	k = k < left ? k : left;
	memcpy(buf, fz.maps + fz.maps_pos, k);
	fz.maps_pos += k;
	return (ssize_t)k;
}

static void append(char **b, size_t *len, size_t *cap, const void *p, size_t n)
{
	if (*len + n > *cap) {
		*cap = (*len + n) * 2 + 64;
		*b = realloc(*b, *cap);
	}
	memcpy(*b + *len, p, n);
	*len += n;
}

ssize_t fz_write(int fd, const void *buf, size_t n)
{
	if (fd == 2) {                    /* ha_log: one write per message */
		if (fz.log_n < 64)
			fz.log_off[fz.log_n++] = fz.log_len;
		append(&fz.log, &fz.log_len, &fz.log_cap, buf, n);
		return (ssize_t)n;
	}
	if (fd != FZ_OUT_FD || !fz.opened_out || fz.closed_out)
		abort();                  /* writing a file that is not open */
	if (n == 0)
		return 0;
	fz.writes++;
	if (fz.write_eintr && fz.writes % fz.write_eintr == 0) {
		errno = EINTR;
		return -1;
	}
	size_t k = n < fz.write_chunk ? n : fz.write_chunk;
	if (fz.write_fail_at) {
		if (fz.out_len >= fz.write_fail_at) {
			if (fz.write_zero)
				return 0;
			errno = fz.write_fail_errno;
			return -1;
		}
		if (fz.out_len + k > fz.write_fail_at)
			k = fz.write_fail_at - fz.out_len;
	}
	append(&fz.out, &fz.out_len, &fz.out_cap, buf, k);
	return (ssize_t)k;
}

int fz_close(int fd)
{
	if (fd == FZ_OUT_FD) {
		if (fz.closed_out++)
			abort();          /* closed twice */
		if (fz.close_fail) {
			errno = fz.close_fail;
			return -1;
		}
	} else if (fd != FZ_MAPS_FD) {
		abort();
	}
	return 0;
}

int fz_rename(const char *from, const char *to)
{
	fz.renamed++;
	strncpy(fz.rename_from, from, sizeof fz.rename_from - 1);
	strncpy(fz.rename_to, to, sizeof fz.rename_to - 1);
	if (fz.rename_fail) {
		errno = fz.rename_fail;
		return -1;
	}
	return 0;
}

int fz_unlink(const char *path)
{
	if (!fz.opened_out) {             /* clearing the name before creating it */
		fz.preunlinked++;
		if (strcmp(path, fz.expect_tmp))
			abort();          /* unlinking something else */
		errno = ENOENT;
		return -1;
	}
	fz.unlinked++;
	strncpy(fz.unlink_path, path, sizeof fz.unlink_path - 1);
	return 0;
}
