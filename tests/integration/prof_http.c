/* tests/integration/prof_http.c — a program served over HEAP_PROFILE_HTTP
 * (tests/integration/prof_http*.sh).  Every call site is a noinline function with a
 * unique name and known bytes, so go tool pprof on the URL can be checked
 * site by site (run with HEAP_PROFILE_SAMPLE_INTERVAL=1).  It reads
 * commands from stdin, one a line, and prints one line per command done:
 *   window   http_window keeps 100 x 3000 bytes; http_keep frees its first 100
 *   fork     fork a child that outlives this process by 1.5 s (and must
 *            not hold the listening socket)
 *   spawn    run this program again ("env": an exec'd descendant) and wait
 *   api PFX  heapalloc_profile_dump (the endpoint's session has no files),
 *            heapalloc_profile_start(PFX), http_after keeps 50 x 4000 bytes,
 *            heapalloc_profile_dump again; prints both return codes
 * At end of input it prints "bye" and exits 0.  Other output: none.
 * "prof_http env" prints whether HEAPALLOC_HTTP_ROOT is in its environment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "heapalloc.h"

void http_new(int n);          /* prof_http_cxx.cc: n x new char[5000], kept */

void *volatile sink;
void *keep[100000];

__attribute__((noinline)) void http_keep(int n)
{
	for (int i = 0; i < n; i++)
		keep[i] = malloc(1000);
}

__attribute__((noinline)) void http_free(int n)
{
	for (int i = 0; i < n; i++) {
		sink = malloc(2000);
		free(sink);
	}
}

__attribute__((noinline)) void http_window(int n)
{
	for (int i = 0; i < n; i++)
		keep[10000 + i] = malloc(3000);
	for (int i = 0; i < 100; i++) {
		free(keep[i]);
		keep[i] = NULL;
	}
}

__attribute__((noinline)) void http_after(int n)
{
	for (int i = 0; i < n; i++)
		keep[20000 + i] = malloc(4000);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "env")) {
		printf("child: HEAPALLOC_HTTP_ROOT %s\n",
		       getenv("HEAPALLOC_HTTP_ROOT") ? "set" : "unset");
		return 0;
	}
	http_keep(1000);
	http_free(500);
	http_new(200);
	char line[64];
	while (fgets(line, sizeof line, stdin)) {
		if (!strcmp(line, "window\n")) {
			http_window(100);
			printf("window done\n");
		} else if (!strcmp(line, "fork\n")) {
			fflush(stdout);
			pid_t c = fork();
			if (c == 0) {
				struct timespec t = { 1, 500000000 };
				nanosleep(&t, NULL);
				_exit(0);
			}
			printf("forked %s\n", c > 0 ? "ok" : "failed");
		} else if (!strncmp(line, "api ", 4)) {
			line[strcspn(line, "\n")] = 0;
			int before = heapalloc_profile_dump("no files");
			int started = heapalloc_profile_start(line + 4);
			http_after(50);
			printf("api dump %d start %d dump %d\n", before, started,
			       heapalloc_profile_dump("api"));
		} else if (!strcmp(line, "spawn\n")) {
			fflush(stdout);
			pid_t c = fork();
			if (c == 0) {
				execl("/proc/self/exe", argv[0], "env", (char *)NULL);
				_exit(127);
			}
			int st = -1;
			waitpid(c, &st, 0);
			printf("spawned %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		}
		fflush(stdout);
	}
	printf("bye\n");
	return 0;
}
