/* prof/capture/frame_rules.h — the learned frame rules, shared by the two files of
 * the stack capture (stack.c and frame_rules.c) and their unit test.
 *
 * The table and the rule walk are here so that the walk stays inlined in
 * the sampling hook's unwinder (stack.c, stack_unwind): a known stack is
 * walked with a few loads a frame and no call.  The walk takes no lock and
 * calls no libunwind (so it needs no fork gate); everything that learns a
 * rule is in frame_rules.c.
 */
#ifndef HA_PROF_FRAME_RULES_H
#define HA_PROF_FRAME_RULES_H

#include <stdint.h>

#include "prof/prof.h"

/* The table grows by doubling, from 2^FIRST_BITS slots (8 KiB) to
 * 2^LAST_BITS (512 KiB), so that a program meeting a few hundred frames
 * keeps its rules in a few pages rather than one page a frame. */
#define FIRST_BITS 9
#define LAST_BITS 15
#define NGENS (LAST_BITS - FIRST_BITS + 1)
#define PROBES 16
#define NO_ROW 0xffffu

/* RULE_NOINFO: no unwind info at all (stepped by its frame pointer on
 * x86-64); RULE_SIGNAL: the kernel's signal trampoline (the interrupted
 * registers in the ucontext at SP); RULE_GONE: learned from an object
 * since unloaded, to be learned again (ha_frame_check_unloads).  The rule
 * walk stops at these, as at RULE_NONE, and ha_frame_step_other steps
 * them. */
enum { RULE_NONE, RULE_SP, RULE_BP, RULE_END, RULE_NOINFO, RULE_SIGNAL, RULE_GONE };
/* The slot of a frame interrupted by a signal is keyed by its exact IP
 * with this bit set (a return address's is looked up at IP - 1). */
#define HA_EXACT_IP ((uintptr_t)1 << 63)
/* One IP's rule: CFA = (SP or the frame pointer, by kind) + cfa_off, the
 * return address at CFA + 8 * ra_w, the frame pointer saved at CFA +
 * rbp_off (rbp_off <= -8) or kept (0); row: the index of its DWARF row in
 * frame_rules.c, NO_ROW for none.  The frame pointer is RBP on x86-64 and
 * x29 on aarch64 (named rbp, bp here for both).  ra_w is always -1 on
 * x86-64, where the walk reads CFA - 8 without it; on aarch64
 * RA_IN_RECORD says x30 is in the frame record, the word after x29 (GCC
 * puts the record at the frame's bottom, below the locals, so it may be
 * kilobytes below the CFA). */
struct rule { int16_t cfa_off, rbp_off; uint8_t kind; int8_t ra_w; uint16_t row; };
#define RA_IN_RECORD 0

/* Where a frame's return address is (x86-64: CFA - 8, a constant). */
#if defined(__aarch64__)
#define RULE_RA_AT(cfa, r)                                                                  \
	((r).ra_w != RA_IN_RECORD ? (cfa) + (uintptr_t)(intptr_t)(r).ra_w * 8                 \
				  : (cfa) + (uintptr_t)(intptr_t)(r).rbp_off + 8)
#else
#define RULE_RA_AT(cfa, r) ((cfa) - 8)
#endif
/* The caller's SP at its call of the function whose frame pointer is fp:
 * on x86-64 RBP's push and the call are the two words above fp; aarch64's
 * frame record may sit anywhere in the frame, so it is the compiler's CFA
 * (cfa: __builtin_dwarf_cfa() in that function). */
#if defined(__aarch64__)
#define HA_CALLER_SP(fp, cfa) ((uintptr_t)(cfa))
#else
#define HA_CALLER_SP(fp, cfa) ((uintptr_t)((fp) + 2))
#endif
/* 16 bytes: 4 a cache line.  The rule is one word, so that a slot whose
 * object was unloaded is rewritten in place (slot_rule, slot_set_rule):
 * a reader sees the old rule or the new one, never half of each. */
struct slot { uintptr_t ip; union { struct rule rule; uint64_t word; }; };
_Static_assert(sizeof(struct rule) == sizeof(uint64_t), "a rule is one word");

static inline struct rule slot_rule(const struct slot *s)
{
	union { uint64_t w; struct rule r; } u = { __atomic_load_n(&s->word, __ATOMIC_RELAXED) };
	return u.r;
}
/* One size of the table: its slots, and the mask that takes a slot's index
 * from the top LAST_BITS bits of an IP's hash (a fixed shift: one
 * instruction less a frame than a shift by the size). */
struct frame_tab { struct slot *slots; uintptr_t mask; };
/* The table in use (frame_rules.c says how it is filled and grown): slot i
 * holds one IP's rule, published by its ip (release), changed after only
 * when its object is unloaded (RULE_GONE, then learned again: one word).
 * A table replaced by a larger one stays as it was for readers that still
 * hold it. */
extern HA_HIDDEN const struct frame_tab *ha_frame_tab;

