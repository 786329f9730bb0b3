/* tests/integration/rel_dump_signal.c — a signal arriving over and over while dumps are
 * written: ITIMER_REAL fires SIGALRM every millisecond into a handler
 * installed without SA_RESTART (so any slow call sees EINTR), while the
 * main thread dumps (until 300 signals came, at most 150 dumps) and a second
 * thread allocates and frees (sampled every 1 KiB: many stacks to write).
 * Every dump must succeed and every file be whole (header line, bucket
 * lines, MAPPED_LIBRARIES: with mappings); no temporary file is left.
 */
#include <stdint.h>
#include <sys/time.h>

#include "tests/lib/rel_util.h"
#include "include/heapalloc.h"

#define MAXDUMPS 150

static volatile sig_atomic_t ticks;
static volatile int stop;

static void on_alarm(int s)
{
	(void)s;
	ticks++;
}

static void *allocator(void *arg)
{
	(void)arg;
	void *keep[512] = { 0 };
	unsigned i = 0;
	while (!stop) {
		unsigned k = i++ % 512;
		free(keep[k]);
		keep[k] = malloc((i * 2654435761u) % 20000 + 1);
		if (keep[k])
			memset(keep[k], 7, 1);
	}
	for (int k = 0; k < 512; k++)
		free(keep[k]);
	return NULL;
}

int main(int argc, char **argv)
{
	(void)argc;
	rel_reexec(argv, "HEAP_PROFILE_SAMPLE_INTERVAL=1024", "HEAP_PROFILE_ALLOCATION_INTERVAL=0",
		   "HEAP_PROFILE_INUSE_INTERVAL=0", (char *)NULL);
	rel_watchdog(60, "rel_dump_signal");
	char dir[512], prefix[600];
	rel_mkdtemp(dir, sizeof dir, "reldumpsig");
	snprintf(prefix, sizeof prefix, "%s/p", dir);

	rel_stderr_begin();
	int start = heapalloc_profile_start(prefix);
	pthread_t t;
	pthread_create(&t, NULL, allocator, NULL);

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;     /* no SA_RESTART */
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { { 0, 1000 }, { 0, 1000 } };
	setitimer(ITIMER_REAL, &it, NULL);

	int rc[MAXDUMPS], ndumps = 0;
	while (ndumps < MAXDUMPS && (ticks < 300 || ndumps < 10))
		rc[ndumps++] = heapalloc_profile_dump("test: timer storm");

	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	stop = 1;
	pthread_join(t, NULL);
	heapalloc_profile_stop();
	const char *err = rel_stderr_end();

	REQUIRE(start == 0);
	int bad = 0;
	for (int i = 0; i < ndumps; i++)
		bad += rc[i] != 0;
	CHECK_EQ(bad, 0);
	CHECK_EQ(rel_count_lines(err, "Failed dumping", (char *)NULL), 0);
	CHECK_EQ(rel_count_files(dir, ".heap"), ndumps);
	CHECK_EQ(rel_count_files(dir, NULL), ndumps + 1);     /* and p.log */
	char logp[700];
	snprintf(logp, sizeof logp, "%s.log", prefix);
	CHECK_EQ(rel_log_lines(logp, NULL, 0), ndumps);      /* every line whole */
	for (int i = 1; i <= ndumps; i++) {
		char p[700];
		snprintf(p, sizeof p, "%s.%04d.heap", prefix, i);
		CHECK(rel_profile_whole(p));
	}
	fprintf(stderr, "info: %d SIGALRM delivered during %d dumps\n", (int)ticks, ndumps);
	CHECK_GE(ticks, 5);      /* the storm really happened */
	if (ck_failures)
		fprintf(stderr, "--- stderr of the dumps ---\n%.4000s---\n", err);
	rel_rmtree(dir);
	return CHECK_DONE();
}
