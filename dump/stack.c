/* dump/stack.c — capture the call stack of a sampled allocation.
 *
 * The only includer of <libunwind.h>.  Returns raw return addresses, leaf
 * first, starting at the caller of malloc/new: heapalloc's own frames (and
 * libunwind's) are dropped here by address — ha_stack_init() records the
 * executable segments of libheapalloc and libunwind (dladdr +
 * dl_iterate_phdr) — so pprof never needs to know heapalloc's names.
 *
 * Cost: unw_backtrace() takes libunwind's x86_64 fast-trace path, which
 * keeps a per-thread cache of frame descriptors keyed by IP: after warm-up a
 * 26-frame stack costs ~0.2 us and makes no system call.  The unw_step()
 * loop (what gperftools does) costs ~13 us for the same stack and blocks
 * signals with sigprocmask around every dl_iterate_phdr.  The per-thread
 * cache policy keeps the fallback path (frames the fast path cannot
 * describe) lock- and sigprocmask-free too.
 *
 * Never call with a profiler lock held: the unwinder may take the dynamic
 * loader's lock (dl_iterate_phdr) on a cache miss.  The caller holds the
 * thread's re-entrancy guard (ha_prof_busy), so any allocation libunwind
 * makes is never sampled.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "dump/prof.h"

#define MAX_RANGES 16

static struct range { uintptr_t lo, hi; } ranges[MAX_RANGES];
static int nranges;
static int stack_ready;

struct find_ctx { uintptr_t base; };

static int add_segments(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find_ctx *f = arg;
	if ((uintptr_t)info->dlpi_addr != f->base)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		if (nranges < MAX_RANGES) {
			ranges[nranges].lo = f->base + ph->p_vaddr;
			ranges[nranges].hi = f->base + ph->p_vaddr + ph->p_memsz;
			nranges++;
		}
	}
	return 1;
}

/* dladdr gives the load base (dli_fbase); dl_iterate_phdr's dlpi_addr is
 * the load bias.  For a shared object they agree once the first PT_LOAD's
 * p_vaddr is 0, which ld always does; compare on the bias to be exact. */
static int find_by_addr(struct dl_phdr_info *info, size_t size, void *arg)
{
	uintptr_t *a = arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && a[0] >= lo && a[0] < lo + ph->p_memsz) {
			a[1] = info->dlpi_addr;
			a[2] = 1;
			return 1;
		}
	}
	return 0;
}

static void add_object_of(const void *addr)
{
	uintptr_t a[3] = { (uintptr_t)addr, 0, 0 };
	dl_iterate_phdr(find_by_addr, a);
	if (!a[2])
		return;
	/* never drop the main program's frames (static link): the bias of the
	 * main program is what dl_iterate_phdr reports first */
	struct find_ctx f = { a[1] };
	dl_iterate_phdr(add_segments, &f);
}

static int first_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	*(uintptr_t *)arg = info->dlpi_addr;
	return 1;
}

void ha_stack_init(void)
{
	if (stack_ready)
		return;
	uintptr_t main_bias = 0, self[3] = { (uintptr_t)&ha_stack_init, 0, 0 };
	dl_iterate_phdr(first_object, &main_bias);
	dl_iterate_phdr(find_by_addr, self);
	nranges = 0;
	if (self[2] && self[1] != main_bias) {
		add_object_of((const void *)&ha_stack_init);
	} else {
		/* heapalloc linked statically into the program: its text is the
		 * program's.  Drop frames up to and including this file's
		 * caller chain by depth instead (see ha_stack_capture). */
	}
	add_object_of((const void *)&unw_backtrace);
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
	stack_ready = 1;
}

static inline int ours(uintptr_t pc)
{
	for (int i = 0; i < nranges; i++)
		if (pc - ranges[i].lo < ranges[i].hi - ranges[i].lo)
			return 1;
	return 0;
}

int ha_stack_capture(uintptr_t *pcs, int max)
{
	void *raw[HA_PROF_DEPTH + 24];
	int n = unw_backtrace(raw, (int)(sizeof raw / sizeof raw[0]));
	int i = 0;
	while (i < n && ours((uintptr_t)raw[i]))
		i++;
	int d = 0;
	for (; i < n && d < max; i++)
		pcs[d++] = (uintptr_t)raw[i];
	if (d == 0 && n > 0)              /* all ours? keep the outermost one */
		pcs[d++] = (uintptr_t)raw[n - 1];
	return d;
}
