/* prof/capture/frame_rules.c — the learned frame cache of the stack capture: the
 * shared rows (each IP's DWARF register-state row, from libunwind) and the
 * frame rules boiled down from them, in one process-wide table keyed by IP;
 * the walk over the rows, which learns the rules of the frames it meets
 * and steps the few frames neither describes (a signal frame, the frame
 * it interrupted, code without unwind info) without them.  stack.c
 * decides when each is used (its opening comment); the rule walk itself
 * is inline in prof/capture/frame_rules.h.
 *
 * No walk here calls unw_step or unw_backtrace: libunwind 1.6 validates
 * their reads through its pipe (unw_pipe.c).  The calls made
 * (unw_init_local, unw_reg_states_iterate, unw_apply_reg_state, the
 * register getters) read memory as the rows say, unvalidated, like the
 * rule walk; a frame pointer followed where no row vouches for it, and
 * the instructions at a return address looked at for aarch64's signal
 * trampoline, are read through the kernel (read_checked).
 *
 * Never called with a profiler lock held (the row lookups may take the
 * dynamic loader's lock), and only inside stack.c's fork gate.  Never
 * allocates: the table, the rows and the scratch stack are static.  The
 * table is read without a lock; one writer at a time adds to it (a busy
 * writer flag means the row is used once and not kept), so no thread ever
 * waits on another.  Rows are never taken back; a rule learned from an
 * object since unloaded is set RULE_GONE and learned again when met
 * (ha_frame_check_unloads), so the frames of the objects still loaded
 * keep theirs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <errno.h>
#include <link.h>
#include <stddef.h>
#include <string.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "prof/prof.h"
#include "prof/capture/frame_rules.h"
#include "prof/unit.h"   /* learned_at, uncached, for the unit test build */

/* The table (ha_frame_tab): open addressing on the IP (a return address,
 * looked up at IP - 1 as unw_step does), at most PROBES apart, filled at
 * most half; each slot names its row (an index into rows, or NO_ROW: an IP
 * the rows cannot describe, cached too so that the DWARF lookup is not
 * repeated).  A slot's rule and row are written before its ip is published
 * (release), and change after only as one word (slot_set_rule: an
 * unload's RULE_GONE, then the rule learned again), so a reader that sees
 * its ip (acquire) sees a whole rule.  When half full it is copied into the
 * next size (twice as large, in slot_store after it) and that one is published; the
 * old one is never written again and stays for readers still walking it.
 * Sizes, rows and scratch are static and touched only once used, so a
 * program that meets few frames holds a few pages (ha_frame_memory).
 *
 * A rule is the row boiled down to what a call frame on x86-64 almost
 * always is: CFA = RSP or RBP + offset, the return address at CFA - 8, RBP
 * kept or saved at CFA + offset.  Every stack whose frames all have rules
 * is walked by rule_walk, a few loads a frame; any other goes through the
 * rows (which learn the rules of its frames). */
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

/* ip's row, no_row (then *kind says why: RULE_NOINFO, no unwind info;
 * RULE_SIGNAL), or NULL when never met or to be learned again. */
static inline const void *row_of(uintptr_t ip, int *kind)
{
	const struct slot *s = ha_frame_slot_at(ip);
	if (!s)
		return NULL;
	union { uint64_t w; struct rule r; } u = { __atomic_load_n(&s->word, __ATOMIC_ACQUIRE) };
	if (u.r.kind == RULE_GONE)
		return NULL;
	*kind = u.r.kind;
	return u.r.row == NO_ROW ? (const void *)no_row : (const void *)rows[u.r.row];
}

/* A slot's rule replaced in place (a slot set RULE_GONE, or learned again):
 * one word, after the row it names (release, row_of's acquire). */
static void slot_set_rule(struct slot *s, struct rule r)
{
	union { struct rule r; uint64_t w; } u = { r };
	__atomic_store_n(&s->word, u.w, __ATOMIC_RELEASE);
}

