/* tests/lib/check.h — the whole test harness: exit 0 pass, 77 skip, 99 hard error.
 * CHECK records a failure and carries on (so one run lists every failure);
 * REQUIRE stops the test at once (use it where going on would crash).
 * Printing is capped so a check inside a loop cannot flood the log. */
#ifndef HA_TESTS_CHECK_H
#define HA_TESTS_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXIT_SKIP 77
#define EXIT_HARD 99

static int ck_failures;

/* A test that hangs dies of SIGALRM (a failure) instead of stalling make check. */
__attribute__((constructor)) static void ck_watchdog(void) { alarm(120); }

static inline void ck_fail(const char *file, int line, const char *what,
			   const char *a, long long va, const char *b, long long vb)
{
	if (++ck_failures <= 30) {
		if (a)
			fprintf(stderr, "%s:%d: FAIL %s: %s = %lld (%#llx), %s = %lld (%#llx)\n",
				file, line, what, a, va, (unsigned long long)va, b, vb,
				(unsigned long long)vb);
		else
			fprintf(stderr, "%s:%d: FAIL %s\n", file, line, what);
	} else if (ck_failures == 31)
		fprintf(stderr, "(further failures not printed)\n");
}

#define CHECK(c) do { if (!(c)) ck_fail(__FILE__, __LINE__, #c, 0, 0, 0, 0); } while (0)
#define CK_CMP(a, op, b) do { long long ck_a = (long long)(a), ck_b = (long long)(b); \
	if (!(ck_a op ck_b)) ck_fail(__FILE__, __LINE__, #a " " #op " " #b, #a, ck_a, #b, ck_b); } while (0)
#define CHECK_EQ(a, b) CK_CMP(a, ==, b)
#define CHECK_NE(a, b) CK_CMP(a, !=, b)
#define CHECK_GE(a, b) CK_CMP(a, >=, b)
#define CHECK_LE(a, b) CK_CMP(a, <=, b)
#define REQUIRE(c) do { if (!(c)) { ck_fail(__FILE__, __LINE__, #c, 0, 0, 0, 0); exit(1); } } while (0)
#define SKIP(msg) do { fprintf(stderr, "SKIP: %s\n", msg); exit(EXIT_SKIP); } while (0)
/* Under an emulator (HA_EMULATED, Makefile.am): the string, else NULL. */
static inline const char *ck_emulated(void)
{
	const char *e = getenv("HA_EMULATED");
	return e && *e ? e : NULL;
}
/* Skip, saying why, when what the test measures is the emulator's. */
#define EMU_SKIP(why) do { if (ck_emulated()) { \
	fprintf(stderr, "SKIP: %s: %s\n", ck_emulated(), why); exit(EXIT_SKIP); } } while (0)
#define HARD_ERROR(msg) do { fprintf(stderr, "%s:%d: HARD ERROR: %s\n", __FILE__, __LINE__, msg); \
	exit(EXIT_HARD); } while (0)
/* End of main: 0 when every check passed. */
#define CHECK_DONE() (ck_failures ? (fprintf(stderr, "%d check(s) failed\n", ck_failures), 1) : 0)
#endif
