/* prof/stack.c — capture the call stack of a sampled allocation.
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
 * Three unwinders, tried in this order:
 *   - the frame rules: one process-wide table keyed by IP (a return
 *     address) of what each call frame is on x86-64 (CFA = RSP or RBP +
 *     offset, return address at CFA - 8, RBP kept or saved at CFA + k),
 *     walked with a few loads a frame, no call into libunwind, no system
 *     call and no per-thread memory.  A stack is walked this way when every
 *     frame on it has a rule.
 *   - the shared rows: in the same table, the DWARF register-state row of
 *     each IP, filled through libunwind's API (unw_reg_states_iterate) the
 *     first time any thread meets an IP and replayed with
 *     unw_apply_reg_state (about 2 us a stack).  Walking a stack this way
 *     learns the rules of its frames, each derived from its row.
 *   - libunwind's x86_64 fast trace (unw_backtrace), for a frame the rows
 *     cannot describe (a signal frame, no unwind info) or a full table.
 *     Its frame cache is per thread: a thread's first call maps and fills
 *     a fresh 256 KiB table (64 page faults), which the two above spare.
 * Rows and rules are never taken back, so once any object has been
 * unloaded (dlclose: other code may come to the same addresses) neither is
 * used any more.
 *
 * unw_set_caching_policy() picks only the DWARF cache behind the fast
 * trace's misses; libunwind 1.6 as Debian 12 builds it (no HAVE___THREAD)
 * quietly keeps UNW_CACHE_GLOBAL when asked for UNW_CACHE_PER_THREAD.
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
#include <string.h>
#include <ucontext.h>

#include "prof/prof.h"

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
static unsigned long long rows_subs;    /* objects unloaded when rows began */

static int read_subs(struct dl_phdr_info *info, size_t size, void *arg)
{
	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
		*(unsigned long long *)arg = info->dlpi_subs;
	return 1;
}
static int shared_unwind(void **buf, int size, void *first);
static int fast_trace_from(void **buf, int size, void *first);

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
	if (static_mode) {            /* frames of the unwinder's own, if any */
		const void *own[] = { (const void *)stack_unwind, (const void *)shared_unwind,
				      (const void *)fast_trace_from };
		for (int i = 0; i < 3; i++) {
			uintptr_t lo, hi;
			if (function_range((uintptr_t)own[i], &lo, &hi))
				add_range(lo, hi);
		}
	}
	add_object_of((const void *)&unw_backtrace);
	dl_iterate_phdr(read_subs, &rows_subs);
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
	void *raw[64];
	in_frame = 1;
	int n = unw_backtrace(raw, 64);
	in_frame = 0;
	for (int i = 0; i < n; i++) {
		uintptr_t pc = (uintptr_t)raw[i], lo, hi;
		if (pc >= probe_lo && pc < probe_hi)
			break;
		if (function_range(pc, &lo, &hi))
			add_range(lo, hi);
	}
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

/* ---- shared rows and frame rules ------------------------------------------
 * slots: open addressing on the IP (a return address, looked up at IP - 1
 * as unw_step does), at most PROBES apart, filled at most half; slot_row
 * beside it holds each slot's row.  A slot's
 * row and rule are written before its ip is published (release), and never
 * change after, so a reader that sees its ip (acquire) sees both.
 * no_row marks an IP the rows cannot describe (cached too, so the DWARF
 * lookup is not repeated).  Only pages that get used are ever touched.
 *
 * A rule is the row boiled down to what a call frame on x86-64 almost
 * always is: CFA = RSP or RBP + offset, the return address at CFA - 8, RBP
 * kept or saved at CFA + offset.  Every stack whose frames all have rules
 * is walked by rule_walk, a few loads a frame; any other goes through the
 * rows (which learn the rules of its frames) or libunwind's fast trace. */
#define SLOT_BITS 15
#define NSLOTS (1u << SLOT_BITS)
#define PROBES 16
#define ROW_BYTES 192             /* libunwind 1.6: 184-byte register state */
#define NROWS 8192

