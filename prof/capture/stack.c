/* prof/capture/stack.c — capture the call stack of a sampled allocation.
 *
 * With frame_rules.c and unw_pipe.c, the only includers of <libunwind.h>.  Returns raw
 * return addresses, leaf first, starting at the caller of malloc/new:
 * heapalloc's own frames (and libunwind's) are dropped here by address, so
 * pprof never needs to know heapalloc's names.  ha_stack_init() records the executable segments of
 * libheapalloc and libunwind (dl_iterate_phdr); when heapalloc is linked
 * statically into the program those would be the program's own, so
 * ha_stack_calibrate() instead learns the exact functions on every
 * allocation path by probing each entry point once.
 *
 * Two unwinders, tried in this order:
 *   - the frame rules (frame_rules.c): one process-wide table keyed by IP
 *     (a return address) of what each call frame is on x86-64 (CFA = RSP or
 *     RBP + offset, return address at CFA - 8, RBP kept or saved at CFA + k),
 *     walked with a few loads a frame, no call into libunwind, no system
 *     call and no per-thread memory.  A stack is walked this way when every
 *     frame on it has a rule.
 *   - the shared rows: in the same table, the DWARF register-state row of
 *     each IP, filled through libunwind's API (unw_reg_states_iterate) the
 *     first time any thread meets an IP and replayed with
 *     unw_apply_reg_state (about 2 us a stack).  Walking a stack this way
 *     learns the rules of its frames, each derived from its row; the few
 *     frames the table cannot describe (a signal frame and the frame it
 *     interrupted, code without unwind info) are stepped there without it.
 * When an object has been unloaded (dlclose: other code may come to the
 * same addresses; looked for every RECHECK walks of a thread), the rules
 * of IPs outside the objects loaded both before and after are set
 * RULE_GONE and learned again when met; the others stay.  libunwind's own
 * walks (unw_step, unw_backtrace) are never called: they validate through
 * a pipe (unw_pipe.c).
 * The table of rows and rules and their learning are frame_rules.c's;
 * this file owns the ranges of our own text, the static-link probe, the
 * gate a fork waits at, and the order the three are tried in.
 *
 * unw_set_caching_policy() (unw_pipe.c) picks only the DWARF cache behind
 * unw_step; libunwind 1.6 as Debian 12 builds it (no HAVE___THREAD)
 * quietly keeps UNW_CACHE_GLOBAL when asked for UNW_CACHE_PER_THREAD, so
 * there the call only runs libunwind's one-time set-up (~32,000
 * instructions, its register-state cache cleared), which the first
 * unw_init_local of the frame learning would run anyway.
 *
 * The sampling hook calls the unwinder itself (ha_stack_unwind) and then
 * ha_stack_trim; every walk starts at the hook's frame, so no frame of
 * ours is walked or kept (at -O0, ha_stack_trim drops ours).  Walking costs per frame, so
 * the hook asks for HA_PROF_DEPTH + (our frames seen so far) rather than a
 * fixed HA_STACK_RAW: deep stacks stop after the frames that are kept.
 *
 * Never call with a profiler lock held: the unwinder may take the dynamic
 * loader's lock (dl_iterate_phdr) on a cache miss.  The caller holds the
 * thread's re-entrancy guard (ha_prof_busy), so any allocation libunwind
 * makes is never sampled.  The shared rows are read without a lock; one
 * writer at a time adds to them (a busy writer flag means the row is used
 * once and not kept), so no thread ever waits on another.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <dlfcn.h>
#include <link.h>
#include <malloc.h>
#include <stddef.h>
#include <stdlib.h>

#include "prof/prof.h"
#include "prof/capture/frame_rules.h"

#define MAX_RANGES 64

static struct range { uintptr_t lo, len; } ranges[MAX_RANGES];  /* [lo, lo+len) */
static int nranges;
static int stack_ready;
static int static_mode;           /* heapalloc linked into the program */
static int calibrated;
static HA_TLS int calibrating;
static HA_TLS int in_frame;       /* inside ha_stack_calibrate_frame */
static uintptr_t probe_lo, probe_hi;

