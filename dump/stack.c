/* dump/stack.c — capture the call stack of a sampled allocation.
 *
 * The only includer of <libunwind.h>.  Returns raw return addresses, leaf
 * first, starting at the caller of malloc/new: heapalloc's own frames (and
 * libunwind's) are dropped here by address, so pprof never needs to know
 * heapalloc's names.  ha_stack_init() records the executable segments of
 * libheapalloc and libunwind (dl_iterate_phdr); when heapalloc is linked
 * statically into the program those would be the program's own, so
 * ha_stack_calibrate() instead learns the exact functions on every
 * allocation path by probing each entry point once.
 *
 * Cost (measured on this machine, 35-frame stacks, after warm-up):
 *   unw_backtrace (x86_64 fast trace, per-thread cache)  0.3-0.8 us/stack,
 *                                                         no system call
 *   unw_step/unw_get_reg loop (what gperftools does)      13-30 us/stack,
 *                                                         70 sigprocmask
 * The fast trace keeps a per-thread cache of frame descriptors keyed by IP;
 * UNW_CACHE_PER_THREAD keeps its fallback path (frames it cannot describe)
 * free of the global cache lock and its sigprocmask too.  (unw_set_cache_size
 * sizes only that fallback's DWARF register-state cache, consulted when the
 * fast trace meets an IP for the first time on a thread; in steady state
 * the fast trace hits its own cache, so the default size is kept.)
 *
 * The sampling hook calls the unwinder itself (ha_stack_unwind) and then
 * ha_stack_trim: a capture function of our own would be one more frame to
 * walk and drop (~70 instructions).  Walking costs per frame, so the hook
 * asks for HA_PROF_DEPTH + (our frames seen so far) rather than a fixed
 * HA_STACK_RAW: deep stacks stop after the frames that are kept.
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
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "dump/prof.h"

#define MAX_RANGES 64

static struct range { uintptr_t lo, len; } ranges[MAX_RANGES];  /* [lo, lo+len) */
static int nranges;
static int stack_ready;
static int static_mode;           /* heapalloc linked into the program */
static int calibrated;
static HA_TLS int calibrating;
static uintptr_t probe_lo, probe_hi;

static void add_range(uintptr_t lo, uintptr_t hi)
{
	for (int i = 0; i < nranges; i++)
		if (lo >= ranges[i].lo && hi <= ranges[i].lo + ranges[i].len)
			return;
	if (nranges < MAX_RANGES) {
		ranges[nranges].lo = lo;
		ranges[nranges].len = hi - lo;
		__atomic_store_n(&nranges, nranges + 1, __ATOMIC_RELEASE);
	}
}

/* The whole function holding ip, from its unwind (FDE) bounds. */
static int function_range(uintptr_t ip, uintptr_t *lo, uintptr_t *hi)
{
	unw_proc_info_t pi;
	if (unw_get_proc_info_by_ip(unw_local_addr_space, (unw_word_t)ip, &pi, NULL) != 0 ||
	    pi.end_ip <= pi.start_ip)
		return 0;
	*lo = (uintptr_t)pi.start_ip;
	*hi = (uintptr_t)pi.end_ip;
	return 1;
}

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
			ranges[nranges].len = ph->p_memsz;
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
	if (self[2] && self[1] != main_bias)
		add_object_of((const void *)&ha_stack_init);
	else
		static_mode = 1;      /* our text is the program's: see calibrate */
	add_object_of((const void *)&unw_backtrace);
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
	stack_ready = 1;
}

/* ---- static links ---------------------------------------------------------
 * Linked statically, heapalloc's functions sit in the program's own text,
 * so the object's range would drop the program's frames too.  Instead we
 * learn the exact functions on every allocation path: the probe below calls
 * each entry point with the countdown at 0 (ha_prof_on_alloc returns 0 and
 * calls ha_stack_calibrate_frame while `calibrating`), and every frame
 * between the unwinder and the probe adds its whole function (FDE bounds)
 * to the ranges.  Entry points the program did not link in are weak. */
extern void *_Znwm(size_t) __attribute__((weak));
extern void *_Znam(size_t) __attribute__((weak));
extern void _ZdlPv(void *) __attribute__((weak));
extern void _ZdaPv(void *) __attribute__((weak));