enum { RULE_NONE, RULE_SP, RULE_BP, RULE_END };
struct rule { int32_t cfa_off; int16_t rbp_off; uint8_t kind, rbp_saved; };
struct slot { uintptr_t ip; struct rule rule; };   /* 16 bytes: 4 a cache line */
static struct slot slots[NSLOTS];
static const void *slot_row[NSLOTS];    /* the row of slots[i] */
static unsigned char rows[NROWS][ROW_BYTES] __attribute__((aligned(16)));
static unsigned rows_used, slots_used;
static int writer;                /* 1 while a thread adds a row */
static const unsigned char no_row[1];
static int rows_off;                    /* an object was unloaded since */
#define RECHECK 64                /* stacks a thread walks between unload checks */
static HA_TLS unsigned walks;

/* Whether the rows may still be used: no object unloaded since they began. */
static int rows_valid(void)
{
	unsigned long long subs = ~0ull;
	if (__atomic_load_n(&rows_off, __ATOMIC_RELAXED))
		return 0;
	dl_iterate_phdr(read_subs, &subs);
	if (subs == __atomic_load_n(&rows_subs, __ATOMIC_RELAXED))
		return 1;
	__atomic_store_n(&rows_off, 1, __ATOMIC_RELAXED);
	return 0;
}

static inline unsigned slot_of(uintptr_t ip)
{
	return (unsigned)((ip * 0x9e3779b97f4a7c15ull) >> (64 - SLOT_BITS));
}

static inline const struct slot *slot_at(uintptr_t ip)
{
	unsigned s = slot_of(ip);
	for (int i = 0; i < PROBES; i++, s = (s + 1) & (NSLOTS - 1)) {
		uintptr_t k = __atomic_load_n(&slots[s].ip, __ATOMIC_ACQUIRE);
		if (k == ip)
			return &slots[s];
		if (!k)
			break;
	}
	return NULL;
}

static inline const void *row_of(uintptr_t ip)
{
	const struct slot *s = slot_at(ip);
	return s ? slot_row[s - slots] : NULL;
}

/* Made-up stack for rule_of: every word points into it, so a row that
 * dereferences registers (a CFA expression) reads only here.  Used under
 * the writer flag. */
#define SCRATCH_WORDS 4096
static uintptr_t scratch[SCRATCH_WORDS];

/* A context at ip with RSP sp and RBP bp whose other registers point at
 * the middle of scratch. */
static void made_up(ucontext_t *uc, uintptr_t ip, uintptr_t sp, uintptr_t bp)
{
	memset(uc, 0, sizeof *uc);
	for (int r = 0; r < NGREG; r++)
		uc->uc_mcontext.gregs[r] = (greg_t)(uintptr_t)&scratch[SCRATCH_WORDS / 2];
	uc->uc_mcontext.gregs[REG_RIP] = (greg_t)ip;
	uc->uc_mcontext.gregs[REG_RSP] = (greg_t)sp;
	uc->uc_mcontext.gregs[REG_RBP] = (greg_t)bp;
}

/* Apply row to made-up registers: RSP = s, RBP = b, the others inside
 * scratch.  0 and the CFA, RA and RBP locations, or -1. */
static int probe_row(const void *row, uintptr_t ip, uintptr_t s, uintptr_t b, uintptr_t *cfa,
		     unw_save_loc_t *ra, unw_save_loc_t *rbp, uintptr_t *rbp_home)
{
	ucontext_t uc;
	unw_cursor_t p;
	unw_word_t v;
	made_up(&uc, ip, s, b);
	*rbp_home = (uintptr_t)&uc.uc_mcontext.gregs[REG_RBP];
	if (unw_init_local(&p, &uc) < 0 || unw_apply_reg_state(&p, (void *)row) <= 0 ||
	    unw_get_reg(&p, UNW_REG_SP, &v) < 0 || unw_get_save_loc(&p, UNW_X86_64_RIP, ra) < 0 ||
	    unw_get_save_loc(&p, UNW_X86_64_RBP, rbp) < 0)
		return -1;
	*cfa = (uintptr_t)v;
	return 0;
}

static void scratch_fill(void)
{
	if (!scratch[0])
		for (int i = 0; i < SCRATCH_WORDS; i++)
			scratch[i] = (uintptr_t)&scratch[SCRATCH_WORDS / 2];
}