/* Whether a slot is there for ip and holds a rule (not RULE_GONE). */
static int learned(uintptr_t ip)
{
	const struct slot *s = ha_frame_slot_at(ip);
	return s && slot_rule(s).kind != RULE_GONE;
}

/* ---- unloads -------------------------------------------------------------
 * A rule is learned from the code at its IP; once an object is unloaded,
 * other code may come to its addresses.  The executable segments of the
 * loaded objects are noted (segs, sorted) each time dl_iterate_phdr's adds
 * or subs count moved; after an unload a slot keeps its rule only when its
 * IP lies in a segment noted both last time and now (same range, same file
 * name), every other one is set RULE_GONE and learned again when met.  So
 * the frames of the objects still loaded, and of a library loaded again at
 * its old place, stay learned.  Under the writer flag. */
#define MAX_SEGS 1024
struct seg { uintptr_t lo, hi; uint64_t name; };
static struct seg segs[2][MAX_SEGS], kept[MAX_SEGS];
static int nsegs[2], cur_segs;    /* segs[cur_segs]: the last note */
static unsigned long long seen_adds, seen_subs;
unsigned ha_frame_gen;

struct note { struct seg *out; int n; };   /* n > MAX_SEGS: too many */

static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;       /* FNV-1a */
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static int note_seg(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct note *nt = arg;
	uint64_t h = name_hash(info->dlpi_name);
	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		if (nt->n >= MAX_SEGS) {
			nt->n = MAX_SEGS + 1;
			return 1;
		}
		uintptr_t lo = (uintptr_t)info->dlpi_addr + (uintptr_t)ph->p_vaddr;
		nt->out[nt->n++] = (struct seg){ lo, lo + (uintptr_t)ph->p_memsz, h };
	}
	return 0;
}

static void note_segs(int into)
{
	struct note nt = { segs[into], 0 };
	dl_iterate_phdr(note_seg, &nt);
	struct seg *a = segs[into];
	for (int i = 1; i < nt.n && nt.n <= MAX_SEGS; i++) {   /* few, nearly sorted */
		struct seg x = a[i];
		int j = i;
		for (; j > 0 && a[j - 1].lo > x.lo; j--)
			a[j] = a[j - 1];
		a[j] = x;
	}
	nsegs[into] = nt.n;
}

static int read_counts(struct dl_phdr_info *info, size_t size, void *arg)
{
	unsigned long long *c = arg;
	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
		c[0] = info->dlpi_adds;
		c[1] = info->dlpi_subs;
	}
	return 1;
}

void ha_frame_rules_init(void)
{
	unsigned long long c[2] = { 0, 0 };
	dl_iterate_phdr(read_counts, c);
	note_segs(0);
	cur_segs = 0;
	seen_adds = c[0];
	seen_subs = c[1];
}

