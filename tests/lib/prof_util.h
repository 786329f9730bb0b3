/* tests/lib/prof_util.h — helpers of the profiler's test programs.
 * rerun_self: for tests that need their options in the environment at
 * start-up (heapalloc reads them once): run this program again as
 * "argv0 DIR ARG" with HEAP_PROFILE_SAMPLE_INTERVAL=ARG and the given
 * variables (name, value pairs, NULL-terminated), and wait for it.
 * dumps_settle: one dump per threshold crossing, see below. */
#ifndef HA_TESTS_PROF_UTIL_H
#define HA_TESTS_PROF_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "heapalloc.h"

/* In the default mode the profiler's helper thread writes a threshold dump
 * a moment after the crossing, and a crossing while one is queued folds
 * into it.  A workload that calls this after each allocation or free waits
 * (at most 10 s) until the helper has written what is queued, so it gets
 * one dump per crossing, as the crossing thread's own dumps would be.
 * PROF_RUSH=1 in the environment turns the wait off (the fold test). */
static inline void dumps_settle(void)
{
	static int rush = -1;
	if (rush < 0) {
		const char *r = getenv("PROF_RUSH");
		rush = r && r[0] == '1';
	}
	for (int i = 0; !rush && i < 10000; i++) {
		heapalloc_stats st;
		heapalloc_get_stats(&st);
		if (!st.prof_dumps_queued)
			return;
		struct timespec t = { 0, 1000000 };
		nanosleep(&t, NULL);
	}
}

/* 1 when the run exited 0; otherwise says so on stderr. */
static __attribute__((unused)) int rerun_self(char *argv0, const char *dir, const char *interval,
		      const char *const *env)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return 0;
	if (pid == 0) {
		setenv("HEAP_PROFILE_SAMPLE_INTERVAL", interval, 1);
		for (int i = 0; env[i] && env[i + 1]; i += 2)
			setenv(env[i], env[i + 1], 1);
		char *args[] = { argv0, (char *)dir, (char *)interval, NULL };
		execv("/proc/self/exe", args);
		_exit(98);
	}
	int st = 0;
	if (waitpid(pid, &st, 0) != pid)
		return 0;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 1;
	fprintf(stderr, "FAIL: the run at interval %s", interval);
	for (int i = 0; env[i] && env[i + 1]; i += 2)
		fprintf(stderr, " %s=%s", env[i], env[i + 1]);
	fprintf(stderr, ": status %#x\n", st);
	return 0;
}

/* Remove the runs' directory; 1 on success. */
static __attribute__((unused)) int remove_dir(const char *dir)
{
	char cmd[400];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) == 0;
}

#endif
