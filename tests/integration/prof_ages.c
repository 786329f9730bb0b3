/* tests/integration/prof_ages.c — a heap whose ages and lifetimes are known by
 * construction, for tests/integration/prof_ages.sh: old_site and old_big allocate at
 * the start and keep; churn_site frees each block at once; slow_site frees
 * its block after 30 ms; then 2 s pass and new_site allocates and keeps.
 * Then a dump (HEAPPROFILE) and the served profile (heapalloc_profile_pprof)
 * into argv[1]; prints "elapsed S", the whole seconds between old_site's
 * allocations and the dump's start, and "lived FAST SLOW MS": the bytes of
 * churn blocks that by the program's own clock lived under 1 ms (FAST) and
 * 10 ms or more (SLOW), and slow_site's block's ms.  The profiler's clock
 * reads fall between the program's, so its lifetimes are no longer: on a
 * loaded or emulated machine, where "at once" may outlast 1 ms, these say
 * what the profile must hold.  Last, "ages LO HI YOUNG": old_site's age at
 * the dump lies in [LO, HI] whole seconds by the program's clock, and
 * new_site was at most YOUNG ms old when the served profile was made.  `--wait READY`: writes that line into
 * READY instead and waits for stdin's end (for `heapalloc dump/top PID`);
 * `--grow READY` the same, while grow_site keeps a new block every 50 ms.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include "heapalloc.h"

static void *volatile keep[128];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void old_site(int i) { keep[i] = malloc(512); }
__attribute__((noinline)) static void old_big(int i) { keep[64 + i] = malloc(100000); }
__attribute__((noinline)) static void new_site(int i) { keep[100 + i] = malloc(512); }

static void *volatile grown[4096];
__attribute__((noinline)) static void grow_site(int i) { grown[i] = malloc(512); }

static long churn_fast, churn_slow;   /* bytes that lived < 1 ms, >= 10 ms */
static int slow_ms;

__attribute__((noinline)) static void churn_site(void)
{
	for (int i = 0; i < 100; i++) {
		double t = now();
		void *volatile p = malloc(3000);
		free(p);
		t = now() - t;
		churn_fast += t < 1e-3 ? 3000 : 0;
		churn_slow += t >= 10e-3 ? 3000 : 0;
	}
}

__attribute__((noinline)) static void slow_site(void)
{
	double t = now();
	void *volatile p = malloc(5000);
	struct timespec ts = { 0, 30000000 };
	nanosleep(&ts, NULL);
	free(p);
	slow_ms = (int)((now() - t) * 1000);
}

int main(int argc, char **argv)
{
	int grow = argc == 3 && strcmp(argv[1], "--grow") == 0;
	int wait = grow || (argc == 3 && strcmp(argv[1], "--wait") == 0);
	if (argc != 2 && !wait) {
		fprintf(stderr, "usage: prof_ages SERVED.pb.gz | --wait READY\n");
		return 2;
	}
	double t0 = now();
	for (int i = 0; i < 20; i++)
		old_site(i);
	for (int i = 0; i < 4; i++)
		old_big(i);
	double t_old = now();
	churn_site();
	slow_site();
	struct timespec ts = { 2, 100000000 };
	nanosleep(&ts, NULL);
	double t_new = now();
	for (int i = 0; i < 20; i++)
		new_site(i);
	if (wait) {
		FILE *r = fopen(argv[2], "w");
		if (!r || fprintf(r, "lived %ld %ld %d\nelapsed %d\n", churn_fast, churn_slow, slow_ms,
				  (int)(now() - t0)) < 0 || fclose(r) != 0)
			return 6;
		char c;
		for (int i = 0; grow && i < 4096; i++) {    /* until stdin's end */
			struct pollfd p = { 0, POLLIN, 0 };
			if (poll(&p, 1, 50) != 0 && read(0, &c, 1) <= 0)
				return 0;
			grow_site(i);
		}
		while (getchar() != EOF)
			;
		return 0;
	}
	printf("lived %ld %ld %d\nelapsed %d\n", churn_fast, churn_slow, slow_ms, (int)(now() - t0));
	fflush(stdout);
	double t_dump = now();
	if (heapalloc_profile_dump("ages") != 0)
		return 3;
	void *buf;
	size_t len;
	if (heapalloc_profile_pprof(&buf, &len) != 0)
		return 4;
	FILE *f = fopen(argv[1], "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0)
		return 5;
	free(buf);
	double t_end = now();
	printf("ages %d %d %d\n", (int)(t_dump - t_old), (int)(t_end - t0), (int)((t_end - t_new) * 1000));
	return 0;
}