/* The rule of a frame (IP ip, RSP sp, RBP bp) whose row is known good, from
 * `after`: that frame's cursor with the row applied (a: what
 * unw_apply_reg_state returned).  The CFA, RA and RBP offsets come from the
 * real frame, and which register the CFA follows from made-up register
 * sets that tell RSP and RBP apart (one, or two for a frame whose CFA comes
 * near the middle of scratch).  RULE_NONE for anything else
 * (expressions, registers saved in registers, frames beyond the scratch's
 * reach): those frames keep the rows.  Under the writer flag. */
static struct rule rule_of(unw_cursor_t *after, int a, uintptr_t sp, uintptr_t bp, uintptr_t ip,
			   const void *row)
{
	struct rule r = { 0, 0, RULE_NONE, 0 };
	unw_word_t cfa;
	unw_save_loc_t l;
	if (a == 0 || (a > 0 && unw_get_save_loc(after, UNW_X86_64_RBP, &l) == 0 &&
		       l.type == UNW_SLT_NONE)) {
		r.kind = RULE_END;        /* the walk stops here, as unw_step does */
		return r;
	}
	if (a < 0 || unw_get_reg(after, UNW_REG_SP, &cfa) < 0)
		return r;
	int64_t osp = (int64_t)(cfa - sp), obp = (int64_t)(cfa - bp);
	if (osp < 8 || osp > (int64_t)sizeof scratch / 2)
		return r;
	scratch_fill();
	uintptr_t lo = (uintptr_t)scratch, hi = lo + sizeof scratch - 64;
	int kind = RULE_NONE, saved = 0;
	int64_t rbp_off = 0;
	for (int k = 0; k < 2; k++) {
		/* the two candidate CFAs differ by 64 + 64k bytes */
		uintptr_t s = lo + 256 + 128 * (uintptr_t)k;
		uintptr_t b = s + (uintptr_t)(osp - obp) + 64 + 64 * (uintptr_t)k;
		if (b < lo || b > hi)
			b = lo + 128;
		uintptr_t got, home;
		unw_save_loc_t ra, rbp;
		if (probe_row(row, ip, s, b, &got, &ra, &rbp, &home) < 0)
			return r;
		int kk = got == s + (uintptr_t)osp ? RULE_SP :
			 got == b + (uintptr_t)obp && obp >= 8 && obp <= INT32_MAX ? RULE_BP : RULE_NONE;
		if (kk == RULE_NONE || (k && kk != kind))
			return r;
		kind = kk;
		if (ra.type != UNW_SLT_MEMORY || ra.u.addr != got - 8 || rbp.type != UNW_SLT_MEMORY)
			return r;
		int sv = rbp.u.addr != home;
		int64_t off = sv ? (int64_t)(rbp.u.addr - got) : 0;
		if (sv && (off < INT16_MIN || off > -8))
			return r;
		if (k && (sv != saved || off != rbp_off))
			return r;
		saved = sv;
		rbp_off = off;
		/* every other register and every scratch word points at its
		 * middle: a CFA 4 KiB below that came from RSP or RBP alone,
		 * and the second probe only guards frames nearer it */
		if (got + 4096 < (uintptr_t)&scratch[SCRATCH_WORDS / 2])
			break;
	}
	r.kind = (uint8_t)kind;
	r.cfa_off = (int32_t)(kind == RULE_SP ? osp : obp);
	r.rbp_saved = (uint8_t)saved;
	r.rbp_off = (int16_t)rbp_off;
	return r;
}

struct pick { uintptr_t pc; void *row; int found; };

static int pick_row(void *token, void *rs, size_t size, unw_word_t lo, unw_word_t hi)
{
	struct pick *p = token;
	if (p->pc < lo || p->pc >= hi)
		return 0;
	if (size <= ROW_BYTES) {
		memcpy(p->row, rs, size);
		p->found = 1;
	}
	return 1;                 /* stop iterating */
}

/* Whether a row applied to a frame's cursor (a: unw_apply_reg_state's
 * result, after: the cursor) describes a call's frame: the end of the stack,
 * or the return address stored at CFA - 8. */
static int row_fits(int a, unw_cursor_t *after)
{
	unw_save_loc_t ra;
	unw_word_t cfa;
	return a == 0 ||
	       (a > 0 && unw_get_save_loc(after, UNW_X86_64_RIP, &ra) == 0 &&
		unw_get_reg(after, UNW_REG_SP, &cfa) == 0 && ra.type == UNW_SLT_MEMORY &&
		ra.u.addr == cfa - 8);
}

