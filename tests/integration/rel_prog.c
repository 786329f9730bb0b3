/* tests/integration/rel_prog.c — the small allocating program the reliability shell
 * drivers run under bad environments (linked with heapalloc).
 *
 *   rel_prog                      allocate, free, print "rel_prog ok"
 *   rel_prog expect-env VALUE     also check HEAPPROFILE is byte for byte VALUE
 *   rel_prog handler SIG          install our own handler for SIG (a number),
 *                                 raise it 3 times: it must run every time
 *   rel_prog handler-first SIG P [nowait]  same, but the handler is installed
 *                                 before HeapProfilerStart(P) (so heapalloc
 *                                 finds it); nowait: the raises 20 ms apart
 *                                 or (nowait) at once, then HeapProfilerStop
 * Exit 0 and "rel_prog ok" on stdout when everything held.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "include/heapalloc.h"

static volatile sig_atomic_t handled;
static useconds_t raise_gap = 20000;

static void on_sig(int s)
{
	(void)s;
	handled++;
}

static int work(void)
{
	void *keep[256] = { 0 };
	unsigned long sum = 0;
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 256; i++) {
			size_t n = (size_t)(i * 37 + round * 4099) % 70000 + 1;
			free(keep[i]);
			keep[i] = malloc(n);
			if (!keep[i])
				return 1;
			memset(keep[i], i, n);
			sum += ((unsigned char *)keep[i])[n - 1];
			if (i % 3 == 0) {
				free(keep[i]);
				keep[i] = NULL;
			}
		}
	for (int i = 0; i < 256; i++)
		free(keep[i]);
	return sum == 0;
}

static int raise_three(int sig)
{
	/* the helper writes each dump meanwhile, or (a busy or emulated
	 * machine) HeapProfilerStop writes what it has not */
	for (int i = 0; i < 3; i++) {
		if (raise(sig) != 0)
			return 1;
		usleep(raise_gap);
	}
	if (handled != 3) {
		fprintf(stderr, "rel_prog: our handler ran %d times, want 3\n", (int)handled);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int bad = work();
	if (argc >= 3 && !strcmp(argv[1], "expect-env")) {
		const char *v = getenv("HEAPPROFILE");
		if (!v || strcmp(v, argv[2])) {
			fprintf(stderr, "rel_prog: HEAPPROFILE changed in the environment\n");
			bad = 1;
		}
	} else if (argc >= 3 && !strcmp(argv[1], "handler")) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_sig;
		sa.sa_flags = SA_RESTART;
		sigaction(atoi(argv[2]), &sa, NULL);
		bad |= raise_three(atoi(argv[2]));
	} else if (argc >= 4 && !strcmp(argv[1], "handler-first")) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_sig;
		sa.sa_flags = SA_RESTART;
		sigaction(atoi(argv[2]), &sa, NULL);
		if (argc >= 5 && !strcmp(argv[4], "nowait"))
			raise_gap = 0;
		HeapProfilerStart(argv[3]);
		bad |= raise_three(atoi(argv[2]));
		HeapProfilerStop();
	}
	bad |= work();
	if (!bad)
		printf("rel_prog ok\n");
	return bad;
}
