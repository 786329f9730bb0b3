/* prof/capture/frame_rules.c — the learned frame cache of the stack capture: the
 * shared rows (each IP's DWARF register-state row, from libunwind) and the
 * frame rules boiled down from them, in one process-wide table keyed by IP;
 * the walk over the rows, which learns the rules of the frames it meets;
 * and libunwind's fast trace for what neither describes.  stack.c decides
 * when each is used (its opening comment); the rule walk itself is inline
 * in prof/capture/frame_rules.h.
 *
 * Never called with a profiler lock held (the row lookups may take the
 * dynamic loader's lock), and only inside stack.c's fork gate.  Never
 * allocates: the table, the rows and the scratch stack are static.  The
 * table is read without a lock; one writer at a time adds to it (a busy
 * writer flag means the row is used once and not kept), so no thread ever
 * waits on another.  Rows and rules are never taken back; once an object
 * has been unloaded (ha_frame_rows_off) neither is used any more.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <link.h>
#include <stddef.h>
#include <string.h>
#include <ucontext.h>

#include "prof/prof.h"
#include "prof/capture/frame_rules.h"
#include "prof/unit.h"   /* learned_at, for the unit test build */

static unsigned long long rows_subs;    /* objects unloaded when rows began */

static int read_subs(struct dl_phdr_info *info, size_t size, void *arg)
{
	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
		*(unsigned long long *)arg = info->dlpi_subs;
	return 1;
}

void ha_frame_rules_init(void)
{
	dl_iterate_phdr(read_subs, &rows_subs);
}

/* The table (ha_frame_tab): open addressing on the IP (a return address,
 * looked up at IP - 1 as unw_step does), at most PROBES apart, filled at
 * most half; each slot names its row (an index into rows, or NO_ROW: an IP
 * the rows cannot describe, cached too so that the DWARF lookup is not
 * repeated).  A slot's rule and row are written before its ip is published
 * (release), and never change after, so a reader that sees its ip
 * (acquire) sees both.  When half full it is copied into the next size
 * (twice as large, in slot_store after it) and that one is published; the
 * old one is never written again and stays for readers still walking it.
 * Sizes, rows and scratch are static and touched only once used, so a
 * program that meets few frames holds a few pages (ha_frame_memory).
 *
 * A rule is the row boiled down to what a call frame on x86-64 almost
 * always is: CFA = RSP or RBP + offset, the return address at CFA - 8, RBP
 * kept or saved at CFA + offset.  Every stack whose frames all have rules
 * is walked by rule_walk, a few loads a frame; any other goes through the
 * rows (which learn the rules of its frames) or libunwind's fast trace. */
#define NROWS 8192

/* The registers a rule follows, in libunwind's and the kernel's names: the
 * frame pointer (RBP, x29) and the return address (RIP's column, x30).
 * A row's size is libunwind's register state for the target. */
#if defined(__x86_64__)
#define ROW_BYTES 192             /* libunwind 1.6: 184-byte register state */
#define UNW_FP UNW_X86_64_RBP
#define UNW_RA UNW_X86_64_RIP
#elif defined(__aarch64__)
#define ROW_BYTES 912             /* libunwind 1.6: 97 preserved registers */
#define UNW_FP UNW_AARCH64_X29
#define UNW_RA UNW_AARCH64_X30
#else
#error "prof/capture/frame_rules.c: x86-64 and aarch64 only (configure.ac's host check)"
#endif

static struct slot slot_store[(2u << LAST_BITS) - (1u << FIRST_BITS)];
#define TAB(g) { slot_store + (1u << (FIRST_BITS + (g))) - (1u << FIRST_BITS), \
		 (1u << (FIRST_BITS + (g))) - 1 }
static const struct frame_tab tabs[NGENS] = { TAB(0), TAB(1), TAB(2), TAB(3), TAB(4), TAB(5),
					       TAB(6) };
_Static_assert(NGENS == 7, "one TAB(g) a size");
const struct frame_tab *ha_frame_tab = &tabs[0];
static unsigned char rows[NROWS][ROW_BYTES] __attribute__((aligned(16)));
static unsigned rows_used, slots_used;
static int writer;                /* 1 while a thread adds a row */
static const unsigned char no_row[1];
int ha_frame_rows_off;            /* an object was unloaded since */

/* Whether the rows may still be used: no object unloaded since they began. */
int ha_frame_rows_valid(void)
{
	unsigned long long subs = ~0ull;
	if (__atomic_load_n(&ha_frame_rows_off, __ATOMIC_RELAXED))
		return 0;
	dl_iterate_phdr(read_subs, &subs);
	if (subs == __atomic_load_n(&rows_subs, __ATOMIC_RELAXED))
		return 1;
	__atomic_store_n(&ha_frame_rows_off, 1, __ATOMIC_RELAXED);
	return 0;
}