static int stack_unwind(void **buf, int size);
static void gate_enter(void);
static void gate_leave(void);

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
	ha_unw_start();
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
	if (static_mode) {            /* frames of the unwinder's own, if any */
		const void *own[] = { (const void *)stack_unwind, (const void *)ha_frame_shared_unwind };
		for (int i = 0; i < 2; i++) {
			uintptr_t lo, hi;
			if (function_range((uintptr_t)own[i], &lo, &hi))
				add_range(lo, hi);
		}
	}
	add_object_of((const void *)&unw_apply_reg_state);   /* libunwind's text */
	ha_frame_rules_init();
	stack_ready = 1;
}

/* ---- static links ---------------------------------------------------------
 * Linked statically, heapalloc's functions sit in the program's own text,
 * so the object's range would drop the program's frames too.  Instead we
 * learn the exact functions on every allocation path: the probe below calls
 * each entry point with the countdown at 0 (ha_prof_sampled returns 0 and
 * calls ha_stack_calibrate_frame while `calibrating`), and every frame
 * between the unwinder and the probe adds its whole function (FDE bounds)
 * to the ranges.  Entry points the program did not link in are weak. */
extern void *_Znwm(size_t) __attribute__((weak));
extern void *_Znam(size_t) __attribute__((weak));
extern void _ZdlPv(void *) __attribute__((weak));
extern void _ZdaPv(void *) __attribute__((weak));

/* Not inside the frame walk: what libunwind allocates or maps there (its
 * first use maps its cache under a pthread_once) is not probed, which
 * would walk again from inside that once and wait for it forever. */
int ha_stack_probing;

int ha_stack_calibrating_now(void)
{
	return calibrating && !in_frame;
}

void ha_stack_calibrate_frame(void)
{
	void *raw[HA_STACK_RAW];
	/* what libunwind allocates or maps in the walk and the lookups is
	 * its own, never a sample (aarch64's searches .debug_frame, reading
	 * /proc/self/maps into a fresh mapping: counted, it would calibrate
	 * again, and again) */
	int busy = ha_prof_busy;
	ha_prof_busy = 1;
	in_frame = 1;
	gate_enter();
	int n = ha_frame_shared_unwind(raw, HA_STACK_RAW, NULL);
	gate_leave();
	for (int i = 0; i < n; i++) {
		uintptr_t pc = (uintptr_t)raw[i], lo, hi;
		if (pc >= probe_lo && pc < probe_hi)
			break;
		if (function_range(pc, &lo, &hi))
			add_range(lo, hi);
	}
	in_frame = 0;
	ha_prof_busy = busy;
}

__attribute__((noinline)) static void probe(int maps)
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
	if (maps) {       /* the mmap family's paths (alloc/mmap.c) */
		void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m != MAP_FAILED) {
			void *g = mremap(m, 4096, 8192, MREMAP_MAYMOVE);
			munmap(g != MAP_FAILED ? g : m, g != MAP_FAILED ? 8192 : 4096);
		}
	}
	__asm__ volatile("" ::: "memory");
}

int ha_stack_calibrate(int maps)
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
	__atomic_store_n(&ha_stack_probing, 1, __ATOMIC_RELAXED);
	ha_alloc_call_back_next();    /* every probe allocation calls us */
	probe(maps);
	__atomic_store_n(&ha_stack_probing, 0, __ATOMIC_RELAXED);
	calibrating = 0;
	return 1;
}

#define RECHECK 64                /* stacks a thread walks between unload checks */
static HA_TLS unsigned walks;

