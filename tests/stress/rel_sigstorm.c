/* tests/stress/rel_sigstorm.c — HEAPPROFILESIGNAL=SIGUSR2 and 300 SIGUSR2 sent as
 * fast as possible by another thread while the main thread allocates: each
 * delivery asks for a dump (the helper thread writes them).  The program
 * keeps running and exits 0 after the storm, every file written is whole,
 * no temporary is left, the number of files equals the number of
 * "Dumping heap profile" lines, and at least one signal dump happened.
 */
#include <stdint.h>
#include <time.h>

#include "tests/lib/rel_util.h"
#include "include/heapalloc.h"

#define NSIGS 300

static volatile int done;

static void *sender(void *arg)
{
	(void)arg;
	for (int i = 0; i < NSIGS; i++) {
		kill(getpid(), SIGUSR2);
		if (i % 16 == 0)
			sched_yield();
	}
	done = 1;
	return NULL;
}

int main(int argc, char **argv)
{
	static char dir[512], env_p[600], env_d[600];
	(void)argc;
	if (!getenv("REL_CHILD")) {
		rel_mkdtemp(dir, sizeof dir, "relsigstorm");
		snprintf(env_p, sizeof env_p, "HEAPPROFILE=%s/p", dir);
		snprintf(env_d, sizeof env_d, "REL_DIR=%s", dir);
		rel_reexec(argv, env_p, env_d, "HEAPPROFILESIGNAL=SIGUSR2",
			   "HEAP_PROFILE_SAMPLE_INTERVAL=4096", (char *)NULL);
	}
	rel_watchdog(60, "rel_sigstorm");
	snprintf(dir, sizeof dir, "%s", getenv("REL_DIR"));
	REQUIRE(heapalloc_profile_running());
	rel_stderr_begin();
	pthread_t t;
	pthread_create(&t, NULL, sender, NULL);
	void *keep[128] = { 0 };
	for (unsigned i = 0; !done || i < 100000; i++) {
		unsigned k = i % 128;
		free(keep[k]);
		keep[k] = malloc(i % 3000 + 1);
	}
	pthread_join(t, NULL);
	/* let the helper drain what was asked (up to 5 s) */
	int before = -1, files = 0;
	for (int w = 0; w < 50 && files != before; w++) {
		before = files;
		usleep(100 * 1000);
		files = rel_count_files(dir, ".heap");
	}
	heapalloc_profile_stop();
	for (int k = 0; k < 128; k++)
		free(keep[k]);
	const char *err = rel_stderr_end();
	files = rel_count_files(dir, ".heap");
	int lines = rel_count_lines(err, "Dumping heap profile to ", (char *)NULL);
	int sig = rel_count_lines(err, "Dumping heap profile to ", "(signal)", (char *)NULL);
	fprintf(stderr, "info: %d SIGUSR2 sent, %d signal dumps, %d files\n", NSIGS, sig, files);
	CHECK_GE(sig, 1);
	CHECK_EQ(rel_count_lines(err, "Failed dumping", (char *)NULL), 0);
	CHECK_EQ(files, lines);
	CHECK_EQ(rel_count_files(dir, NULL), files + 1);     /* and p.log */
	char logp[700];
	snprintf(logp, sizeof logp, "%s/p.log", dir);
	CHECK_EQ(rel_log_lines(logp, NULL, 0), files);
	DIR *d = opendir(dir);
	struct dirent *e;
	int whole = 0;
	while (d && (e = readdir(d))) {
		char p[1200];
		if (!strstr(e->d_name, ".heap"))
			continue;
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		whole += rel_profile_whole(p);
	}
	if (d)
		closedir(d);
	CHECK_EQ(whole, files);
	if (ck_failures)
		fprintf(stderr, "--- stderr ---\n%.3000s---\n", err);
	rel_rmtree(dir);
	return CHECK_DONE();
}