static inline const void *row_of(uintptr_t ip)
{
	const struct slot *s = ha_frame_slot_at(ip);
	if (!s)
		return NULL;
	return s->rule.row == NO_ROW ? (const void *)no_row : (const void *)rows[s->rule.row];
}

/* No room for another rule: the last size half full, or every row used. */
static int table_full(void)
{
	return (__atomic_load_n(&ha_frame_tab, __ATOMIC_RELAXED) == &tabs[NGENS - 1] &&
		__atomic_load_n(&slots_used, __ATOMIC_RELAXED) >= (1u << LAST_BITS) / 2) ||
	       __atomic_load_n(&rows_used, __ATOMIC_RELAXED) >= NROWS;
}

/* Made-up stack for rule_of: every word points into it, so a row that
 * dereferences registers (a CFA expression) reads only here.  Used under
 * the writer flag. */
#define SCRATCH_WORDS 4096
static uintptr_t scratch[SCRATCH_WORDS];
static int scratch_used;

/* A context at ip with SP sp and frame pointer bp (RSP and RBP, or SP and
 * x29) whose other registers point at the middle of scratch.  Its frame
 * pointer's slot is *home. */
static void made_up(unw_context_t *uc, uintptr_t ip, uintptr_t sp, uintptr_t bp, uintptr_t *home)
{
	memset(uc, 0, sizeof *uc);
#if defined(__x86_64__)
	for (int r = 0; r < NGREG; r++)
		uc->uc_mcontext.gregs[r] = (greg_t)(uintptr_t)&scratch[SCRATCH_WORDS / 2];
	uc->uc_mcontext.gregs[REG_RIP] = (greg_t)ip;
	uc->uc_mcontext.gregs[REG_RSP] = (greg_t)sp;
	uc->uc_mcontext.gregs[REG_RBP] = (greg_t)bp;
	*home = (uintptr_t)&uc->uc_mcontext.gregs[REG_RBP];
#else
	for (int r = 0; r < 31; r++)
		uc->uc_mcontext.regs[r] = (uintptr_t)&scratch[SCRATCH_WORDS / 2];
	uc->uc_mcontext.pc = ip;
	uc->uc_mcontext.sp = sp;
	uc->uc_mcontext.regs[29] = bp;
	*home = (uintptr_t)&uc->uc_mcontext.regs[29];
#endif
}

/* Whether ra, the return address's location in a frame whose CFA is cfa,
 * is in the frame: x86-64's call pushes it at CFA - 8; aarch64 saves x30
 * in its frame, at the bottom of it (GCC puts the frame record below the
 * locals), within 32 KiB of the CFA. */
static int ra_ok(const unw_save_loc_t *ra, uintptr_t cfa)
{
	if (ra->type != UNW_SLT_MEMORY)
		return 0;
#if defined(__x86_64__)
	return ra->u.addr == cfa - 8;
#else
	uintptr_t d = cfa - (uintptr_t)ra->u.addr;
	return d >= 8 && d <= 32768 && d % 8 == 0;
#endif
}

/* Apply row to made-up registers: RSP = s, RBP = b, the others inside
 * scratch.  0 and the CFA, RA and RBP locations, or -1. */
static int probe_row(const void *row, uintptr_t ip, uintptr_t s, uintptr_t b, uintptr_t *cfa,
		     unw_save_loc_t *ra, unw_save_loc_t *rbp, uintptr_t *rbp_home)
{
	unw_context_t uc;
	unw_cursor_t p;
	unw_word_t v;
	made_up(&uc, ip, s, b, rbp_home);
	if (unw_init_local(&p, &uc) < 0 || unw_apply_reg_state(&p, (void *)row) <= 0 ||
	    unw_get_reg(&p, UNW_REG_SP, &v) < 0 || unw_get_save_loc(&p, UNW_RA, ra) < 0 ||
	    unw_get_save_loc(&p, UNW_FP, rbp) < 0)
		return -1;
	*cfa = (uintptr_t)v;
	return 0;
}

