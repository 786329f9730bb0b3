/* tests/unit/prof_unwind.c — unit tier for prof/capture/stack.c's unwinders: every
 * stack the sampling hook captures must equal libunwind's own
 * unw_backtrace of the same stack, whether it was walked by the frame
 * rules, by the shared rows, or stepped past a signal frame or a frame
 * without unwind info; and a stack
 * whose frames are all learned must be walked by the rules alone.
 * A stack met for the first time below frames already learned is learned
 * from where the rules stop (learn_at), not by replaying every row.
 * Shapes: plain recursion (CFA from RSP), alloca of changing size (CFA
 * from RBP, learned at one size and walked at others), a frame too big
 * for a rule, a signal handler's frame, a frame of bare assembly without
 * unwind info (x86-64: stepped by its RBP), another thread, and 320 call sites
 * of one function: more than the table's first size holds, so it grows
 * (and what it knew is still walked by rules after).
 * The test builds of stack.c and frame_rules.c are linked in (learned_at:
 * prof/unit.h); no heapalloc allocator is used.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <alloca.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#include <libunwind.h>
#include <string.h>

#include "prof/capture/frame_rules.h"   /* the rule walk, inline */
#include "prof/unit.h"
#include "tests/lib/check.h"

void ha_alloc_call_back_next(void) {}
HA_TLS unsigned ha_locks_held;
HA_TLS int ha_prof_busy;        /* hooks.c's re-entrancy guard (stack.c's calibration) */

#define N 64

static int same(void *const *a, int na, void *const *b, int nb)
{
	if (na != nb)
		return 0;
	for (int i = 0; i < na; i++)
		if (a[i] != b[i])
			return 0;
	return 1;
}

static int compared, by_rules, no_rule;

/* Capture this stack three ways and compare each with unw_backtrace.
 * want_rules: whether every frame should have a rule by now. */
static __attribute__((noinline)) void capture(int want_rules, int expect_none)
{
	void *lib[N], *hook[N], *rules[N];
	int nh = ha_stack_unwind(hook, N);             /* learns what it meets */
	int nr = rule_walk_from(rules, N, __builtin_frame_address(0), __builtin_dwarf_cfa());
	int nl = unw_backtrace(lib, N);
	ha_trace_norm(lib, nl);
	__asm__ volatile("" ::: "memory");
	REQUIRE(nl > 2 && nh > 1);
	/* lib[0] and hook[0] are two call sites in here; from the caller on
	 * they must agree frame for frame */
	if (!same(lib + 1, nl - 1, hook + 1, nh - 1)) {
		fprintf(stderr, "stack_unwind differs from unw_backtrace (%d vs %d frames)\n",
			nh - 1, nl - 1);
		for (int i = 1; i < nl || i < nh; i++)
			fprintf(stderr, "  %2d  %p  %p\n", i, i < nl ? lib[i] : NULL,
				i < nh ? hook[i] : NULL);
		CHECK(0);
	}
	compared++;
	if (nr >= 0) {
		by_rules++;
		if (!same(lib + 1, nl - 1, rules, nr)) {
			fprintf(stderr, "rule walk differs from unw_backtrace (%d vs %d frames)\n",
				nr, nl - 1);
			for (int i = 0; i < nl - 1 || i < nr; i++)
				fprintf(stderr, "  %2d  %p  %p\n", i, i < nl - 1 ? lib[i + 1] : NULL,
					i < nr ? rules[i] : NULL);
			CHECK(0);
		}
	} else {
		no_rule++;
	}
	if (want_rules)
		CHECK(nr >= 0);
	if (expect_none)
		CHECK(nr < 0);
}

static volatile int sink;

/* One capture site reached through two callers whose frames are alike
 * and called from one place: each capture starts where the last one did
 * (the same frame of capture(), the same return address), and the words
 * above differ only at the caller's return address, which a replay of
 * the last walk must notice. */
static __attribute__((noinline)) void site(void)
{
	capture(1, 0);
	sink++;
}

static __attribute__((noinline)) void via_a(void)
{
	site();
	sink++;
}

static __attribute__((noinline)) void via_b(void)
{
	site();
	sink++;
}

static void (*volatile const via[2])(void) = { via_a, via_b };

static __attribute__((noinline)) void rec(int d, int want)
{
	if (d == 0)
		capture(want, 0);
	else
		rec(d - 1, want);
	sink++;                  /* no tail call: every level keeps a frame */
}

/* New callers of known frames: the walk learns just them, from the
 * registers it has reached, and the very first capture is by rules. */
static __attribute__((noinline)) void fresh_caller(int d)
{
	unsigned before = learned_at;
	rec(d, 1);
	CHECK(learned_at > before);
	sink++;
}

