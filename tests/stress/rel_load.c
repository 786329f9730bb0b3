/* tests/stress/rel_load.c — 64 threads on 2 CPUs hammer malloc/free/realloc for
 * about 3 seconds, under HEAPPROFILE with a 4 KiB sampling interval and a
 * dump every 10 MB allocated.  Blocks travel between threads through a
 * shared mailbox (an atomic exchange), so most frees are cross-thread;
 * every byte of every block is checked against its pattern before it is
 * freed or after it is realloc'ed.  Fails on any corrupted byte, on a hang
 * (alarm watchdog), on unbounded growth and on a dump that is not whole.
 * Growth: VmRSS after 1.5 s vs at 3 s < 96 MiB (the threads allocate about
 * 1 GB in that window, so leaking a tenth of it fails; the thread caches
 * are still warming up, which costs ~40-60 MiB here), VmRSS < 1 GiB in all,
 * the profiler's own memory at most double plus 1 MiB.
 * The run prints the allocator's statistics for the record.
 */
#include "tests/lib/rel_util.h"

#include <sched.h>
#include <stdint.h>
#include <time.h>

#include "include/heapalloc.h"

#define NTHREADS 64
#define NBOX 4096
#define RUN_MS 3000

typedef struct blk {
	uint64_t size;      /* bytes of the whole block, header included */
	uint64_t seed;
} blk;

static blk *volatile box[NBOX];
static volatile int stop;
static uint64_t corrupt, ops, reallocs;

static inline unsigned char pat(uint64_t seed, size_t i)
{
	return (unsigned char)((seed >> (i % 8 * 8)) + i * 131);
}

static void fill(blk *b, size_t size, uint64_t seed)
{
	b->size = size;
	b->seed = seed;
	unsigned char *p = (unsigned char *)b;
	for (size_t i = sizeof *b; i < size; i++)
		p[i] = pat(seed, i);
}

/* Verify bytes [sizeof blk, upto). */
static int verify(const blk *b, size_t upto)
{
	const unsigned char *p = (const unsigned char *)b;
	for (size_t i = sizeof *b; i < upto; i++)
		if (p[i] != pat(b->seed, i))
			return 0;
	return 1;
}