/* The row of ip from its FDE into tmp (c: a cursor at the frame; iterating
 * moves the cursor's own state, so a copy is used).  1 if found. */
static int fetch_row(const unw_cursor_t *c, uintptr_t ip, void *tmp)
{
	unw_cursor_t probe = *c;
	struct pick p = { ip - 1, tmp, 0 };
	return unw_reg_states_iterate(&probe, pick_row, &p) >= 0 && p.found;
}

/* Keep ip's row (or no_row) and rule in the table when there is room; under
 * the writer flag.  Returns the row as kept, or row itself. */
static const void *keep(uintptr_t ip, const void *row, struct rule rule)
{
	unsigned s = slot_of(ip);
	for (int i = 0; i < PROBES && slots_used < NSLOTS / 2; i++, s = (s + 1) & (NSLOTS - 1)) {
		if (slots[s].ip == ip)
			break;
		if (slots[s].ip)
			continue;
		if (row != no_row) {
			if (rows_used == NROWS)
				break;
			memcpy(rows[rows_used], row, ROW_BYTES);
			row = rows[rows_used];
			__atomic_store_n(&rows_used, rows_used + 1, __ATOMIC_RELAXED);
		}
		slot_row[s] = row;
		slots[s].rule = rule;
		__atomic_store_n(&slots[s].ip, ip, __ATOMIC_RELEASE);
		__atomic_store_n(&slots_used, slots_used + 1, __ATOMIC_RELAXED);
		break;
	}
	return row;
}

/* The row for the frame at *c (its IP is ip), from its FDE, kept in the
 * table when there is room and no other writer; tmp holds it otherwise.
 * *c moves to the caller's frame when the row applies (*a: the result of
 * that; -2 when not applied).
 * Only a call's frame gets a row: its caller's IP is stored at CFA - 8 and
 * is looked up at IP - 1.  A signal frame (the kernel's trampoline) keeps
 * the IP elsewhere, and the frame it interrupted must be looked up at its
 * exact IP, so no_row sends such stacks to the fast trace. */
static const void *learn_row(unw_cursor_t *c, uintptr_t ip, void *tmp, int *a)
{
	const void *row = no_row;
	unw_word_t sp = 0, bp = 0;
	*a = -2;
	if (fetch_row(c, ip, tmp) && unw_get_reg(c, UNW_REG_SP, &sp) == 0 &&
	    unw_get_reg(c, UNW_X86_64_RBP, &bp) == 0) {
		*a = unw_apply_reg_state(c, tmp);
		if (row_fits(*a, c))
			row = tmp;
	}
	if (__atomic_exchange_n(&writer, 1, __ATOMIC_ACQUIRE))
		return row;
	struct rule rule = { 0, 0, RULE_NONE, 0 };
	if (row != no_row)
		rule = rule_of(c, *a, (uintptr_t)sp, (uintptr_t)bp, ip, row);
	row = keep(ip, row, rule);
	__atomic_store_n(&writer, 0, __ATOMIC_RELEASE);
	return row;
}

static unsigned learned_at;       /* frames learned by learn_at (tests) */

/* Learn the frame at ip (a return address) whose RSP and RBP are sp and bp,
 * as the rule walk found them, on a made-up context whose other registers
 * point into scratch.  Kept only when its rule needs no other register
 * (RULE_SP, RULE_BP, RULE_END).  1: ip has a slot now, the rule walk goes
 * on; 0: the caller walks the real registers through the rows instead,
 * which learn the frame there.  So a stack with a few new frames is
 * learned without replaying the rows of all the others. */
static int learn_at(uintptr_t ip, uintptr_t sp, uintptr_t bp)
{
	if (__atomic_load_n(&slots_used, __ATOMIC_RELAXED) >= NSLOTS / 2 ||
	    __atomic_load_n(&rows_used, __ATOMIC_RELAXED) >= NROWS ||
	    __atomic_exchange_n(&writer, 1, __ATOMIC_ACQUIRE))
		return 0;
	ucontext_t uc;
	unw_cursor_t c;
	unsigned char row[ROW_BYTES] __attribute__((aligned(16)));
	scratch_fill();
	made_up(&uc, ip, sp, bp);
	if (!slot_at(ip) && unw_init_local(&c, &uc) >= 0 && fetch_row(&c, ip, row)) {
		int a = unw_apply_reg_state(&c, row);
		if (row_fits(a, &c)) {
			struct rule got = rule_of(&c, a, sp, bp, ip, row);
			if (got.kind != RULE_NONE && keep(ip, row, got) != row)
				learned_at++;
		}
	}
	__atomic_store_n(&writer, 0, __ATOMIC_RELEASE);
	return slot_at(ip) != NULL;
}