/* Whether pc lies in one of the n sorted segments k. */
static int in_segs(const struct seg *k, int n, uintptr_t pc)
{
	int lo = 0, hi = n;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (k[mid].hi <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && k[lo].lo <= pc;
}

/* Set RULE_GONE every slot whose IP is not in a segment both notes hold
 * (a too long note holds none). */
static void forget_unloaded(const struct seg *was, int nwas, const struct seg *now, int nnow)
{
	int nk = 0;
	for (int i = 0, j = 0; i < nnow && nnow <= MAX_SEGS && nwas <= MAX_SEGS; i++) {
		while (j < nwas && was[j].lo < now[i].lo)
			j++;
		for (int k = j; k < nwas && was[k].lo == now[i].lo; k++)
			if (was[k].hi == now[i].hi && was[k].name == now[i].name) {
				kept[nk++] = now[i];
				break;
			}
	}
	const struct frame_tab *t = ha_frame_tab;
	for (unsigned i = 0; i <= t->mask; i++) {
		struct slot *sl = &t->slots[i];
		uintptr_t ip = sl->ip;
		struct rule r = slot_rule(sl);
		if (!ip || r.kind == RULE_GONE)
			continue;
		/* a return address is looked up at ip - 1 */
		uintptr_t pc = ip & HA_EXACT_IP ? ip & ~HA_EXACT_IP : ip - 1;
		if (!in_segs(kept, nk, pc)) {
			r.kind = RULE_GONE;
			slot_set_rule(sl, r);
		}
	}
	__atomic_fetch_add(&ha_frame_gen, 1, __ATOMIC_RELEASE);
}

void ha_frame_check_unloads(void)
{
	unsigned long long c[2] = { 0, 0 };
	dl_iterate_phdr(read_counts, c);
	if ((c[0] == __atomic_load_n(&seen_adds, __ATOMIC_RELAXED) &&
	     c[1] == __atomic_load_n(&seen_subs, __ATOMIC_RELAXED)) ||
	    __atomic_exchange_n(&writer, 1, __ATOMIC_ACQUIRE))
		return;                   /* no change, or busy: the next check */
	int nw = cur_segs ^ 1;
	note_segs(nw);
	if (c[1] != seen_subs)
		forget_unloaded(segs[cur_segs], nsegs[cur_segs], segs[nw], nsegs[nw]);
	cur_segs = nw;
	__atomic_store_n(&seen_adds, c[0], __ATOMIC_RELAXED);
	__atomic_store_n(&seen_subs, c[1], __ATOMIC_RELAXED);
	__atomic_store_n(&writer, 0, __ATOMIC_RELEASE);
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
 * locals), within the 64 MiB the rule walk allows a frame (a frame of
 * 100 KB keeps its row; rule_of keeps a rule only within 32 KiB). */
static int ra_ok(const unw_save_loc_t *ra, uintptr_t cfa)
{
	if (ra->type != UNW_SLT_MEMORY)
		return 0;
#if defined(__x86_64__)
	return ra->u.addr == cfa - 8;
#else
	uintptr_t d = cfa - (uintptr_t)ra->u.addr;
	return d >= 8 && d < ((uintptr_t)1 << 26) && d % 8 == 0;
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
		__atomic_store_n(&scratch_used, 1, __ATOMIC_RELEASE);
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

struct pick { uintptr_t pc, hi; void *row; int found; };

static int pick_row(void *token, void *rs, size_t size, unw_word_t lo, unw_word_t hi)
{
	struct pick *p = token;
	if (p->pc < lo || p->pc >= hi)
		return 0;
	if (size <= ROW_BYTES) {
		memcpy(p->row, rs, size);
		p->hi = (uintptr_t)hi;
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

/* The row at pc from its FDE into tmp (c: a cursor at the frame; iterating
 * moves the cursor's own state, so a copy is used).  1 if found; *sig:
 * the FDE is a signal frame's ('S', x86-64: libunwind reads no code for
 * it). */
static int fetch_row_at(const unw_cursor_t *c, uintptr_t pc, void *tmp, int *sig)
{
	unw_cursor_t probe = *c;
	struct pick p = { pc, 0, tmp, 0 };
	int ok = unw_reg_states_iterate(&probe, pick_row, &p) >= 0 && p.found;
#if defined(__x86_64__)
	*sig = ok && unw_is_signal_frame(&probe) > 0;
#else
	*sig = 0;
#endif
	return ok;
}

/* The row of a return address ip (looked up at ip - 1). */
static int fetch_row(const unw_cursor_t *c, uintptr_t ip, void *tmp, int *sig)
{
	return fetch_row_at(c, ip - 1, tmp, sig);
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
		/* a slot set RULE_GONE is learned again in place */
		int again = sl->ip == ip && slot_rule(sl).kind == RULE_GONE;
		if (sl->ip == ip && !again)
			break;
		if (sl->ip && !again)
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
		slot_set_rule(sl, rule);
		if (again)
			break;
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

/* ---- checked reads -------------------------------------------------------
 * The only reads of a walk that no unwind info vouches for (a frame
 * pointer followed, the instructions at a return address) go through the
 * kernel, which fails where nothing readable is mapped instead of
 * faulting: process_vm_readv on this process (its pid cached, reset in a
 * fork's child), or where that is missing (qemu-user: ENOSYS) a futex
 * wait that returns at once, whose EFAULT says the word is unreadable.
 * No descriptor, unlike libunwind's validation pipe. */
static pid_t self_pid;
HA_TESTABLE int no_vm_readv;      /* prof/unit.h */

void ha_frame_after_fork(void)
{
	__atomic_store_n(&self_pid, 0, __ATOMIC_RELAXED);
}

static int word_readable(uintptr_t at)
{
	struct timespec now = { 0, 0 };
	long r = syscall(SYS_futex, (void *)(at & ~(uintptr_t)3), FUTEX_WAIT_PRIVATE, 0u, &now,
			 NULL, 0);
	return r == 0 || errno == EAGAIN || errno == ETIMEDOUT || errno == EINTR;
}

HA_TESTABLE int read_checked(uintptr_t at, void *out, size_t len)
{
	int e = errno, ok = 0;
	if (!__atomic_load_n(&no_vm_readv, __ATOMIC_RELAXED)) {
		pid_t pid = __atomic_load_n(&self_pid, __ATOMIC_RELAXED);
		if (!pid)
			__atomic_store_n(&self_pid, pid = getpid(), __ATOMIC_RELAXED);
		struct iovec here = { out, len }, there = { (void *)at, len };
		ssize_t got = process_vm_readv(pid, &here, 1, &there, 1, 0);
		ok = got == (ssize_t)len;
		if (got < 0 && errno == ENOSYS)
			__atomic_store_n(&no_vm_readv, 1, __ATOMIC_RELAXED);
		else
			goto out;
	}
	/* len <= a page: its first and last words' pages are all it spans */
	if (len && len <= 4096 && word_readable(at) && word_readable(at + len - 1)) {
		memcpy(out, (const void *)at, len);
		ok = 1;
	}
out:
	errno = e;
	return ok;
}

#if defined(__aarch64__)
/* Linux aarch64's signal return, the vDSO's __kernel_rt_sigreturn (and
 * qemu-user's trampoline page): mov x8, #139 (rt_sigreturn); svc #0.  The
 * handler returns to it with SP at the kernel's struct rt_sigframe. */
#define SIGRETURN_MOV 0xd2801168u
#define SIGRETURN_SVC 0xd4000001u
struct ha_rt_sigframe { siginfo_t info; ucontext_t uc; };

/* Whether ip (a return address, never met) is that trampoline. */
static int is_sigreturn(uintptr_t ip)
{
	uint32_t insn[2];
	return ip % 4 == 0 && read_checked(ip, insn, sizeof insn) && insn[0] == SIGRETURN_MOV &&
	       insn[1] == SIGRETURN_SVC;
}
#endif

/* The interrupted registers (PC, SP, frame pointer) in the record of a
 * signal frame whose SP is sp; read as the rule walk reads, unchecked:
 * sp is the CFA of the handler's frame. */
static void signal_regs(uintptr_t sp, uintptr_t *ip, uintptr_t *isp, uintptr_t *bp)
{
#if defined(__x86_64__)
	/* the handler returned into the trampoline with RSP at the kernel's
	 * ucontext (glibc's __restore_rt: CFA = [RSP + 160]) */
	const greg_t *g = ((const ucontext_t *)sp)->uc_mcontext.gregs;
	*ip = (uintptr_t)g[REG_RIP];
	*isp = (uintptr_t)g[REG_RSP];
	*bp = (uintptr_t)g[REG_RBP];
#else
	const mcontext_t *m = &((const struct ha_rt_sigframe *)sp)->uc.uc_mcontext;
	*ip = (uintptr_t)m->pc;
	*isp = (uintptr_t)m->sp;
	*bp = (uintptr_t)m->regs[29];
#endif
}

/* The row for the frame at *c (its IP is ip), from its FDE, kept in the
 * table when there is room and no other writer; tmp holds it otherwise.
 * *c moves to the caller's frame when the row fits (*a: the result of
 * that; -2 when not, *c as it was).
 * Only a call's frame gets a row: its caller's IP is stored at CFA - 8 and
 * is looked up at IP - 1.  A signal frame (the kernel's trampoline) keeps
 * the IP elsewhere, and the frame it interrupted must be looked up at its
 * exact IP, so a signal frame gets no_row and is stepped without the table
 * every time; so is a frame without unwind info.  Either's slot says
 * which (*kind: RULE_SIGNAL, RULE_NOINFO), for ha_frame_step_other. */
static const void *learn_row(unw_cursor_t *c, uintptr_t ip, void *tmp, int *a, int *kind)
{
	const void *row = no_row;
	unw_word_t sp = 0, bp = 0;
	int sig = 0, found = 0;
#if defined(__aarch64__)
	sig = is_sigreturn(ip);   /* the vDSO's FDE for it describes no signal frame */
#endif
	if (!sig)
		found = fetch_row(c, ip, tmp, &sig);
	*a = -2;
	*kind = sig ? RULE_SIGNAL : !found ? RULE_NOINFO : RULE_NONE;
	if (found && unw_get_reg(c, UNW_REG_SP, &sp) == 0 && unw_get_reg(c, UNW_FP, &bp) == 0) {
		unw_cursor_t after = *c;
		int r = unw_apply_reg_state(&after, tmp);
		if (row_fits(r, &after)) {
			row = tmp;
			*a = r;
			*c = after;
		}
	}
	if (__atomic_exchange_n(&writer, 1, __ATOMIC_ACQUIRE))
		return row;
	struct rule rule = { 0, 0, (uint8_t)*kind, -1, NO_ROW };
	if (row != no_row)
		rule = rule_of(c, *a, (uintptr_t)sp, (uintptr_t)bp, ip, row);
	row = keep(ip, row, rule);
	__atomic_store_n(&writer, 0, __ATOMIC_RELEASE);
	return row;
}

HA_TESTABLE unsigned learned_at;  /* frames learned by learn_at (prof/unit.h) */

/* Learn the frame at ip whose RSP and RBP are sp and bp, as the rule walk
 * found them, on a made-up context whose other registers point into
 * scratch (exact: a frame a signal interrupted, looked up at ip itself and
 * kept under ip | HA_EXACT_IP).  Kept only when its rule needs no other
 * register (RULE_SP, RULE_BP, RULE_END), or as RULE_NOINFO, RULE_SIGNAL;
 * an exact one without such a rule (a leaf, x30 not saved) as RULE_NONE,
 * which the signal step leaves to the rows without a second lookup.
 * 1: the slot is there now, the rule walk goes on; 0: the caller walks the
 * real registers through the rows instead, which learn the frame there.
 * So a stack with a few new frames is learned without replaying the rows
 * of all the others. */
static int learn_made_up(uintptr_t ip, uintptr_t sp, uintptr_t bp, int exact)
{
	uintptr_t key = exact ? ip | HA_EXACT_IP : ip;
	ha_unw_start();
	if (table_full() || __atomic_exchange_n(&writer, 1, __ATOMIC_ACQUIRE))
		return 0;
	unw_context_t uc;
	unw_cursor_t c;
	unsigned char row[ROW_BYTES] __attribute__((aligned(16)));
	uintptr_t home;
	int sig;
	scratch_fill();
	made_up(&uc, ip, sp, bp, &home);
	if (!learned(key) && unw_init_local2(&c, &uc, exact ? UNW_INIT_SIGNAL_FRAME : 0) >= 0) {
		struct rule none = { 0, 0, RULE_NOINFO, -1, NO_ROW };
#if defined(__aarch64__)
		if (!exact && is_sigreturn(ip)) {
			none.kind = RULE_SIGNAL;
			keep(key, no_row, none);
		} else
#endif
		if (!fetch_row_at(&c, exact ? ip : ip - 1, row, &sig)) {
			keep(key, no_row, none);
		} else if (sig && !exact) {
			none.kind = RULE_SIGNAL;
			keep(key, no_row, none);
		} else {
			int a = unw_apply_reg_state(&c, row);
			struct rule got = { 0, 0, RULE_NONE, -1, NO_ROW };
			if (row_fits(a, &c))
				got = rule_of(&c, a, sp, bp, ip, row);
			if (got.kind != RULE_NONE && keep(key, exact ? no_row : row, got) != row)
				learned_at++;
			else if (exact)       /* a leaf, say: the rows step it, no second look */
				keep(key, no_row, got);
		}
	}
	__atomic_store_n(&writer, 0, __ATOMIC_RELEASE);
	return learned(key);
}

int ha_frame_learn_at(uintptr_t ip, uintptr_t sp, uintptr_t bp)
{
	return learn_made_up(ip, sp, bp, 0);
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

/* scratch filled for made_up's registers: once, under the writer flag; 0
 * while another thread holds the flag that first time. */
static int scratch_ready(void)
{
	if (__atomic_load_n(&scratch_used, __ATOMIC_ACQUIRE))
		return 1;
	if (__atomic_exchange_n(&writer, 1, __ATOMIC_ACQUIRE))
		return 0;
	scratch_fill();
	__atomic_store_n(&writer, 0, __ATOMIC_RELEASE);
	return 1;
}

/* The caller of a frame without unwind info whose RSP and RBP are sp and
 * bp, as compilers keep a frame pointer: the caller's RBP at bp, the
 * return address in the word above, the caller's RSP above both.  bp lies
 * at or above sp, within 64 MiB (as the rule walk's CFA) and aligned, and
 * its words are read through the kernel unless on the 4 KiB page already
 * read so in this walk (*ok_page).  x86-64 only: aarch64's frame record
 * sits at the bottom of its frame, so the caller's SP is not known there,
 * and a caller whose CFA follows SP would be read at a guess: the walk
 * ends at such a frame instead. */
static int fp_caller(uintptr_t sp, uintptr_t bp, uintptr_t *ok_page, uintptr_t w[2])
{
	uintptr_t page = bp & ~(uintptr_t)4095;
#if !defined(__x86_64__)
	return 0;
#endif
	if (bp < sp || bp - sp >= ((uintptr_t)1 << 26) || bp % sizeof(void *))
		return 0;
	if (page == *ok_page && ((bp + 2 * sizeof(void *) - 1) & ~(uintptr_t)4095) == page) {
		w[0] = ((const uintptr_t *)bp)[0];
		w[1] = ((const uintptr_t *)bp)[1];
	} else if (read_checked(bp, w, 2 * sizeof *w)) {
		*ok_page = page;
	} else {
		return 0;
	}
	return w[1] >= 0x4000;
}

/* A frame without unwind info, stepped by its frame pointer: the cursor
 * starts again at the caller, on a made-up context (other registers
 * pointing into scratch).  1: *ip is the caller's; 0: the end. */
static int step_by_fp(unw_cursor_t *c, unw_context_t *uc, uintptr_t *ip, uintptr_t *ok_page)
{
	unw_word_t sp, bp;
	uintptr_t w[2], home;
	if (unw_get_reg(c, UNW_REG_SP, &sp) < 0 || unw_get_reg(c, UNW_FP, &bp) < 0 ||
	    !fp_caller(sp, bp, ok_page, w) || !scratch_ready())
		return 0;
	made_up(uc, w[1], bp + 2 * sizeof(void *), w[0], &home);
	if (unw_init_local(c, uc) < 0)
		return 0;
	*ip = w[1];
	return 1;
}

#ifdef HA_TESTING
HA_TESTABLE unsigned signal_steps;   /* signal frames stepped here (prof/unit.h) */
#endif

int ha_frame_step_other(void **buf, int size, struct walk *w, uintptr_t *ok_page)
{
	const struct slot *s = ha_frame_slot_at(w->ip);
	uintptr_t word[2];
	if (!s || w->n >= size)
		return 0;
	struct rule k = slot_rule(s);
	if (k.kind == RULE_GONE)          /* learned again; the walk goes on from it */
		return learn_made_up(w->ip, w->sp, w->bp, 0);
	if (k.kind == RULE_NOINFO) {
		if (!fp_caller(w->sp, w->bp, ok_page, word))
			return 0;
		buf[w->n++] = (void *)w->ip;
		w->sp = w->bp + 2 * sizeof(void *);
		w->ip = word[1];
		w->bp = word[0];
		return 1;
	}
	if (k.kind == RULE_SIGNAL) {
		/* the interrupted frame, by its rule at the exact IP */
		uintptr_t ip, sp, bp;
		signal_regs(w->sp, &ip, &sp, &bp);
		uintptr_t key = ip | HA_EXACT_IP;
		if (ip < 0x4000 || w->n + 2 > size || (!learned(key) && !learn_made_up(ip, sp, bp, 1)))
			return 0;
		const struct slot *x = ha_frame_slot_at(key);
		if (!x)
			return 0;
		struct rule r = slot_rule(x);
		uintptr_t cfa = (r.kind == RULE_BP ? bp : sp) + (uintptr_t)(intptr_t)r.cfa_off;
		if ((r.kind != RULE_SP && r.kind != RULE_BP) || cfa - sp - 1 >= ((uintptr_t)1 << 26))
			return 0;
#ifdef HA_TESTING
		signal_steps++;
#endif
		buf[w->n++] = (void *)w->ip;      /* the trampoline */
		buf[w->n++] = (void *)ip;         /* the frame it interrupted */
		w->bp = r.rbp_off ? *(const uintptr_t *)(cfa + (uintptr_t)(intptr_t)r.rbp_off) : bp;
		w->ip = *(const uintptr_t *)RULE_RA_AT(cfa, r);
		w->sp = cfa;
		return w->ip >= 0x4000 ? 1 : 2;
	}
	return 0;
}

/* After a row was applied to *c: the caller's IP into *ip, or 0 at the
 * end (as unw_step: no return address, RBP undefined, IP in the first
 * pages). */
static int caller_ip(unw_cursor_t *c, int a, uintptr_t *ip)
{
	unw_save_loc_t fp;
	unw_word_t w;
	if (a <= 0 || unw_get_save_loc(c, UNW_FP, &fp) < 0 || fp.type == UNW_SLT_NONE ||
	    unw_get_reg(c, UNW_REG_IP, &w) < 0 || w < 0x4000)
		return 0;
	*ip = (uintptr_t)w;
	return 1;
}

/* The frame at *c (IP *ip) stepped without the table, nothing kept.  Its
 * row is fetched on the cursor itself, so that libunwind's cursor knows
 * whether the next frame is looked up at its exact IP (*exact: after a
 * signal frame, whose row gives the interrupted frame's registers from the
 * kernel's record) or at IP - 1.  No unwind info (noinfo: known already):
 * its frame pointer.  1: *c at the caller; 0: the end. */
#ifdef HA_TESTING
HA_TESTABLE unsigned uncached;    /* frames stepped here (prof/unit.h) */
#endif

#if defined(__aarch64__)
/* The signal frame at *c (the trampoline; SP at the kernel's rt_sigframe):
 * the cursor starts again at the interrupted frame, on its registers as
 * the kernel saved them, looked up at its exact PC. */
static int step_signal(unw_cursor_t *c, unw_context_t *uc, uintptr_t *ip, int *exact)
{
	unw_word_t sp;
	if (unw_get_reg(c, UNW_REG_SP, &sp) < 0)
		return 0;
	const mcontext_t *m = &((const struct ha_rt_sigframe *)sp)->uc.uc_mcontext;
	memset(uc, 0, sizeof *uc);
	for (int r = 0; r < 31; r++)
		uc->uc_mcontext.regs[r] = m->regs[r];
	uc->uc_mcontext.sp = m->sp;
	uc->uc_mcontext.pc = m->pc;
	if (m->pc < 0x4000 || unw_init_local2(c, uc, UNW_INIT_SIGNAL_FRAME) < 0)
		return 0;
	*ip = (uintptr_t)m->pc;
	*exact = 1;
	return 1;
}
#endif

static int step_uncached(unw_cursor_t *c, unw_context_t *uc, uintptr_t *ip, int *exact, void *tmp,
			 int kind, int known, uintptr_t *ok_page)
{
#ifdef HA_TESTING
	uncached++;
#endif
#if defined(__aarch64__)
	if (!*exact && (kind == RULE_SIGNAL || (!known && is_sigreturn(*ip))))
		return step_signal(c, uc, ip, exact);
#endif
	if (kind != RULE_NOINFO) {
		struct pick p = { *ip - (*exact ? 0 : 1), 0, tmp, 0 };
		if (unw_reg_states_iterate(c, pick_row, &p) >= 0 && p.found) {
			/* aarch64 reads the instruction at IP: within the row's
			 * range, or the page IP is on */
			int sig = !*exact && ((*ip & 4095) <= 4096 - 16 || p.hi >= *ip + 16) &&
				  unw_is_signal_frame(c) > 0;
			int a = unw_apply_reg_state(c, tmp);
			if ((!sig && !row_fits(a, c)) || !caller_ip(c, a, ip))
				return 0;
			*exact = sig;
			return 1;
		}
	}
	*exact = 0;
	return step_by_fp(c, uc, ip, ok_page);
}

/* The walk over the shared rows, from the frame of this function; frames
 * the table does not describe (signal frames, the frame after one, no
 * unwind info, or every frame once an object was unloaded or the table is
 * full) are stepped without it.  Ends like unw_step: undefined return
 * address or RBP, or a bad frame. */
__attribute__((noinline)) int ha_frame_shared_unwind(void **buf, int size, void *first)
{
	unw_context_t uc;
	unw_cursor_t c;
	unw_word_t w;
	unsigned char row_tmp[ROW_BYTES] __attribute__((aligned(16)));
	void *tmp[HA_STACK_RAW + 4];
	int n = 0, exact = 0;
	uintptr_t ok_page = 0;
	if (size > HA_STACK_RAW)
		size = HA_STACK_RAW;
	ha_unw_start();
	unw_getcontext(&uc);
	if (unw_init_local(&c, &uc) < 0 || unw_get_reg(&c, UNW_REG_IP, &w) < 0)
		return 0;
	uintptr_t ip = (uintptr_t)w;
	while (n < size + 4) {
		const void *row = NULL;
		int a = -2, kind = RULE_NONE;
		if (!exact) {
			row = row_of(ip, &kind);
			if (!row && !table_full())
				row = learn_row(&c, ip, row_tmp, &a, &kind);
		}
		if (!row || row == no_row) {
			if (!step_uncached(&c, &uc, &ip, &exact, row_tmp, kind, row != NULL, &ok_page))
				break;
		} else {
			if (a == -2)
				a = unw_apply_reg_state(&c, (void *)row);
			if (!caller_ip(&c, a, &ip))
				break;
		}
		tmp[n++] = (void *)ip;
	}
	return from_first(buf, size, tmp, n, first);
}