static __attribute__((noinline)) void with_alloca(int d, size_t n, int want)
{
	volatile char *p = alloca(n);
	p[0] = 1;
	p[n - 1] = 2;
	if (d == 0)
		capture(want, 0);
	else
		with_alloca(d - 1, n + 24 * (size_t)d, want);
	sink += p[0];
}

static __attribute__((noinline)) void big_frame(int want_none)
{
	volatile char buf[100000];
	buf[0] = 1;
	buf[sizeof buf - 1] = 1;
	capture(0, want_none);
	sink += buf[0] + buf[sizeof buf - 1];
}

/* NSITES call sites of fan, each its own return address (the statement
 * after each call differs, so no two calls are merged). */
#define NSITES 320
static __attribute__((noinline)) void fan(int d, int k, int want)
{
	if (d == 0) {
		capture(want, 0);
		return;
	}
	switch (k) {
#define C(i) case i: fan(d - 1, 0, want); sink += i; break;
#define C8(b) C(b + 0) C(b + 1) C(b + 2) C(b + 3) C(b + 4) C(b + 5) C(b + 6) C(b + 7)
#define C64(b) C8(b) C8(b + 8) C8(b + 16) C8(b + 24) C8(b + 32) C8(b + 40) C8(b + 48) C8(b + 56)
	C64(0) C64(64) C64(128) C64(192) C64(256)
#undef C64
#undef C8
#undef C
	}
}

static int in_handler_ok;

#if defined(__x86_64__)
/* nocfi_call(fn): fn() from a frame of bare assembly with no unwind info */
void nocfi_call(void (*fn)(void));
__asm__(".text\n.globl nocfi_call\n.type nocfi_call,@function\nnocfi_call:\n"
	"\tpush %rbp\n\tmov %rsp, %rbp\n\tcall *%rdi\n\tpop %rbp\n\tret\n"
	".size nocfi_call, .-nocfi_call\n");

static __attribute__((noinline)) void below_nocfi(void)
{
	capture(0, 1);        /* the frame above has no unwind info, no rule */
	sink++;
}
#endif

static void on_usr1(int sig)
{
	(void)sig;
	capture(0, 1);        /* the kernel's signal frame has no rule */
	in_handler_ok = 1;
}

static void *thread_main(void *arg)
{
	(void)arg;
	rec(5, 0);
	rec(5, 1);
	with_alloca(3, 100, 0);
	with_alloca(3, 2000, 1);
	return NULL;
}

int main(void)
{
	ha_stack_init();

	/* recursion: learned on the first pass, rules on every later one */
	for (int d = 0; d < 20; d++)
		rec(d, 0);
	for (int d = 0; d < 20; d++)
		rec(d, 1);

	fresh_caller(3);
	fresh_caller(7);

	/* alloca: RSP moves by the alloca's size, so only an RBP rule is right */
	with_alloca(4, 64, 0);
	with_alloca(4, 64, 1);
	with_alloca(4, 3000, 1);
	with_alloca(4, 40000, 1);

	/* the same stack again is replayed from the last walk; one that
	 * differs only high up is walked again (both equal libunwind's) */
	unsigned r0 = replayed;
	for (int i = 0; i < 18; i++)
		via[(i >> 1) & 1]();      /* a, a, b, b, ... */
	/* the second of each pair but the first two (each came after a new
	 * caller's frame was learned, whose walk is not noted) */
	CHECK_EQ(replayed - r0, 7);

	/* a frame larger than a rule may describe: the rows walk it */
	big_frame(0);
	big_frame(1);

	/* a few dozen frames so far: the first size (8 KiB), a row each, the
	 * scratch stack */
	uint64_t small = ha_frame_memory();
	CHECK_GE(small, 1);
	CHECK_LE(small, (1u << FIRST_BITS) * 16 + 256 * 192 + 32768);
	/* 320 more: the table grows past its first size; each new site is
	 * learned by the walk, and every one is walked by rules after */
	for (int k = 0; k < NSITES; k++)
		fan(1, k, 0);
	for (int k = 0; k < NSITES; k++)
		fan(1, k, 1);
	CHECK_GE(ha_frame_memory(), small + (2u << FIRST_BITS) * 16);

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	raise(SIGUSR1);
	raise(SIGUSR1);
	CHECK(in_handler_ok);
#if defined(__x86_64__)
	nocfi_call(below_nocfi);   /* learned */
	nocfi_call(below_nocfi);   /* stepped by RBP, kept as having no info */
#endif

	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, thread_main, NULL) == 0);
	pthread_join(t, NULL);

	CHECK_GE(by_rules, 40);
	CHECK_GE(no_rule, 4);
	printf("%d stacks compared with unw_backtrace: %d walked by rules, %d not\n", compared,
	       by_rules, no_rule);
	return ck_failures ? 1 : 0;
}