/* Entries of tmp from the one equal to first (the hook's return address)
 * into buf: frames of ours below it, when a call here was not a tail call,
 * are dropped. */
static int from_first(void **buf, int size, void *const *tmp, int n, void *first)
{
	int i = 0;
	while (i < n && i < 4 && tmp[i] != first)
		i++;
	if (i == n || i == 4)
		i = 0;
	n = n - i < size ? n - i : size;
	memcpy(buf, tmp + i, (size_t)(n > 0 ? n : 0) * sizeof *buf);
	return n > 0 ? n : 0;
}

/* libunwind's fast trace for a stack the rows cannot walk. */
__attribute__((noinline)) static int fast_trace_from(void **buf, int size, void *first)
{
	void *tmp[HA_STACK_RAW + 4];
	return from_first(buf, size, tmp, unw_backtrace(tmp, size + 4), first);
}

/* The walk over the shared rows, from the frame of this function.  Ends
 * like unw_step: undefined return address or RBP, or a bad frame. */
__attribute__((noinline)) static int shared_unwind(void **buf, int size, void *first)
{
	unw_context_t uc;
	unw_cursor_t c;
	unw_word_t ip;
	unsigned char row_tmp[ROW_BYTES] __attribute__((aligned(16)));
	void *tmp[HA_STACK_RAW + 4];
	int n = 0;
	if (size > HA_STACK_RAW)
		size = HA_STACK_RAW;
	if (!rows_valid())
		return fast_trace_from(buf, size, first);
	unw_getcontext(&uc);
	if (unw_init_local(&c, &uc) < 0 || unw_get_reg(&c, UNW_REG_IP, &ip) < 0)
		return fast_trace_from(buf, size, first);
	while (n < size + 4) {
		const void *row = row_of((uintptr_t)ip);
		int a = -2;
		if (!row) {
			if (__atomic_load_n(&slots_used, __ATOMIC_RELAXED) >= NSLOTS / 2 ||
			    __atomic_load_n(&rows_used, __ATOMIC_RELAXED) >= NROWS)
				return fast_trace_from(buf, size, first);
			row = learn_row(&c, (uintptr_t)ip, row_tmp, &a);
		}
		if (row == no_row)
			return fast_trace_from(buf, size, first);
		if (a == -2)
			a = unw_apply_reg_state(&c, (void *)row);
		if (a <= 0)
			break;
		unw_save_loc_t rbp;
		if (unw_get_save_loc(&c, UNW_X86_64_RBP, &rbp) < 0 || rbp.type == UNW_SLT_NONE)
			break;
		if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || ip < 0x4000)
			break;
		tmp[n++] = (void *)ip;
	}
	return from_first(buf, size, tmp, n, first);
}

/* Threads inside libunwind or dl_iterate_phdr.  libunwind has global
 * mutexes of its own, and dl_iterate_phdr holds the loader's write lock,
 * which glibc's fork does not reset: a fork's child would inherit them held
 * and wait for them at its first sample, so prefork closes the gate and
 * waits until nobody is inside.  Being
 * inside counts as a held lock (alloc/internal.h), so a signal handler's
 * fork on such a thread never waits for itself.  The rule walk calls no
 * libunwind and needs no gate. */
static int unwinding, unwind_gate;
static HA_TLS int unwinding_here;

static void gate_enter(void)
{
	ha_locks_held++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
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
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	ha_locks_held--;
}

void ha_stack_prefork(void)
{
	__atomic_store_n(&unwind_gate, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&unwinding, __ATOMIC_SEQ_CST))
		sched_yield();
}

void ha_stack_postfork(int child, int open)
{
	if (child)   /* only this thread lives on */
		__atomic_store_n(&unwinding, unwinding_here, __ATOMIC_RELAXED);
	if (open)
		__atomic_store_n(&unwind_gate, 0, __ATOMIC_RELEASE);
}

