/* tests/integration/rel_exit_race.c — main returns while 8 threads are still
 * allocating and freeing under HEAPPROFILE (sampling every 4 KiB): the exit
 * dump runs concurrently with them and with libc's teardown.  Ten runs; each
 * must exit 0 promptly (no crash, no deadlock at exit), print one
 * "Dumping heap profile to PREFIX.0001.heap (Exiting, ...)" line, and leave
 * that file whole and nothing else.
 */
#include <stdint.h>

#include "tests/lib/rel_util.h"
#include "include/heapalloc.h"

#define RUNS 10

static void *busy(void *arg)
{
	uintptr_t s = (uintptr_t)arg;
	void *keep[64] = { 0 };
	for (unsigned i = 0;; i++) {
		unsigned k = i % 64;
		free(keep[k]);
		keep[k] = malloc((s * 2654435761u + i * 40503u) % 9000 + 1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "child")) {
		alarm(20);               /* a hang at exit dies, it does not linger */
		pthread_t t;
		for (int i = 0; i < 8; i++)
			pthread_create(&t, NULL, busy, (void *)(uintptr_t)(i + 1));
		usleep(100 * 1000);
		printf("child done\n");
		return 0;                /* exit() with the threads still running */
	}
	rel_watchdog(60, "rel_exit_race");
	char dir[512], prefix[600], out[700], f[700], env[700];
	for (int run = 0; run < RUNS; run++) {
		rel_mkdtemp(dir, sizeof dir, "relexit");
		snprintf(prefix, sizeof prefix, "%s/p", dir);
		snprintf(out, sizeof out, "%s.err", dir);
		snprintf(env, sizeof env, "HEAPPROFILE=%s", prefix);
		fflush(NULL);
		pid_t pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0) {
			int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			dup2(fd, 2);
			dup2(fd, 1);
			char *envp[] = { env, "HEAP_PROFILE_SAMPLE_INTERVAL=4096",
					 "HEAP_PROFILE_ALLOCATION_INTERVAL=0", "HEAP_PROFILE_INUSE_INTERVAL=0", NULL };
			execle("/proc/self/exe", argv[0], "child", (char *)NULL, envp);
			_exit(127);
		}
		int st;
		REQUIRE(waitpid(pid, &st, 0) == pid);
		char *log = rel_slurp(out, NULL);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "run %d: child status %#x (%s), want exit 0; its output:\n%.2000s\n",
				run, st, WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "exit", log ? log : "");
			ck_failures++;
		}
		snprintf(f, sizeof f, "%s.0001.heap", prefix);
		int lines = log ? rel_count_lines(log, "Dumping heap profile to ", f, "(Exiting, ",
						  (char *)NULL) : 0;
		CHECK_EQ(lines, 1);
		CHECK(log && strstr(log, "child done\n"));
		CHECK(rel_profile_whole(f));
		CHECK_EQ(rel_count_files(dir, NULL), 2);     /* and p.log */
		char logp[700], last[64];
		snprintf(logp, sizeof logp, "%s.log", prefix);
		CHECK_EQ(rel_log_lines(logp, last, sizeof last), 1);
		CHECK_EQ(strcmp(last, "p.0001.heap"), 0);
		free(log);
		unlink(out);
		rel_rmtree(dir);
		if (ck_failures)
			break;
	}
	return CHECK_DONE();
}