/* Threads inside libunwind or dl_iterate_phdr.  libunwind has global
 * mutexes of its own, and dl_iterate_phdr holds the loader's write lock,
 * which glibc's fork does not reset: a fork's child would inherit them held
 * and wait for them at its first sample, so prefork closes the gate and
 * waits until nobody is inside.  Being
 * inside counts as a held lock (alloc/lock.h), so a signal handler's
 * fork on such a thread never waits for itself.  The rule walk calls no
 * libunwind and needs no gate. */
static int unwinding, unwind_gate;
static HA_TLS int unwinding_here;

static void gate_enter(void)
{
	ha_held_begin();
	for (;;) {
		__atomic_fetch_add(&unwinding, 1, __ATOMIC_SEQ_CST);
		if (HA_LIKELY(!__atomic_load_n(&unwind_gate, __ATOMIC_SEQ_CST))) {
			unwinding_here = 1;
			return;
		}
		__atomic_fetch_sub(&unwinding, 1, __ATOMIC_SEQ_CST);
		while (__atomic_load_n(&unwind_gate, __ATOMIC_ACQUIRE))
			sched_yield();
	}
}

static void gate_leave(void)
{
	__atomic_fetch_sub(&unwinding, 1, __ATOMIC_RELEASE);
	unwinding_here = 0;
	ha_held_end();
}

void ha_stack_prefork(void)
{
	__atomic_store_n(&unwind_gate, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&unwinding, __ATOMIC_SEQ_CST))
		sched_yield();
}

void ha_stack_postfork(int child, int open)
{
	if (child) {   /* only this thread lives on, in a process of its own */
		__atomic_store_n(&unwinding, unwinding_here, __ATOMIC_RELAXED);
		ha_frame_after_fork();
	}
	if (open)
		__atomic_store_n(&unwind_gate, 0, __ATOMIC_RELEASE);
}

static HA_NOINLINE void check_unloads_gated(void)
{
	gate_enter();
	ha_frame_check_unloads();
	gate_leave();
}

/* This thread's last walk by rules alone (frame_rules.h, struct
 * walk_memo): a program samples from the same few places, and a stack
 * whose start and words are the last one's is replayed, a load and a
 * compare a word, instead of walked (~30 instructions a frame).  ok: it
 * may be replayed.  Written and read only inside the sampling hook (the
 * thread's re-entrancy guard is held), so a signal handler never sees it
 * half written. */
static HA_TLS struct walk_memo memo;
static HA_TLS int memo_ok;
static HA_TLS unsigned memo_gen;  /* ha_frame_gen when noted: none set RULE_GONE since */
#ifdef HA_TESTING
HA_TESTABLE unsigned replayed;    /* walks replayed (prof/unit.h) */
#endif
/* ha_stack_trim's answer for the memo's frames (valid: since the memo was
 * last noted), and whether the frames stack_unwind just returned are the
 * memo's (from_memo: the next trim may answer from it). */
static HA_TLS struct { int valid, asked, max, nr, n, at, depth; } trimmed;
static HA_TLS int from_memo;

/* The last walk again into buf if this one, from fp's frame and of size
 * frames, is that walk: its frame count, else -1. */
static inline int replay(void **buf, int size, const uintptr_t *fp, uintptr_t sp, unsigned gen)
{
	const struct walk_memo *m = &memo;
	if (!memo_ok || size <= 0 || m->ip0 != fp[1] || m->sp0 != sp || memo_gen != gen ||
	    m->size != size || (m->need_bp && m->bp0 != fp[0]))
		return -1;
	const struct walk_read *r = m->rd, *e = r + m->nreads;
	char *out = (char *)(buf + 1);
	buf[0] = (void *)m->ip0;
	for (; r < e; r++) {
		uintptr_t v = r->val;
		/* read only once the words before matched: where the walk
		 * itself reads, from the same frames */
		if (*(const uintptr_t *)r->at != v)
			return -1;
		*(void **)out = (void *)v;   /* kept when it is a frame */
		out += r->step;
	}
	return (int)((void **)out - buf);
}

