/* alloc/meta.c — bookkeeping memory: span records, page-map leaves.
 *
 * A bump allocator over 2 MiB chunks from mmap.  Memory is zeroed and never
 * returned (span records are recycled by their owners).  It never calls
 * malloc, so it is safe during init and from inside any allocator path.
 */
#include "alloc/internal.h"
#include "alloc/debug.h"
#include <sys/mman.h>

#define META_CHUNK ((size_t)2 << 20)

static pthread_mutex_t meta_lock = PTHREAD_MUTEX_INITIALIZER;
static char *meta_cur, *meta_end;
static uint64_t meta_total;
/* the chunks, each headed by {next chunk, its length}, for the stats'
 * resident count (a mincore of each, under the lock: a few per process) */
static void **meta_chunks;
#define META_HDR 16

void *ha_meta_alloc(size_t bytes)
{
	bytes = (bytes + 15) & ~(size_t)15;
	ha_lock(&meta_lock);
	if ((size_t)(meta_end - meta_cur) < bytes) {
		size_t need = bytes + META_HDR;
		size_t want = need > META_CHUNK ? (need + META_CHUNK - 1) & ~(META_CHUNK - 1) : META_CHUNK;
		void *m = ha_sys_mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED) {
			ha_unlock(&meta_lock);
			return NULL;
		}
		((void **)m)[0] = meta_chunks;
		((size_t *)m)[1] = want;
		meta_chunks = m;
		meta_cur = (char *)m + META_HDR;
		meta_end = (char *)m + want;
		meta_total += want;
		ha_meta_note(m, want);
	}
	void *p = meta_cur;
	meta_cur += bytes;
	HA_ASSERT(((uintptr_t)p & 15) == 0 && meta_cur <= meta_end);
	ha_unlock(&meta_lock);
	return p;
}

ha_meta_range ha_meta_ranges[HA_META_RANGES];
uint64_t ha_meta_nranges;
static pthread_mutex_t note_lock = PTHREAD_MUTEX_INITIALIZER;

/* Past HA_META_RANGES a range goes unnoted: a leak scan may then miss a
 * leak whose address it holds, never report a reachable block. */
void ha_meta_note(const void *p, size_t len)
{
	ha_lock(&note_lock);
	uint64_t n = ha_meta_nranges;
	if (n < HA_META_RANGES) {
		ha_meta_ranges[n] = (ha_meta_range){ (uintptr_t)p, (uintptr_t)p + len };
		__atomic_store_n(&ha_meta_nranges, n + 1, __ATOMIC_RELEASE);
	}
	ha_unlock(&note_lock);
}

uint64_t ha_meta_bytes(void)
{
	return __atomic_load_n(&meta_total, __ATOMIC_RELAXED);
}

uint64_t ha_meta_resident(void)
{
	uint64_t b = 0;
	ha_lock(&meta_lock);
	for (void **c = meta_chunks; c; c = c[0])
		b += ha_resident((uintptr_t)c, (uintptr_t)c + ((size_t *)c)[1]);
	ha_unlock(&meta_lock);
	return b;
}

void ha_meta_prefork(void)
{
	ha_lock(&meta_lock);
	ha_lock(&note_lock);
}

void ha_meta_postfork(int child)
{
	if (child) {
		pthread_mutex_init(&meta_lock, NULL);
		pthread_mutex_init(&note_lock, NULL);
	} else {
		ha_unlock(&note_lock);
		ha_unlock(&meta_lock);
	}
}
