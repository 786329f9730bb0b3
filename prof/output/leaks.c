/* prof/output/leaks.c — HEAP_PROFILE_LEAKS: the leak scan at exit, in the process
 * (gperftools' HEAPCHECK, removed in 2.17; LeakSanitizer's at-exit check).
 *
 * Owns the at-exit run of prof/output/leakscan.c's mark (the one `heapalloc leaks
 * PID` runs from outside) over this process's own /proc/self/mem: the
 * candidates are the live samples (object_map.c), copied into one private
 * mapping that the scan skips (it is the only copy of their addresses), as
 * it skips the allocator's records (ha_meta_ranges) and the free memory it
 * holds (ha_alloc_free_ranges: a free block's stale words are no root);
 * this thread's stack is read from here up, other threads' from their
 * stack pointer when they are blocked in a system call.  Reports the
 * unreferenced ones per site on stderr (pprof's unsampled estimate of the
 * bytes, the samples it rests on), writes PREFIX.leaks.pb.gz under
 * HEAPPROFILE, and with HEAP_PROFILE_LEAKS_STATUS ends the process with
 * that status (stdio flushed first) when something leaked.  Holds
 * ha_prof_dump_lock throughout, so the table stays; no public malloc.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prof/prof.h"
#include "prof/leakscan.h"

#define TOP_SITES 10

/* Leaked samples of one bucket: raw (as sampled) and estimated bytes. */
typedef struct site {
	const ha_bucket *b;
	uint64_t count, raw, est;
	int shown;
} site;

/* The report, the profile; n candidates.  1 when something leaked. */
static int report(const ha_leak_block *b, const uint32_t *idx, size_t n, uint64_t scanned,
		  ha_line *lines, site *sites)
{
	size_t ns = 0, leaked = 0;
	int64_t r = ha_prof_rate();
	for (size_t i = 0; i < n; i++) {
		const ha_bucket *bk = b[i].marked ? NULL : ha_table_bucket_live(idx[b[i].line]);
		if (!bk)
			continue;
		leaked++;
		size_t k = 0;
		while (k < ns && sites[k].b != bk)
			k++;
		if (k == ns)
			sites[ns++] = (site){ bk, 0, 0, 0, 0 };
		sites[k].count++;
		sites[k].raw += b[i].hi - b[i].lo;
	}
	uint64_t total = 0;
	for (size_t k = 0; k < ns; k++) {
		/* the bytes they stand for: pprof's unsampling, as in the profile */
		sites[k].est = sites[k].count * ha_sampler_unsample(sites[k].raw / sites[k].count, r);
		total += sites[k].est;
		lines[k] = (ha_line){ sites[k].b, sites[k].count, sites[k].raw, 0, 0 };
	}
	ha_log("heapalloc: leak check at exit: %zu of %zu sampled live blocks nothing points to, "
	       "~%llu bytes at %zu sites (%llu bytes of memory read)\n", leaked, n,
	       (unsigned long long)total, ns, (unsigned long long)scanned);
	for (int shown = 0; shown < TOP_SITES && shown < (int)ns; shown++) {
		site *best = NULL;        /* the largest not shown yet */
		for (size_t k = 0; k < ns; k++)
			if (!sites[k].shown && (!best || sites[k].est > best->est))
				best = &sites[k];
		best->shown = 1;
		char where[64];
		int w = ha_snprintf(where, sizeof where, "0x%llx",
				    (unsigned long long)(best->b->pcs[0] - 1));
		if (best->b->depth > 1)
			ha_snprintf(where + w, sizeof where - (size_t)w, " <- 0x%llx",
				    (unsigned long long)(best->b->pcs[1] - 1));
		ha_log("heapalloc:   ~%llu bytes in %llu sampled blocks at %s\n",
		       (unsigned long long)best->est, (unsigned long long)best->count, where);
	}
	static char pb[4096 + 64];    /* a prefix's room (session.h) and the suffix */
	if (ns && ha_naming_leaks(pb, sizeof pb)) {
		/* raw sampled counts, no books: pprof.c unsamples them */
		ha_lineset set = { lines, ns, 0, { 0, 0 }, 0 };
		int e = ha_pprof_file_from(pb, r, &set);
		if (e)
			ha_log("heapalloc: cannot write %s (errno %d)\n", pb, e);
		else
			ha_log("heapalloc: leaks written to %s (go tool pprof -top %s)\n", pb, pb);
	}
	return ns > 0;
}

