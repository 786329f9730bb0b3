/* tests/integration/prof_peak.c — a heap whose peak is freed before exit
 * (tests/integration/prof_peak.sh reads PREFIX.peak.heap back through pprof).
 *   prof_peak A B        A blocks of 1 MiB at peak_site_a, all freed, then
 *                        B blocks at peak_site_b kept to exit
 *   prof_peak fork A B   the same in a fork child; the parent waits
 *   prof_peak map FILE H maps FILE, reads every page, mallocs H MiB at
 *                        heap_site and touches it, exits holding both
 *                        (tests/integration/prof_stats.sh: the stats explain the RSS)
 * Climbs to an exact peak of N bytes in blocks of B bytes at climb_site
 * (nothing else allocated: the pointers live in a static array), then
 * frees everything:
 *   prof_peak climb N B       one climb
 *   prof_peak saw N B         three rising teeth, 3/8 N down to 1/8 N,
 *                             3/4 N down to 1/2 N, then N
 *   prof_peak threads T N B   T threads climb N/T each; at the top (a
 *                             barrier) all free theirs at once
 * For tests/integration/prof_stats.sh, workloads whose stats must explain their RSS:
 *   prof_peak spike N B K     N bytes in blocks of B, every page written,
 *                             all freed but the first K bytes; exit
 *   prof_peak stacks T K      T threads each write K KiB of their stack,
 *                             then wait while main dumps ("stacks")
 */
#include <ctype.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/prof_util.h"

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

#define CLIMB_MAX (1 << 20)
static void *blocks[CLIMB_MAX];
static size_t nblocks, block_size;
static pthread_barrier_t top;

__attribute__((noinline)) void climb_site(size_t from, size_t to)
{
	for (size_t i = from; i < to; i++) {
		blocks[i] = malloc(block_size);
		memset(blocks[i], 5, block_size);
	}
}

static void drop(size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		free(blocks[i]);
}

struct part {
	size_t from, to;
};

static void *climber(void *arg)
{
	struct part *p = arg;
	climb_site(p->from, p->to);
	pthread_barrier_wait(&top);
	drop(p->from, p->to);
	return NULL;
}

/* kind: climb, saw or threads; 0, or 2 on bad arguments */
static int climb(const char *kind, int threads, long long n, long long b)
{
	if (b <= 0 || n <= 0 || n % b || n / b > CLIMB_MAX || threads < 1 || threads > 64 ||
	    (n / b) % (threads * 8))
		return 2;
	block_size = (size_t)b;
	nblocks = (size_t)(n / b);
	size_t k = nblocks;
	if (strcmp(kind, "climb") == 0) {
		climb_site(0, k);
		drop(0, k);
	} else if (strcmp(kind, "saw") == 0) {
		climb_site(0, k * 3 / 8);          /* tooth 1: 3/8 */
		drop(k / 8, k * 3 / 8);            /* down to 1/8 */
		climb_site(k / 8, k * 3 / 4);      /* tooth 2: 3/4 */
		drop(k / 2, k * 3 / 4);            /* down to 1/2 */
		climb_site(k / 2, k);              /* tooth 3: all */
		drop(0, k);
	} else if (strcmp(kind, "threads") == 0) {
		pthread_t t[64];
		struct part parts[64];
		pthread_barrier_init(&top, NULL, (unsigned)threads);
		for (int i = 0; i < threads; i++) {
			parts[i].from = k / threads * i;
			parts[i].to = k / threads * (i + 1);
			if (pthread_create(&t[i], NULL, climber, &parts[i]))
				return 3;
		}
		for (int i = 0; i < threads; i++)
			pthread_join(t[i], NULL);
	} else {
		return 2;
	}
	return 0;
}

static int spike(long long n, long long b, long long keep)
{
	if (b <= 0 || n < b || n / b > CLIMB_MAX || keep < 0 || keep > n)
		return 2;
	block_size = (size_t)b;
	nblocks = (size_t)(n / b);
	climb_site(0, nblocks);
	drop((size_t)(keep / b), nblocks);
	return 0;
}

static pthread_barrier_t stacks_up, stacks_done;
static int stack_kib;

__attribute__((noinline)) static void stack_touch(int kib)
{
	volatile char buf[4096];
	buf[0] = 1;
	if (kib > 4)
		stack_touch(kib - 4);
	buf[4095] = buf[0];
}

static void *stacker(void *arg)
{
	(void)arg;
	stack_touch(stack_kib);
	pthread_barrier_wait(&stacks_up);
	pthread_barrier_wait(&stacks_done);
	return NULL;
}

static int stacks(int t, int kib)
{
	if (t < 1 || t > 64 || kib < 4 || kib > 4096)
		return 2;
	pthread_t th[64];
	stack_kib = kib;
	pthread_barrier_init(&stacks_up, NULL, (unsigned)t + 1);
	pthread_barrier_init(&stacks_done, NULL, (unsigned)t + 1);
	for (int i = 0; i < t; i++)
		if (pthread_create(&th[i], NULL, stacker, NULL))
			return 3;
	pthread_barrier_wait(&stacks_up);
	int e = heapalloc_profile_dump("stacks");
	pthread_barrier_wait(&stacks_done);
	for (int i = 0; i < t; i++)
		pthread_join(th[i], NULL);
	return e ? 4 : 0;
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
	if (argc == 5 && strcmp(argv[1], "spike") == 0)
		return spike(atoll(argv[2]), atoll(argv[3]), atoll(argv[4]));
	if (argc == 4 && strcmp(argv[1], "stacks") == 0)
		return stacks(atoi(argv[2]), atoi(argv[3]));
	if (argc == 4 && strcmp(argv[1], "threads") != 0 && isalpha((unsigned char)argv[1][0]))
		return climb(argv[1], 1, atoll(argv[2]), atoll(argv[3]));
	if (argc == 5 && strcmp(argv[1], "threads") == 0)
		return climb(argv[1], atoi(argv[2]), atoll(argv[3]), atoll(argv[4]));
	if (argc != 3)
		return 2;
	int a = atoi(argv[1]), b = atoi(argv[2]);
	if (a < 0 || a > 256 || b < 0)
		return 2;
	run(a, b);
	return 0;
}
