/* alloc/spanrec.c — span records: where they live, and their pages given back.
 *
 * A record is a 128-byte slot (64-aligned: free reads its first line) in a
 * chunk of 2 MiB mapped on demand and never unmapped (racy readers of a
 * stale pointer read zeros or a recycled record, never unmapped memory).
 * A record is taken from the lowest page that has a free slot, so the
 * records of a burst's spans, once those spans are gone, leave whole pages
 * free at the top, and the decay step gives those back (ha_spanrec_decay):
 * 11k spans after a burst over a GiB were 1.8 MiB of records kept resident
 * for good in meta memory.  Per chunk, in meta memory: each page's free
 * slots (a 32-bit mask), which pages have one, which may be resident.
 * Its lock comes after the span-record (pool) lock and before meta's.
 */
#include "alloc/internal.h"
#include <errno.h>
#include <string.h>

#define REC_SLOT 128
#define REC_PER_PAGE (HA_PAGE_SIZE / REC_SLOT)    /* 32: one mask word */
#define CHUNK_BYTES ((size_t)2 << 20)
#define CHUNK_PAGES (CHUNK_BYTES / HA_PAGE_SIZE)   /* 512 */
#define CHUNK_WORDS (CHUNK_PAGES / 64)
#define MAX_CHUNKS 1024                            /* 16 M records */
_Static_assert(sizeof(ha_span) <= REC_SLOT, "a span record fits its slot");
_Static_assert(REC_PER_PAGE == 32, "one 32-bit mask per page");

typedef struct chunk {
	char *mem;
	uint32_t freemask[CHUNK_PAGES];   /* bit r: slot r of the page is free */
	uint64_t hasfree[CHUNK_WORDS];    /* page has a free slot */
	uint64_t dirty[CHUNK_WORDS];      /* page may be resident */
} chunk;

static pthread_mutex_t recs_lock = PTHREAD_MUTEX_INITIALIZER;
static chunk *chunks[MAX_CHUNKS];
static unsigned nchunks;
static unsigned lowest;        /* no chunk below it has a free slot */
static int freed_pages;        /* a page may have become all free (atomic) */

static chunk *chunk_new(void)
{
	if (nchunks == MAX_CHUNKS)
		return NULL;
	chunk *c = ha_meta_alloc(sizeof *c);
	if (!c)
		return NULL;
	int e = errno;
	void *m = ha_sys_mmap(NULL, CHUNK_BYTES, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	errno = e;
	if (m == MAP_FAILED)
		return NULL;   /* c stays unused in meta: a few KiB, once */
	ha_meta_note(m, CHUNK_BYTES);
	c->mem = m;
	for (unsigned p = 0; p < CHUNK_PAGES; p++)
		c->freemask[p] = ~0u;
	for (unsigned w = 0; w < CHUNK_WORDS; w++)
		c->hasfree[w] = ~(uint64_t)0;
	chunks[nchunks++] = c;
	return c;
}

/* A zeroed record, or NULL when memory is out. */
ha_span *ha_spanrec_get(void)
{
	ha_span *s = NULL;
	ha_lock(&recs_lock);
	for (unsigned k = lowest;; k++) {
		chunk *c = k < nchunks ? chunks[k] : chunk_new();
		if (!c)
			break;
		for (unsigned w = 0; w < CHUNK_WORDS; w++) {
			if (!c->hasfree[w])
				continue;
			unsigned p = w * 64 + (unsigned)__builtin_ctzll(c->hasfree[w]);
			unsigned r = (unsigned)__builtin_ctz(c->freemask[p]);
			if (!(c->freemask[p] &= ~(1u << r)))
				c->hasfree[w] &= ~((uint64_t)1 << (p & 63));
			c->dirty[w] |= (uint64_t)1 << (p & 63);
			s = (ha_span *)(c->mem + (size_t)p * HA_PAGE_SIZE + (size_t)r * REC_SLOT);
			break;
		}
		if (s) {
			lowest = k;
			break;
		}
	}
	ha_unlock(&recs_lock);
	if (s)
		memset(s, 0, sizeof *s);
	return s;
}

void ha_spanrec_put(ha_span *s)
{
	uintptr_t a = (uintptr_t)s;
	ha_lock(&recs_lock);
	for (unsigned k = 0; k < nchunks; k++) {
		chunk *c = chunks[k];
		if (a - (uintptr_t)c->mem >= CHUNK_BYTES)
			continue;
		size_t off = a - (uintptr_t)c->mem;
		unsigned p = (unsigned)(off / HA_PAGE_SIZE), r = (unsigned)(off % HA_PAGE_SIZE / REC_SLOT);
		HA_ASSERT(!(c->freemask[p] & (1u << r)));
		c->freemask[p] |= 1u << r;
		c->hasfree[p / 64] |= (uint64_t)1 << (p & 63);
		if (c->freemask[p] == ~0u)
			__atomic_store_n(&freed_pages, 1, __ATOMIC_RELAXED);
		if (k < lowest)
			lowest = k;
		break;
	}
	ha_unlock(&recs_lock);
}

/* The decay step's part for the records: every page whose slots are all
 * free goes back to the kernel (a later record there faults in zeros). */
void ha_spanrec_decay(void)
{
	if (!__atomic_load_n(&freed_pages, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&freed_pages, 0, __ATOMIC_RELAXED);
	ha_lock(&recs_lock);
	for (unsigned k = 0; k < nchunks; k++) {
		chunk *c = chunks[k];
		for (unsigned p = 0; p < CHUNK_PAGES;) {
			/* a run of all-free dirty pages: one madvise */
			unsigned q = p;
			while (q < CHUNK_PAGES && c->freemask[q] == ~0u && (c->dirty[q / 64] >> (q & 63) & 1))
				q++;
			if (q == p) {
				p++;
				continue;
			}
			ha_sys_discard(c->mem + (size_t)p * HA_PAGE_SIZE, (size_t)(q - p) * HA_PAGE_SIZE);
			for (; p < q; p++)
				c->dirty[p / 64] &= ~((uint64_t)1 << (p & 63));
		}
	}
	ha_unlock(&recs_lock);
}

void ha_spanrec_prefork(void)
{
	ha_lock(&recs_lock);
}

void ha_spanrec_postfork(int child)
{
	if (child)
		pthread_mutex_init(&recs_lock, NULL);
	else
		ha_unlock(&recs_lock);
}