static inline const struct frame_tab *ha_frame_tab_now(void)
{
	return __atomic_load_n(&ha_frame_tab, __ATOMIC_ACQUIRE);
}

static inline unsigned ha_frame_slot_of(const struct frame_tab *t, uintptr_t ip)
{
	return (unsigned)(((ip * 0x9e3779b97f4a7c15ull) >> (64 - LAST_BITS)) & t->mask);
}

static inline const struct slot *ha_frame_slot_in(const struct frame_tab *t, uintptr_t ip)
{
	unsigned s = ha_frame_slot_of(t, ip);
	for (int i = 0; i < PROBES; i++, s = (s + 1) & t->mask) {
		uintptr_t k = __atomic_load_n(&t->slots[s].ip, __ATOMIC_ACQUIRE);
		if (k == ip)
			return &t->slots[s];
		if (!k)
			break;
	}
	return NULL;
}

static inline const struct slot *ha_frame_slot_at(uintptr_t ip)
{
	return ha_frame_slot_in(ha_frame_tab_now(), ip);
}

/* Where a rule walk stands: the next frame's IP, RSP and RBP, and how many
 * frames are in buf. */
struct walk { uintptr_t ip, sp, bp; int n; };
enum { WALK_DONE, WALK_UNKNOWN, WALK_NO_RULE };

/* The words a walk read that its frames depend on, in order: the word at
 * rd[i].at held rd[i].val, a return address kept as a frame when
 * rd[i].step is one frame (8), else a saved RBP that a later frame's CFA
 * follows, or the end.  (A saved RBP no CFA follows before the next one is
 * read is left out: optimised code keeps anything in RBP, so its value
 * changes from one call to the next without changing the stack.)  A walk
 * is a function of its start (IP, RSP, and RBP when a frame's CFA follows
 * RBP before any saved RBP is read: need_bp) and of these words, as rules
 * change only at an unload (stack.c's memo_gen): a later walk from the
 * same start that finds the same words, each read only after the ones
 * before it matched (so at an address the walk itself reads from the same
 * frames), gives the same frames (stack.c replays it).  nreads >
 * WALK_MEMO_READS: too many to keep. */
#define WALK_MEMO_READS 16
struct walk_read { uintptr_t at, val; uint32_t step; };
struct walk_memo {
	uintptr_t ip0, sp0, bp0;
	int size, n, nreads, need_bp;
	struct walk_read rd[WALK_MEMO_READS];
};

static inline __attribute__((always_inline)) void memo_read(struct walk_memo *m, uintptr_t at,
							    uintptr_t v, int ip)
{
	int i = m->nreads++;
	if (i < WALK_MEMO_READS) {
		m->rd[i].at = at;
		m->rd[i].val = v;
		m->rd[i].step = ip ? (uint32_t)sizeof(void *) : 0;
	}
}

/* The walk by rules, from w on: WALK_DONE (w->n frames), or WALK_UNKNOWN
 * at a frame never met (w stands at it: learn it and walk on), or
 * WALK_NO_RULE when a frame has no rule or its CFA is out of reach (w
 * stands at it too: ha_frame_step_other, else the rows).  rec
 * (a constant NULL but in stack.c): note the words read, for a walk from
 * w's start (w->n == 0). */
static inline __attribute__((always_inline)) int rule_walk(void **buf, int size, struct walk *w,
							   struct walk_memo *rec)
{
	const struct frame_tab *t = ha_frame_tab_now();
	const struct slot *slots = t->slots;
	uintptr_t mask = t->mask;
	uintptr_t ip = w->ip, sp = w->sp, bp = w->bp;
	int n = w->n, st = WALK_DONE;
	/* RBP: 0 the start's, 1 read from pend_at and not noted yet, 2 noted */
	int bp_state = 0;
	uintptr_t pend_at = 0;
	if (rec) {
		rec->ip0 = ip;
		rec->sp0 = sp;
		rec->bp0 = bp;
		rec->size = size;
		rec->nreads = rec->need_bp = 0;
	}
	if (HA_UNLIKELY(n >= size))
		return st;
	for (;;) {
		buf[n++] = (void *)ip;
		if (HA_UNLIKELY(n >= size))
			break;            /* the last frame kept needs no rule */
		/* the slot: nearly always the first probed */
		const struct slot *s = &slots[((ip * 0x9e3779b97f4a7c15ull) >> (64 - LAST_BITS)) & mask];
		if (HA_UNLIKELY(__atomic_load_n(&s->ip, __ATOMIC_ACQUIRE) != ip) &&
		    !(s = ha_frame_slot_in(t, ip))) {
			n--;
			st = WALK_UNKNOWN;
			break;
		}
		struct rule r = slot_rule(s);
		uintptr_t cfa;
		if (HA_LIKELY(r.kind == RULE_BP)) {
			cfa = bp + (uintptr_t)(intptr_t)r.cfa_off;
			if (rec && bp_state == 0) {
				rec->need_bp = 1;
			} else if (rec && bp_state == 1) {   /* a CFA follows it: noted */
				memo_read(rec, pend_at, bp, 0);
				bp_state = 2;
			}
		} else if (HA_LIKELY(r.kind == RULE_SP))
			cfa = sp + (uintptr_t)(intptr_t)r.cfa_off;
		else if (r.kind == RULE_END)
			break;
		else {
			n--;
			st = WALK_NO_RULE;
			break;
		}
		/* not above this frame, or 64 MiB away: not a frame of this
		 * stack, ask the rows */
		if (HA_UNLIKELY(cfa - sp - 1 >= ((uintptr_t)1 << 26))) {
			n--;
			st = WALK_NO_RULE;
			break;
		}
		if (r.rbp_off) {
			pend_at = cfa + (uintptr_t)(intptr_t)r.rbp_off;
			bp = *(const uintptr_t *)pend_at;
			bp_state = 1;
		}
		ip = *(const uintptr_t *)RULE_RA_AT(cfa, r);
		sp = cfa;
		if (rec)
			memo_read(rec, RULE_RA_AT(cfa, r), ip, ip >= 0x4000);
		if (HA_UNLIKELY(ip < 0x4000))
			break;
	}
	if (rec)
		rec->n = n;
	w->ip = ip;
	w->sp = sp;
	w->bp = bp;
	w->n = n;
	return st;
}

