/* prof_unw_fds — the program's files are never touched by the unwinder.
 *
 * libunwind 1.6, to walk a frame without unwind info, reads a byte from one
 * end of a pipe and writes one to the other by number (prof/capture/unw_pipe.c);
 * the profiler's walks never ask it to, and its set-up's pipe is refused.
 * This file is compiled without unwind tables
 * (tests/integration/profiler.am), so every sampled stack has such frames,
 * stepped by their frame pointers.  Every allocation is sampled; no pipe
 * may appear; after the first samples the program closes every descriptor
 * above 2 as a daemon does, opens two files (the numbers a pipe opened
 * before would have had), and samples again from new call sites and stack
 * pages.  The first file must still read back whole from its start and the
 * second stay empty. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tests/lib/check.h"
#include "tests/lib/rel_util.h"

/* nocfi_call(n, fn): fn(n) through a frame of bare assembly */
void nocfi_call(size_t n, void (*fn)(size_t));
#if defined(__aarch64__)
__asm__(".text\n.globl nocfi_call\n.type nocfi_call,%function\nnocfi_call:\n"
	"\tstp x29, x30, [sp, #-16]!\n\tmov x29, sp\n\tblr x1\n\tldp x29, x30, [sp], #16\n\tret\n"
	".size nocfi_call, .-nocfi_call\n");
#else
__asm__(".text\n.globl nocfi_call\n.type nocfi_call,@function\nnocfi_call:\n"
	"\tpush %rbp\n\tmov %rsp, %rbp\n\tcall *%rsi\n\tpop %rbp\n\tret\n"
	".size nocfi_call, .-nocfi_call\n");
#endif

static void *volatile sink;

__attribute__((noinline)) static void churn(size_t n)
{
	for (int i = 0; i < 32; i++) {
		char *p = malloc(n);
		memset(p, 1, 64);
		sink = p;
		free(p);
	}
}

/* Call sites libunwind has not met (its trace cache misses, so it steps
 * them, validating), each below a pad of its own size, so that its frame
 * sits on stack pages libunwind has not validated yet (it remembers 4). */
#define SITE(k) \
	__attribute__((noinline)) static void site##k(void) { nocfi_call(1 << 20, churn); }
__attribute__((noinline)) static void padded(int k, void (*site)(void))
{
	volatile char pad[k * (24 << 10)];
	pad[0] = (char)k;
	pad[sizeof pad - 1] = 0;
	site();
}
SITE(1) SITE(2) SITE(3) SITE(4) SITE(5) SITE(6) SITE(7) SITE(8)

/* pipe ends open here as libunwind opens them: close-on-exec, non-blocking */
static int unw_like_fifos(void)
{
	int n = 0;
	for (int fd = 3; fd < 1024; fd++) {
		struct stat st;
		if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) &&
		    (fcntl(fd, F_GETFD) & FD_CLOEXEC) && (fcntl(fd, F_GETFL) & O_NONBLOCK))
			n++;
	}
	return n;
}

int main(int argc, char **argv)
{
	unsetenv("HEAPPROFILE");   /* every allocation sampled, in memory only */
	rel_reexec(argv, "HEAP_PROFILE_SAMPLE_INTERVAL=1", (char *)NULL);
	(void)argc;
	nocfi_call(1 << 20, churn);
	padded(1, site1);
	CHECK_EQ(unw_like_fifos(), 0);   /* sampling started libunwind, its pipe refused */
	for (int fd = 3; fd < 1024; fd++)     /* closefrom(3) */
		close(fd);
	char a_name[] = "/tmp/prof_unw_fds.a.XXXXXX", b_name[] = "/tmp/prof_unw_fds.b.XXXXXX";
	int a = mkstemp(a_name), b = mkstemp(b_name);
	if (a < 0 || b < 0)
		HARD_ERROR("mkstemp");
	unlink(a_name);
	unlink(b_name);
	CHECK_EQ(write(a, "hello", 5), 5);
	CHECK_EQ(lseek(a, 0, SEEK_SET), 0);
	void (*const later[])(void) = { site2, site3, site4, site5, site6, site7, site8 };
	for (int k = 0; k < 7; k++)
		padded(k + 2, later[k]);
	char buf[16] = { 0 };
	CHECK_EQ(read(a, buf, sizeof buf), 5);
	CHECK(memcmp(buf, "hello", 5) == 0);
	struct stat st;
	CHECK_EQ(fstat(b, &st), 0);
	CHECK_EQ(st.st_size, 0);
	CHECK_EQ(unw_like_fifos(), 0);
	return CHECK_DONE();
}