/* The unwinder the sampling hook calls from its own frame (hooks.c),
 * so that no extra frame of ours has to be walked and then dropped: the
 * rules walk from the hook's frame (learning the frames they meet for the
 * first time), and the rows start at it. */
static int stack_unwind(void **buf, int size)
{
	const uintptr_t *fp = __builtin_frame_address(0);
	const uintptr_t sp = HA_CALLER_SP(fp, __builtin_dwarf_cfa());
	from_memo = 0;
	if (size > HA_STACK_RAW)
		size = HA_STACK_RAW;
	/* an unload is looked for every RECHECK stacks a thread walks (it
	 * costs a dl_iterate_phdr) */
	if (HA_UNLIKELY(walks++ % RECHECK == 0))
		check_unloads_gated();
	unsigned gen = __atomic_load_n(&ha_frame_gen, __ATOMIC_ACQUIRE);
	int got = replay(buf, size, fp, sp, gen);
	if (got >= 0) {
		from_memo = 1;
#ifdef HA_TESTING
		replayed++;
#endif
		return got;
	}
	struct walk w = { fp[1], sp, fp[0], 0 };
	/* the first walk notes what it reads; one that had to learn
	 * a frame is noted at its next time, all known then */
	int st = rule_walk(buf, size, &w, &memo);
	memo_ok = from_memo = st == WALK_DONE && memo.nreads <= WALK_MEMO_READS;
	memo_gen = gen;
	trimmed.valid = 0;
	if (HA_LIKELY(st == WALK_DONE))
		return w.n;
	/* a frame never met is learned; one without unwind info, a
	 * signal frame and the frame it interrupted are stepped
	 * (frame_rules.c); the rule walk goes on from there */
	uintptr_t ok_page = 0;
	for (;;) {
		gate_enter();
		int on = st == WALK_NO_RULE ? ha_frame_step_other(buf, size, &w, &ok_page)
					    : ha_frame_learn_at(w.ip, w.sp, w.bp);
		gate_leave();
		if (!on)
			break;
		if (on == 2)
			return w.n;
		st = rule_walk(buf, size, &w, NULL);
		if (HA_LIKELY(st == WALK_DONE))
			return w.n;
	}
	gate_enter();
	int n = ha_frame_shared_unwind(buf, size, (void *)fp[1]);
	gate_leave();
	return n;
}

int (*const ha_stack_unwind)(void **buf, int size) = stack_unwind;

/* Frames of ours seen at most before the caller's (learned, only grows):
 * an unwind asks for HA_PROF_DEPTH + skip_hint frames instead of walking
 * HA_STACK_RAW deep every time. */
static int skip_hint = 10;

int ha_stack_want(void)
{
	int w = HA_PROF_DEPTH + __atomic_load_n(&skip_hint, __ATOMIC_RELAXED);
	return w < HA_STACK_RAW ? w : HA_STACK_RAW;
}

static inline int trim(const uintptr_t *raw, int n, int asked, int max, int *start);

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
	/* the memo's frames again (the same raw as when this was worked out) */
	int memo_raw = from_memo;
	from_memo = 0;
	if (memo_raw && trimmed.valid && trimmed.asked == asked && trimmed.max == max &&
	    trimmed.nr == nr && trimmed.n == n) {
		*start = trimmed.at;
		return trimmed.depth;
	}
	int d = trim(raw, n, asked, max, start);
	if (memo_raw && d >= 0) {
		trimmed.asked = asked;
		trimmed.max = max;
		trimmed.nr = nr;
		trimmed.n = n;
		trimmed.at = *start;
		trimmed.depth = d;
		trimmed.valid = 1;
	}
	return d;
}

/* ha_stack_trim's work: the first frame not ours in raw[0, n). */
static inline int trim(const uintptr_t *raw, int n, int asked, int max, int *start)
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
