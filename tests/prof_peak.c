/* tests/prof_peak.c — a heap whose peak is freed before exit
 * (tests/prof_peak.sh reads PREFIX.peak.heap back through pprof).
 *   prof_peak A B        A blocks of 1 MiB at peak_site_a, all freed, then
 *                        B blocks at peak_site_b kept to exit
 *   prof_peak fork A B   the same in a fork child; the parent waits
 *   prof_peak map FILE H maps FILE, reads every page, mallocs H MiB at
 *                        heap_site and touches it, exits holding both
 *                        (tests/prof_stats.sh: the stats explain the RSS)
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/prof_util.h"

#define MIB (1024 * 1024)

static char *held[256];
void *volatile sink;

__attribute__((noinline)) void peak_site_a(int n)
{
	for (int i = 0; i < n; i++) {
		held[i] = malloc(MIB);
		held[i][0] = 1;
		dumps_settle();
	}
}

__attribute__((noinline)) void peak_site_b(int n)
{
	for (int i = 0; i < n; i++) {
		char *p = malloc(MIB);
		p[0] = 2;
		sink = p;             /* kept to exit */
	}
}

__attribute__((noinline)) void heap_site(int mib)
{
	char *p = malloc((size_t)mib * MIB);
	if (p)
		memset(p, 3, (size_t)mib * MIB);
	sink = p;
}

static int map_file(const char *path, int mib)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0)
		return 4;
	volatile const char *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return 5;
	unsigned sum = 0;
	for (off_t i = 0; i < st.st_size; i += 4096)
		sum += m[i];
	heap_site(mib);
	return sum == 0 ? 0 : 6;          /* the file is zeros */
}

static void run(int a, int b)
{
	peak_site_a(a);
	for (int i = 0; i < a; i++)
		free(held[i]);
	peak_site_b(b);
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "fork") == 0) {
		pid_t pid = fork();
		if (pid < 0)
			return 2;
		if (pid == 0) {
			run(atoi(argv[2]), atoi(argv[3]));
			exit(0);
		}
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			return 3;
		return 0;
	}
	if (argc == 4 && strcmp(argv[1], "map") == 0)
		return map_file(argv[2], atoi(argv[3]));
	if (argc != 3)
		return 2;
	int a = atoi(argv[1]), b = atoi(argv[2]);
	if (a < 0 || a > 256 || b < 0)
		return 2;
	run(a, b);
	return 0;
}