/* Where a rule walk stands: the next frame's IP, RSP and RBP, and how many
 * frames are in buf. */
struct walk { uintptr_t ip, sp, bp; int n; };
enum { WALK_DONE, WALK_UNKNOWN, WALK_NO_RULE };

/* The walk by rules, from w on: WALK_DONE (w->n frames), or WALK_UNKNOWN
 * at a frame never met (w stands at it: learn it and walk on), or
 * WALK_NO_RULE when a frame has no rule (the caller takes the rows). */
static inline __attribute__((always_inline)) int rule_walk(void **buf, int size, struct walk *w)
{
	uintptr_t ip = w->ip, sp = w->sp, bp = w->bp;
	int n = w->n, st = WALK_DONE;
	while (n < size) {
		buf[n++] = (void *)ip;
		if (HA_UNLIKELY(n >= size))
			break;            /* the last frame kept needs no rule */
		/* the slot: nearly always the first probed */
		const struct slot *s = &slots[slot_of(ip)];
		if (HA_UNLIKELY(__atomic_load_n(&s->ip, __ATOMIC_ACQUIRE) != ip) &&
		    !(s = slot_at(ip))) {
			n--;
			st = WALK_UNKNOWN;
			break;
		}
		struct rule r = s->rule;
		if (HA_UNLIKELY((unsigned)r.kind - RULE_SP > RULE_BP - RULE_SP)) {
			if (r.kind == RULE_END)
				break;
			return WALK_NO_RULE;
		}
		uintptr_t cfa = (r.kind == RULE_SP ? sp : bp) + (uintptr_t)(intptr_t)r.cfa_off;
		/* not above this frame, or 64 MiB away: not a frame of this
		 * stack, ask libunwind */
		if (HA_UNLIKELY(cfa - sp - 1 >= ((uintptr_t)1 << 26)))
			return WALK_NO_RULE;
		if (r.rbp_saved)
			bp = *(const uintptr_t *)(cfa + (uintptr_t)(intptr_t)r.rbp_off);
		ip = *(const uintptr_t *)(cfa - 8);
		sp = cfa;
		if (HA_UNLIKELY(ip < 0x4000))
			break;
	}
	w->ip = ip;
	w->sp = sp;
	w->bp = bp;
	w->n = n;
	return st;
}

/* A walk from fp (a frame pointer: the caller's RBP, then the return
 * address) by the rules learned so far: the frame count, or -1 when a frame
 * has no rule or was never met. */
static inline __attribute__((always_inline)) int rule_walk_from(void **buf, int size,
								const uintptr_t *fp)
{
	struct walk w = { fp[1], (uintptr_t)(fp + 2), fp[0], 0 };
	return rule_walk(buf, size, &w) == WALK_DONE ? w.n : -1;
}

static HA_NOINLINE int rows_valid_gated(void)
{
	gate_enter();
	int ok = rows_valid();
	gate_leave();
	return ok;
}

/* The unwinder the sampling hook calls from its own frame (hooks.c),
 * so that no extra frame of ours has to be walked and then dropped: the
 * rules walk from the hook's frame (learning the frames they meet for the
 * first time), and the rows start at it. */
static int stack_unwind(void **buf, int size)
{
	const uintptr_t *fp = __builtin_frame_address(0);
	if (size > HA_STACK_RAW)
		size = HA_STACK_RAW;
	/* an unload is looked for every RECHECK stacks a thread walks (it
	 * costs a dl_iterate_phdr), as libunwind's fast trace never does */
	if (HA_LIKELY(!__atomic_load_n(&rows_off, __ATOMIC_RELAXED)) &&
	    (HA_LIKELY(walks++ % RECHECK) || rows_valid_gated())) {
		struct walk w = { fp[1], (uintptr_t)(fp + 2), fp[0], 0 };
		for (;;) {
			int st = rule_walk(buf, size, &w);
			if (HA_LIKELY(st == WALK_DONE))
				return w.n;
			if (st == WALK_NO_RULE)
				break;
			gate_enter();
			int on = learn_at(w.ip, w.sp, w.bp);
			gate_leave();
			if (!on)
				break;
		}
	}
	gate_enter();
	int n = shared_unwind(buf, size, (void *)fp[1]);
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