/* A walk from fp (a frame pointer: the caller's RBP, then the return
 * address; cfa: that frame's CFA, see HA_CALLER_SP) by the rules learned
 * so far: the frame count, or -1 when a frame has no rule or was never
 * met. */
static inline __attribute__((always_inline)) int rule_walk_from(void **buf, int size,
								const uintptr_t *fp, const void *cfa)
{
	struct walk w = { fp[1], HA_CALLER_SP(fp, cfa), fp[0], 0 };
	return rule_walk(buf, size, &w, NULL) == WALK_DONE ? w.n : -1;
}

/* libunwind's aarch64 trace (unw_backtrace) gives each caller's frame as
 * its return address - 1; the rules, the rows and x86-64's trace give the
 * return address.  Instructions are 4-byte aligned there, so rounding up
 * to 4 gives it back, and leaves an exact PC (a signal's) as it is. */
static inline void ha_trace_norm(void **buf, int n)
{
#if defined(__aarch64__)
	for (int i = 0; i < n; i++)
		buf[i] = (void *)(((uintptr_t)buf[i] + 3) & ~(uintptr_t)3);
#else
	(void)buf;
	(void)n;
#endif
}

/* ---- frame_rules.c ------------------------------------------------------- */
/* Bumped each time slots of unloaded objects were set RULE_GONE: a walk
 * noted under an older value is not replayed (stack.c's memo). */
extern HA_HIDDEN unsigned ha_frame_gen;
/* Note the objects loaded so far (ha_stack_init; no lock held). */
HA_HIDDEN void ha_frame_rules_init(void);
/* After objects were unloaded, set RULE_GONE the slots of every IP not in
 * an object loaded both then and now (a dl_iterate_phdr: inside the gate);
 * the others stay learned. */
HA_HIDDEN void ha_frame_check_unloads(void);
/* In a fork's child: the pid the kernel reads through is this process's. */
HA_HIDDEN void ha_frame_after_fork(void);
/* Learn the frame at ip whose RSP and RBP are sp and bp (inside the gate):
 * 1, ip has a slot now. */
HA_HIDDEN int ha_frame_learn_at(uintptr_t ip, uintptr_t sp, uintptr_t bp);
/* Step the frame w stands at, which the rule walk stopped at (WALK_NO_RULE):
 * a frame without unwind info by its frame pointer (x86-64), a signal
 * frame and the frame it interrupted by the kernel's record and the exact
 * IP's rule, a RULE_GONE frame learned again (w stays): 1, the rule walk
 * goes on from w; 2, the stack ended there (inside the gate).  0: none of
 * these, the rows walk instead.  *ok_page: the page last read through the
 * kernel in this walk (0 at its start). */
HA_HIDDEN int ha_frame_step_other(void **buf, int size, struct walk *w, uintptr_t *ok_page);
/* The walk over the shared rows from the caller's frame (inside the gate);
 * first: the hook's return address. */
HA_HIDDEN int ha_frame_shared_unwind(void **buf, int size, void *first);

/* ---- unw_pipe.c ---------------------------------------------------------- */
/* libunwind's one-time set-up, its validation pipe refused (unw_pipe.c):
 * before any call into libunwind. */
#define HA_UNW_READY 2
extern HA_HIDDEN int ha_unw_state;
HA_HIDDEN void ha_unw_start_slow(void);
static inline void ha_unw_start(void)
{
	if (HA_UNLIKELY(__atomic_load_n(&ha_unw_state, __ATOMIC_ACQUIRE) != HA_UNW_READY))
		ha_unw_start_slow();
}

#endif