static void scratch_fill(void)
{
	if (!scratch[0]) {
		for (int i = 0; i < SCRATCH_WORDS; i++)
			scratch[i] = (uintptr_t)&scratch[SCRATCH_WORDS / 2];
		__atomic_store_n(&scratch_used, 1, __ATOMIC_RELAXED);
	}
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
	struct rule r = { 0, 0, RULE_NONE, -1, NO_ROW };
	unw_word_t cfa;
	unw_save_loc_t l;
	if (a == 0 || (a > 0 && unw_get_save_loc(after, UNW_FP, &l) == 0 &&
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
	int64_t rbp_off = 0, ra_off = -8;
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
			 got == b + (uintptr_t)obp && obp >= 8 && obp <= INT16_MAX ? RULE_BP : RULE_NONE;
		if (kk == RULE_NONE || (k && kk != kind))
			return r;
		kind = kk;
		if (!ra_ok(&ra, got) || rbp.type != UNW_SLT_MEMORY ||
		    (k && (int64_t)(ra.u.addr - got) != ra_off))
			return r;
		ra_off = (int64_t)(ra.u.addr - got);
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
	r.cfa_off = (int16_t)(kind == RULE_SP ? osp : obp);
	r.rbp_off = (int16_t)(saved ? rbp_off : 0);   /* saved: <= -8 */
#if defined(__aarch64__)
	/* x30 beside x29 in the frame record, or within reach of ra_w */
	if (saved && ra_off == rbp_off + 8)
		r.ra_w = RA_IN_RECORD;
	else if (ra_off >= -8 * 127)
		r.ra_w = (int8_t)(ra_off / 8);
	else
		r.kind = RULE_NONE;
#endif
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
 * or the return address stored in the frame (ra_ok). */
static int row_fits(int a, unw_cursor_t *after)
{
	unw_save_loc_t ra;
	unw_word_t cfa;
	return a == 0 ||
	       (a > 0 && unw_get_save_loc(after, UNW_RA, &ra) == 0 &&
		unw_get_reg(after, UNW_REG_SP, &cfa) == 0 && ra_ok(&ra, (uintptr_t)cfa));
}

/* The row of ip from its FDE into tmp (c: a cursor at the frame; iterating
 * moves the cursor's own state, so a copy is used).  1 if found. */
static int fetch_row(const unw_cursor_t *c, uintptr_t ip, void *tmp)
{
	unw_cursor_t probe = *c;
	struct pick p = { ip - 1, tmp, 0 };
	return unw_reg_states_iterate(&probe, pick_row, &p) >= 0 && p.found;
}

/* Copy the table into the next size and publish that; under the writer
 * flag.  A slot that finds no room within PROBES is left out (learned
 * again when met). */
static void grow(void)
{
	const struct frame_tab *t = ha_frame_tab, *g = t + 1;
	if (t == &tabs[NGENS - 1])
		return;
	unsigned used = 0;
	for (unsigned i = 0; i <= t->mask; i++) {
		const struct slot *o = &t->slots[i];
		if (!o->ip)
			continue;
		unsigned s = ha_frame_slot_of(g, o->ip);
		for (int k = 0; k < PROBES; k++, s = (s + 1) & g->mask)
			if (!g->slots[s].ip) {
				g->slots[s] = *o;
				used++;
				break;
			}
	}
	__atomic_store_n(&slots_used, used, __ATOMIC_RELAXED);
	__atomic_store_n(&ha_frame_tab, g, __ATOMIC_RELEASE);
}

/* Keep ip's row (or no_row) and rule in the table when there is room; under
 * the writer flag.  Returns the row as kept, or row itself. */
static const void *keep(uintptr_t ip, const void *row, struct rule rule)
{
	const struct frame_tab *t = ha_frame_tab;
	if (slots_used >= (t->mask + 1) / 2) {
		grow();
		t = ha_frame_tab;
	}
	unsigned s = ha_frame_slot_of(t, ip);
	for (int i = 0; i < PROBES && slots_used < (t->mask + 1) / 2; i++, s = (s + 1) & t->mask) {
		struct slot *sl = &t->slots[s];
		if (sl->ip == ip)
			break;
		if (sl->ip)
			continue;
		rule.row = NO_ROW;
		if (row != no_row) {
			if (rows_used == NROWS)
				break;
			memcpy(rows[rows_used], row, ROW_BYTES);
			row = rows[rows_used];
			rule.row = (uint16_t)rows_used;
			__atomic_store_n(&rows_used, rows_used + 1, __ATOMIC_RELAXED);
		}
		sl->rule = rule;
		__atomic_store_n(&sl->ip, ip, __ATOMIC_RELEASE);
		__atomic_store_n(&slots_used, slots_used + 1, __ATOMIC_RELAXED);
		break;
	}
	return row;
}

uint64_t ha_frame_memory(void)
{
	const struct frame_tab *t = ha_frame_tab_now();
	uint64_t b = 0;
	if (t == &tabs[0] && !__atomic_load_n(&slots_used, __ATOMIC_RELAXED))
		return 0;             /* nothing learned: nothing touched */
	for (const struct frame_tab *g = tabs; g <= t; g++)
		b += (uint64_t)(g->mask + 1) * sizeof(struct slot);
	b += (uint64_t)__atomic_load_n(&rows_used, __ATOMIC_RELAXED) * ROW_BYTES;
	if (__atomic_load_n(&scratch_used, __ATOMIC_RELAXED))
		b += sizeof scratch;
	return b;
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
	    unw_get_reg(c, UNW_FP, &bp) == 0) {
		*a = unw_apply_reg_state(c, tmp);
		if (row_fits(*a, c))
			row = tmp;
	}
	if (__atomic_exchange_n(&writer, 1, __ATOMIC_ACQUIRE))
		return row;
	struct rule rule = { 0, 0, RULE_NONE, -1, NO_ROW };
	if (row != no_row)
		rule = rule_of(c, *a, (uintptr_t)sp, (uintptr_t)bp, ip, row);
	row = keep(ip, row, rule);
	__atomic_store_n(&writer, 0, __ATOMIC_RELEASE);
	return row;
}

HA_TESTABLE unsigned learned_at;  /* frames learned by learn_at (prof/unit.h) */

/* Learn the frame at ip (a return address) whose RSP and RBP are sp and bp,
 * as the rule walk found them, on a made-up context whose other registers
 * point into scratch.  Kept only when its rule needs no other register
 * (RULE_SP, RULE_BP, RULE_END).  1: ip has a slot now, the rule walk goes
 * on; 0: the caller walks the real registers through the rows instead,
 * which learn the frame there.  So a stack with a few new frames is
 * learned without replaying the rows of all the others. */
int ha_frame_learn_at(uintptr_t ip, uintptr_t sp, uintptr_t bp)
{
	if (table_full() || __atomic_exchange_n(&writer, 1, __ATOMIC_ACQUIRE))
		return 0;
	unw_context_t uc;
	unw_cursor_t c;
	unsigned char row[ROW_BYTES] __attribute__((aligned(16)));
	uintptr_t home;
	scratch_fill();
	made_up(&uc, ip, sp, bp, &home);
	if (!ha_frame_slot_at(ip) && unw_init_local(&c, &uc) >= 0 && fetch_row(&c, ip, row)) {
		int a = unw_apply_reg_state(&c, row);
		if (row_fits(a, &c)) {
			struct rule got = rule_of(&c, a, sp, bp, ip, row);
			if (got.kind != RULE_NONE && keep(ip, row, got) != row)
				learned_at++;
		}
	}
	__atomic_store_n(&writer, 0, __ATOMIC_RELEASE);
	return ha_frame_slot_at(ip) != NULL;
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

/* libunwind's fast trace for a stack the rows cannot walk; -1 while it may
 * not run (its validation pipe is not its own: unw_pipe.c). */
__attribute__((noinline)) int ha_frame_fast_trace(void **buf, int size, void *first)
{
	void *tmp[HA_STACK_RAW + 4];
	int probe[2];
	if (!ha_unw_trace_begin(probe))
		return -1;
	int n = unw_backtrace(tmp, size + 4);
	ha_unw_trace_end(probe);
	ha_trace_norm(tmp, n);
	return from_first(buf, size, tmp, n, first);
}

/* The fast trace, or when it may not run the n frames walked so far. */
static inline __attribute__((always_inline)) int fast_or_walked(void **buf, int size, void *first,
								void *const *tmp, int n)
{
	int m = ha_frame_fast_trace(buf, size, first);
	return m >= 0 ? m : from_first(buf, size, tmp, n, first);
}

/* The walk over the shared rows, from the frame of this function.  Ends
 * like unw_step: undefined return address or RBP, or a bad frame. */
__attribute__((noinline)) int ha_frame_shared_unwind(void **buf, int size, void *first)
{
	unw_context_t uc;
	unw_cursor_t c;
	unw_word_t ip;
	unsigned char row_tmp[ROW_BYTES] __attribute__((aligned(16)));
	void *tmp[HA_STACK_RAW + 4];
	int n = 0;
	if (size > HA_STACK_RAW)
		size = HA_STACK_RAW;
	if (!ha_frame_rows_valid())
		return fast_or_walked(buf, size, first, tmp, 0);
	unw_getcontext(&uc);
	if (unw_init_local(&c, &uc) < 0 || unw_get_reg(&c, UNW_REG_IP, &ip) < 0)
		return fast_or_walked(buf, size, first, tmp, 0);
	while (n < size + 4) {
		const void *row = row_of((uintptr_t)ip);
		int a = -2;
		if (!row) {
			if (table_full())
				return fast_or_walked(buf, size, first, tmp, n);
			row = learn_row(&c, (uintptr_t)ip, row_tmp, &a);
		}
		if (row == no_row)
			return fast_or_walked(buf, size, first, tmp, n);
		if (a == -2)
			a = unw_apply_reg_state(&c, (void *)row);
		if (a <= 0)
			break;
		unw_save_loc_t rbp;
		if (unw_get_save_loc(&c, UNW_FP, &rbp) < 0 || rbp.type == UNW_SLT_NONE)
			break;
		if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || ip < 0x4000)
			break;
		tmp[n++] = (void *)ip;
	}
	return from_first(buf, size, tmp, n, first);
}
