/* prof_unw_nofds — sampling opens no descriptor of its own.
 *
 * libunwind's set-up has its validation pipe refused (prof/capture/unw_pipe.c),
 * and no walk of the profiler asks for one.  Hundreds of samples from many
 * call sites, and the program must see no descriptor it did not open: none
 * beside what it inherited, as under glibc. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "heapalloc.h"
#include "tests/lib/check.h"
#include "tests/lib/rel_util.h"

static void *volatile sink;

__attribute__((noinline)) static void churn(size_t n)
{
	for (int i = 0; i < 16; i++) {
		char *p = malloc(n);
		memset(p, 1, 64);
		sink = p;
		free(p);
	}
}

#define SITE(k) __attribute__((noinline)) static void site##k(void) { churn(1 << 20); }
SITE(1) SITE(2) SITE(3) SITE(4) SITE(5) SITE(6) SITE(7) SITE(8)

/* The descriptors open now that this process opened (close-on-exec: what
 * it inherited survived an exec, so is not), but the listing's own. */
static int own_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		HARD_ERROR("opendir /proc/self/fd");
	int n = 0, self = dirfd(d);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		int fd = atoi(e->d_name);
		if (e->d_name[0] == '.' || fd == self)
			continue;
		int fl = fcntl(fd, F_GETFD);
		if (fl >= 0 && (fl & FD_CLOEXEC)) {
			fprintf(stderr, "fd %d: opened in this process, not by it\n", fd);
			n++;
		}
	}
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	unsetenv("HEAPPROFILE");   /* every 1 MiB block sampled, in memory only */
	rel_reexec(argv, "HEAP_PROFILE_SAMPLE_INTERVAL=65536", (char *)NULL);
	(void)argc;
	heapalloc_stats st0, st1;
	heapalloc_get_stats(&st0);
	void (*const sites[])(void) = { site1, site2, site3, site4, site5, site6, site7, site8 };
	for (int r = 0; r < 4; r++)
		for (int k = 0; k < 8; k++)
			sites[k]();
	heapalloc_get_stats(&st1);
	CHECK_GE(st1.prof_samples - st0.prof_samples, 400);   /* the unwinder walked them */
	CHECK_EQ(own_fds(), 0);
	return CHECK_DONE();
}