int ha_stack_calibrating(void)
{
	return calibrating;
}

void ha_stack_calibrate_frame(void)
{
	void *raw[64];
	int n = unw_backtrace(raw, 64);
	for (int i = 0; i < n; i++) {
		uintptr_t pc = (uintptr_t)raw[i], lo, hi;
		if (pc >= probe_lo && pc < probe_hi)
			break;
		if (function_range(pc, &lo, &hi))
			add_range(lo, hi);
	}
}

__attribute__((noinline)) static void probe(void)
{
	void *volatile p;
	void *q = NULL;
	p = malloc(24);
	free(p);
	p = malloc(100000);
	free(p);
	p = malloc(64u << 20);
	free(p);
	p = calloc(3, 40);
	p = realloc(p, 5000);
	p = realloc(p, 200000);
	free(p);
	p = calloc(1, 100000);
	free(p);
	if (posix_memalign(&q, 64, 100) == 0)
		free(q);
	p = aligned_alloc(64, 128);
	free(p);
	p = memalign(4096, 10000);
	free(p);
	p = valloc(100);
	free(p);
	p = pvalloc(100);
	free(p);
	p = reallocarray(NULL, 10, 10);
	free(p);
	if (_Znwm && _ZdlPv) {
		p = _Znwm(32);
		_ZdlPv(p);
	}
	if (_Znam && _ZdaPv) {
		p = _Znam(32);
		_ZdaPv(p);
	}
	__asm__ volatile("" ::: "memory");
}

int ha_stack_calibrate(void)
{
	if (!static_mode || calibrated)
		return 0;
	calibrated = 1;
	uintptr_t lo, hi;
	if (!function_range((uintptr_t)&probe, &lo, &hi))
		return 0;
	probe_lo = lo;
	probe_hi = hi;
	calibrating = 1;
	ha_alloc_call_back_next();    /* every probe allocation calls us */
	probe();
	calibrating = 0;
	return 1;
}

/* The unwinder, called by the sampling hook from its own frame (profiler.c),
 * so that no extra frame of ours has to be walked and then dropped. */
int (*const ha_stack_unwind)(void **buf, int size) = unw_backtrace;

/* Frames of ours seen at most before the caller's (learned, only grows):
 * an unwind asks for HA_PROF_DEPTH + skip_hint frames instead of walking
 * HA_STACK_RAW deep every time. */
static int skip_hint = 10;

int ha_stack_want(void)
{
	int w = HA_PROF_DEPTH + __atomic_load_n(&skip_hint, __ATOMIC_RELAXED);
	return w < HA_STACK_RAW ? w : HA_STACK_RAW;
}

static inline int ours(uintptr_t pc, int nr)
{
	for (int k = 0; k < nr; k++)
		if (pc - ranges[k].lo < ranges[k].len)
			return 1;
	return 0;
}

int ha_stack_trim(const uintptr_t *raw, int n, int asked, int max, int *start)
{
	int nr = __atomic_load_n(&nranges, __ATOMIC_ACQUIRE);
	int i = 0;
	if (HA_LIKELY(nr == 2)) {     /* shared library: our text, libunwind's */
		uintptr_t a = ranges[0].lo, al = ranges[0].len;
		uintptr_t b = ranges[1].lo, bl = ranges[1].len;
		while (i < n && (raw[i] - a < al || raw[i] - b < bl))
			i++;
	} else {
		while (i < n && ours(raw[i], nr))
			i++;
	}
	if (HA_UNLIKELY(n == asked && n - i < max && asked < HA_STACK_RAW)) {
		/* the buffer was full before max frames of the caller's: more
		 * of ours than the hint; remember, and unwind again in full */
		int h = i + 2 < HA_STACK_RAW - HA_PROF_DEPTH ? i + 2 : HA_STACK_RAW - HA_PROF_DEPTH;
		int cur = __atomic_load_n(&skip_hint, __ATOMIC_RELAXED);
		while (cur < h && !__atomic_compare_exchange_n(&skip_hint, &cur, h, 0,
							       __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
		return -1;
	}
	if (i == n) {                     /* all ours? keep the outermost one */
		*start = n - 1;
		return n > 0;
	}
	*start = i;
	return n - i < max ? n - i : max;
}
