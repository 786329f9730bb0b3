/* tests/fuzz/standins.h — what the fuzz targets swap in for the rest of
 * heapalloc when they compile prof/session/options.c, prof/output/writer.c and
 * alloc/log.c on their own.  Test-only, never shipped.
 *
 * The file calls writer.c and log.c make are renamed on their compile line
 * (-Dopen=fz_open -Dread=fz_read ...) and land here, where a script set by
 * the target decides what each call returns. */
#ifndef HA_FUZZ_STANDINS_H
#define HA_FUZZ_STANDINS_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FZ_MAPS_FD 1000
#define FZ_OUT_FD 1001

typedef struct fz_script {
	const uint8_t *maps;      /* what /proc/self/maps reads back */
	size_t maps_len, maps_pos;
	size_t read_chunk;        /* bytes per read() (>= 1) */
	int read_eintr;           /* every Nth read fails with EINTR (0 never) */
	int maps_open_fail;       /* open of the maps fails with this errno */
	int out_open_fail;        /* open of the temp file fails with this errno */
	size_t write_chunk;       /* bytes accepted per write() */
	int write_eintr;          /* every Nth write fails with EINTR */
	size_t write_fail_at;     /* output bytes after which write fails (0 never) */
	int write_fail_errno;
	int write_zero;           /* the failing write returns 0 instead */
	int close_fail;           /* close of the temp file returns -1 with this */
	int rename_fail;
	size_t malloc_fail_at;    /* ha_raw_malloc call that returns NULL (0 never) */
	/* observed */
	char *out;                /* bytes written to the temp file */
	size_t out_len, out_cap;
	int reads, writes, mallocs;
	int opened_out, closed_out, renamed, unlinked;
	int preunlinked;          /* unlink of the temp name before it was opened */
	const char *expect_tmp;   /* the only name that may be unlinked before */
	char out_path[4200], rename_from[4200], rename_to[4200], unlink_path[4200];
	char *log;                /* everything ha_log wrote to fd 2 */
	size_t log_len, log_cap;
	size_t log_off[65];       /* where each write(2, ...) began: one per message */
	int log_n;
} fz_script;

extern fz_script fz;
void fz_reset(void);

int fz_open(const char *path, int flags, ...);
ssize_t fz_read(int fd, void *buf, size_t n);
ssize_t fz_write(int fd, const void *buf, size_t n);
int fz_close(int fd);
int fz_rename(const char *from, const char *to);
int fz_unlink(const char *path);
#endif