/* Collects ha_alloc_free_ranges into room for cap ranges (counts alone
 * when r is NULL), a range that continues the last one joining it.  What
 * does not fit is read: a leak may then be missed, never invented. */
typedef struct frees {
	ha_leak_range *r;
	size_t n, cap;
} frees;

static void add_free(void *ctx, uintptr_t lo, uintptr_t hi)
{
	frees *f = ctx;
	if (!f->r)
		f->n++;
	else if (f->n && f->r[f->n - 1].hi == lo)
		f->r[f->n - 1].hi = hi;
	else if (f->n < f->cap)
		f->r[f->n++] = (ha_leak_range){ lo, hi };
}

void ha_leaks_at_exit(void)
{
	if (!ha_prof_opt.leaks)
		return;
	if (!ha_prof_running()) {
		ha_log("heapalloc: HEAP_PROFILE_LEAKS: sampling is off (HEAP_PROFILE_SAMPLE_INTERVAL=0): "
		       "no block to check\n");
		return;
	}
	ha_prof_busy++;
	pthread_mutex_lock(&ha_prof_dump_lock);
	uint64_t objs, mem;
	ha_objmap_stats(&objs, &mem);
	size_t cap = (size_t)objs + objs / 8 + 64;
	frees fr = { NULL, 0, 0 };
	ha_alloc_free_ranges(add_free, &fr);
	fr.cap = fr.n + fr.n / 4 + 256;   /* other threads go on freeing */
	size_t sz = cap * (sizeof(ha_leak_block) + sizeof(uint32_t) * 2 + sizeof(ha_line) +
			   sizeof(site)) + HA_LEAK_CHUNK + 64 +
		    (HA_META_RANGES + 1 + fr.cap) * sizeof(ha_leak_range);
	sz = (sz + 4095) & ~(size_t)4095;
	unsigned char *m = ha_sys_mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				      -1, 0);
	int fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	int leaked = 0;
	if (m == MAP_FAILED || fd < 0) {
		ha_log("heapalloc: leak check at exit: no memory or no /proc/self/mem; not done\n");
	} else {
		ha_leak_block *b = (ha_leak_block *)m;
		uint32_t *idx = (uint32_t *)(b + cap);
		uint32_t *work = idx + cap;
		ha_line *lines = (ha_line *)(((uintptr_t)(work + cap) + 15) & ~(uintptr_t)15);
		/* sites: one per bucket at most, fewer than cap */
		site *sites = (site *)(lines + cap);
		ha_leak_range *skips = (ha_leak_range *)(sites + cap);
		unsigned char *chunk = (unsigned char *)(skips + HA_META_RANGES + 1 + fr.cap);
		size_t n = ha_objmap_blocks(b, idx, cap);
		if (n > cap)
			n = cap;
		/* never read: the allocator's records and this mapping */
		size_t ns = (size_t)__atomic_load_n(&ha_meta_nranges, __ATOMIC_ACQUIRE);
		for (size_t i = 0; i < ns; i++)
			skips[i] = (ha_leak_range){ ha_meta_ranges[i].lo, ha_meta_ranges[i].hi };
		skips[ns++] = (ha_leak_range){ (uint64_t)(uintptr_t)m, (uint64_t)(uintptr_t)m + sz };
		fr = (frees){ skips + ns, 0, fr.cap };
		ha_alloc_free_ranges(add_free, &fr);
		ns += fr.n;
		uint64_t sp = (uint64_t)(uintptr_t)__builtin_frame_address(0);
		ha_leak_scan s = { b, n, work, chunk, NULL, 0, &sp, 1, 1, skips, ns, 0 };
		if (ha_leak_run(&s, (int)getpid(), fd) != 0)
			ha_log("heapalloc: leak check at exit: cannot read /proc/self/maps; not done\n");
		else
			leaked = report(b, idx, n, s.bytes, lines, sites);
	}
	if (fd >= 0)
		close(fd);
	if (m != MAP_FAILED)
		ha_sys_munmap(m, sz);
	pthread_mutex_unlock(&ha_prof_dump_lock);
	ha_prof_busy--;
	if (leaked && ha_prof_opt.leaks_status) {
		fflush(NULL);
		_exit((int)(ha_prof_opt.leaks_status & 255));
	}
}