static void check_free(blk *b)
{
	if (!b)
		return;
	if (b->size < sizeof *b || b->size > (1 << 20) || !verify(b, b->size))
		__atomic_fetch_add(&corrupt, 1, __ATOMIC_RELAXED);
	free(b);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static size_t pick_size(uint64_t r)
{
	unsigned k = (unsigned)(r % 100);
	if (k < 80)
		return sizeof(blk) + (size_t)(r >> 8) % 512;
	if (k < 98)
		return sizeof(blk) + (size_t)(r >> 8) % 16384;
	return sizeof(blk) + (size_t)(r >> 8) % 200000;    /* large blocks */
}

static void *hammer(void *arg)
{
	uint64_t s = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
	blk *mine[16] = { 0 };
	uint64_t n = 0;
	while (!stop) {
		uint64_t r = xorshift(&s);
		unsigned k = (unsigned)(r >> 40) % 16;
		switch (r % 4) {
		case 0:
		case 1: {          /* new block, post it; free what was there */
			size_t size = pick_size(xorshift(&s));
			blk *b = malloc(size);
			if (!b) {
				__atomic_fetch_add(&corrupt, 1, __ATOMIC_RELAXED);
				break;
			}
			fill(b, size, xorshift(&s));
			blk *old = __atomic_exchange_n(&box[(r >> 16) % NBOX], b, __ATOMIC_ACQ_REL);
			check_free(old);
			break;
		}
		case 2: {          /* take a block from the mailbox into our hands */
			blk *b = __atomic_exchange_n(&box[(r >> 16) % NBOX], NULL, __ATOMIC_ACQ_REL);
			check_free(mine[k]);
			mine[k] = b;
			break;
		}
		case 3: {          /* realloc one of ours: the prefix survives */
			blk *b = mine[k];
			if (!b)
				break;
			size_t size = pick_size(xorshift(&s));
			size_t keep = size < b->size ? size : b->size;
			uint64_t seed = b->seed;
			blk *nb = realloc(b, size);
			if (!nb) {
				__atomic_fetch_add(&corrupt, 1, __ATOMIC_RELAXED);
				mine[k] = NULL;
				break;
			}
			nb->size = keep;
			if (nb->seed != seed || !verify(nb, keep))
				__atomic_fetch_add(&corrupt, 1, __ATOMIC_RELAXED);
			fill(nb, size, xorshift(&s));
			mine[k] = nb;
			__atomic_fetch_add(&reallocs, 1, __ATOMIC_RELAXED);
			break;
		}
		}
		n++;
	}
	for (int i = 0; i < 16; i++)
		check_free(mine[i]);
	__atomic_fetch_add(&ops, n, __ATOMIC_RELAXED);
	return NULL;
}

static void on_alarm(int s)
{
	(void)s;
	static const char m[] = "WATCHDOG: rel_load hung (deadlock?)\n";
	ssize_t w = write(2, m, sizeof m - 1);
	(void)w;
	_exit(1);
}

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	static char dir[512], env_p[600], env_d[600];
	if (!getenv("REL_CHILD")) {
		rel_mkdtemp(dir, sizeof dir, "relload");
		snprintf(env_p, sizeof env_p, "HEAPPROFILE=%s/p", dir);
		snprintf(env_d, sizeof env_d, "REL_DIR=%s", dir);
		rel_reexec(argv, env_p, env_d, "HEAP_PROFILE_SAMPLE_INTERVAL=4096",
			   "HEAP_PROFILE_ALLOCATION_INTERVAL=10485760", (char *)NULL);
	}
	(void)argc;
	snprintf(dir, sizeof dir, "%s", getenv("REL_DIR"));
	signal(SIGALRM, on_alarm);
	alarm(40);
	/* two CPUs: the first two this process may use */
	cpu_set_t cur, two;
	CPU_ZERO(&two);
	if (sched_getaffinity(0, sizeof cur, &cur) == 0) {
		for (int c = 0, n = 0; c < CPU_SETSIZE && n < 2; c++)
			if (CPU_ISSET(c, &cur)) {
				CPU_SET(c, &two);
				n++;
			}
		sched_setaffinity(0, sizeof two, &two);
	}
	REQUIRE(heapalloc_profile_running());

	pthread_t t[NTHREADS];
	long t0 = now_ms();
	for (int i = 0; i < NTHREADS; i++)
		REQUIRE(pthread_create(&t[i], NULL, hammer, (void *)(uintptr_t)(i + 1)) == 0);
	usleep(1500 * 1000);
	long rss_1s = rel_rss_kib();
	heapalloc_stats early;
	heapalloc_get_stats(&early);
	long run_ms = getenv("REL_LOAD_MS") ? atol(getenv("REL_LOAD_MS")) : RUN_MS;
	while (now_ms() - t0 < run_ms) {
		if (getenv("REL_LOAD_MS"))
			fprintf(stderr, "t=%ld ms VmRSS %ld KiB\n", now_ms() - t0, rel_rss_kib());
		usleep(50 * 1000);
	}
	long rss_end = rel_rss_kib();
	heapalloc_stats mid;
	heapalloc_get_stats(&mid);
	stop = 1;
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < NBOX; i++)
		check_free(box[i]);
	alarm(0);
	heapalloc_stats st;
	heapalloc_get_stats(&st);
	heapalloc_profile_stop();
	fprintf(stderr, "info: %llu ops, %llu reallocs in %ld ms; VmRSS %ld KiB at 1.5 s, %ld KiB "
		"at the end; %llu dumps, %llu samples, prof_memory %llu\n",
		(unsigned long long)ops, (unsigned long long)reallocs, now_ms() - t0,
		rss_1s, rss_end, (unsigned long long)st.prof_dumps,
		(unsigned long long)st.prof_samples, (unsigned long long)st.prof_memory);
	fprintf(stderr, "info: at the end of the run: small spans %llu MiB (%llu MiB free in "
		"them, %llu MiB in %llu thread caches), large %llu MiB in %llu blocks, "
		"metadata %llu KiB\n",
		(unsigned long long)mid.small_span_bytes >> 20,
		(unsigned long long)mid.small_free_bytes >> 20,
		(unsigned long long)mid.thread_cache_bytes >> 20,
		(unsigned long long)mid.thread_caches, (unsigned long long)mid.large_bytes >> 20,
		(unsigned long long)mid.large_blocks, (unsigned long long)mid.metadata_bytes >> 10);

	CHECK_EQ(corrupt, 0);
	/* progress, not speed (UBSan builds on a loaded CI machine run ~10x
	 * slower): a deadlock or a stall leaves far fewer */
	CHECK_GE(ops, 10000);
	CHECK_LE(rss_end - rss_1s, 96 * 1024);
	CHECK_LE(mid.prof_memory, 2 * early.prof_memory + (1 << 20));
	CHECK_LE(rss_end, 1024 * 1024);
	CHECK_GE(st.prof_dumps, 2);
	int files = rel_count_files(dir, ".heap");
	CHECK_GE(files, 2);
	CHECK_EQ(rel_count_files(dir, NULL), files + 1);  /* p.log; no temporaries */
	char logp[700];
	snprintf(logp, sizeof logp, "%s/p.log", dir);
	CHECK_EQ(rel_log_lines(logp, NULL, 0), files);
	DIR *d = opendir(dir);
	struct dirent *e;
	int whole = 0;
	while (d && (e = readdir(d))) {
		if (!strstr(e->d_name, ".heap"))
			continue;
		char p[1200];
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		whole += rel_profile_whole(p);
	}
	if (d)
		closedir(d);
	char peakp[700];
	snprintf(peakp, sizeof peakp, "%s/p.peak.heap", dir);
	CHECK_EQ(whole, files + (access(peakp, F_OK) == 0));   /* the peak is whole too */
	rel_rmtree(dir);
	return CHECK_DONE();
}
