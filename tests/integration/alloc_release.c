/* alloc_release — memory freed is given back without being asked: after a
 * burst in which 8 threads each allocate ~150 MB of mixed small blocks
 * (8 B .. 32 KiB, every byte touched) and free them all, and the threads
 * have exited, resident memory is at once within 96 MiB of where it
 * started (the free spans kept resident for a program that allocates
 * again, and the caches), and after a quiet 1.2 s and a few more
 * allocations within 4 MiB of it, with no malloc_trim call; also after a
 * single-threaded burst of the same shape.  "At once" is the retention
 * policy's own bound (alloc/retain.h: the shared floor, all it may learn,
 * the transfer arrays) plus the bookkeeping the allocator reports, plus
 * 8 MiB for the caches' per-class lists, libc's and the threads' own; the
 * burst reaches the most it may learn, so the figure sits near the bound.  The quiet second gives back
 * what the burst left: the caches of classes and threads that went unused
 * for it, the page map's leaves and the span records that covered the
 * 1.2 GB it spread over, and mimalloc's segments; 2-3 MiB stay here (the
 * caches' shared idle floor, mimalloc's and libc's own), 12-20 MiB did
 * before.  glibc's malloc ends within ~9 MiB here.  It runs at the default
 * sampling, as users run it, then again in a child with sampling off.
 * Under heapalloc, the exited threads leave nothing cached behind at once:
 * no thread cache counted for them, and every block they held free outside
 * any cache (the bytes in use are back where they were). */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"
#include "alloc/retain.h"

enum { NT = 8, N = 60000 };

static void *burst(void *arg)
{
	void **v = calloc(N, sizeof *v);
	uint64_t r = 0x9E3779B97F4A7C15ull * ((uintptr_t)arg + 1);
	if (!v)
		return (void *)1;
	for (int i = 0; i < N; i++) {
		r ^= r << 13; r ^= r >> 7; r ^= r << 17;
		size_t n = 8 + r % (i % 10 == 0 ? 32760 : 2048);
		v[i] = malloc(n);
		if (!v[i])
			return (void *)1;
		memset(v[i], 1, n);
	}
	for (int i = 0; i < N; i++)
		free(v[i]);
	free(v);
	return NULL;
}

/* heapalloc's statistics into *s; 0 without heapalloc. */
static int read_stats(heapalloc_stats *s)
{
	void (*stats)(heapalloc_stats *) =
		(void (*)(heapalloc_stats *))dlsym(RTLD_DEFAULT, "heapalloc_get_stats");
	if (stats)
		stats(s);
	return stats != NULL;
}

/* In use in small spans, and the thread caches and their bytes; 0 without
 * heapalloc. */
static int small_books(long long *in_use, long long *caches, long long *cached)
{
	heapalloc_stats s;
	if (!read_stats(&s))
		return 0;
	*in_use = (long long)(s.small_span_bytes - s.small_free_bytes);
	*caches = (long long)s.thread_caches;
	*cached = (long long)s.thread_cache_bytes;
	return 1;
}

/* The allocator's own bookkeeping in KiB (span records, page map); 0
 * without heapalloc. */
static long meta_kib(void)
{
	heapalloc_stats s;
	return read_stats(&s) ? (long)(s.metadata_bytes >> 10) : 0;
}

/* The same program with sampling off, in a child: its exit status. */
static int run_off(char **argv)
{
	pid_t pid = fork();
	if (pid < 0)
		HARD_ERROR("fork");
	if (pid == 0) {
		/* this program's file (qemu-user answers for the guest's) */
		char self[4096];
		ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
		if (n <= 0)
			_exit(EXIT_HARD);
		self[n] = 0;
		setenv("HEAP_PROFILE_SAMPLE_INTERVAL", "0", 1);
		execv(self, argv);
		_exit(EXIT_HARD);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid)
		HARD_ERROR("waitpid");
	return WIFEXITED(st) ? WEXITSTATUS(st) : EXIT_HARD;
}

int main(int argc, char **argv)
{
	(void)argc;
	const char *iv = getenv("HEAP_PROFILE_SAMPLE_INTERVAL");
	int off = iv && !strcmp(iv, "0");
	fprintf(stderr, "sampling %s\n", off ? "off" : iv ? iv : "at the default");
	long base = rss_kib();
	if (base < 0)
		HARD_ERROR("cannot read VmRSS");
	CHECK(burst((void *)99) == NULL);
	long single = rss_kib();

	long long use0 = 0, caches0 = 0, cached0 = 0, use1 = 0, caches1 = 0, cached1 = 0;
	int books = small_books(&use0, &caches0, &cached0);
	pthread_t t[NT];
	for (long i = 0; i < NT; i++)
		if (pthread_create(&t[i], NULL, burst, (void *)i))
			HARD_ERROR("pthread_create");
	for (int i = 0; i < NT; i++) {
		void *res;
		pthread_join(t[i], &res);
		CHECK(res == NULL);
	}
	if (books) {
		/* each thread's cache held MiBs when it freed its blocks:
		 * stranded, they would still be out of the central cache (in
		 * use, or cached, by no live thread).  Bytes out of it are in
		 * use plus cached, whatever main's cache count (as of its last
		 * slow path) says of the split; pthread_create's and join's
		 * own blocks are a few hundred bytes. */
		small_books(&use1, &caches1, &cached1);
		fprintf(stderr, "small bytes out of the central cache %lld -> %lld, thread caches "
			"%lld -> %lld\n", use0 + cached0, use1 + cached1, caches0, caches1);
		CHECK_EQ(caches1, caches0);
		CHECK_LE(use1 + cached1, use0 + cached0 + 64 * 1024);
	}
	long multi = rss_kib();
	fprintf(stderr, "VmRSS: %ld KiB at start, %ld after a one-thread burst, %ld after an "
		"8-thread burst (all freed, no malloc_trim)\n", base, single, multi);
	long meta = meta_kib();
	/* under qemu-user the emulator's own per-thread state, as below */
	long keep = (long)((HA_KEEP_FLOOR + HA_KEEP_LEARN_MAX + HA_TRANSFER_MAX) >> 10) +
		    meta + 8 * 1024 + (ck_emulated() ? 8 * 1024 : 0);
	fprintf(stderr, "the policy's bound at once: %ld KiB, %ld of them the allocator's "
		"bookkeeping\n", keep, meta);
	CHECK_LE(single, base + keep);
	CHECK_LE(multi, base + keep);
	struct timespec quiet = { 1, 200000000 };
	nanosleep(&quiet, NULL);
	void *w[4096];
	for (int i = 0; i < 4096; i++)
		w[i] = malloc(48);
	for (int i = 0; i < 4096; i++)
		free(w[i]);
	long later = rss_kib();
	fprintf(stderr, "VmRSS: %ld KiB after 1.2 s quiet and a refill\n", later);
	/* under qemu-user the RSS holds the emulator's translated code too,
	 * which grows with each new path run (the quiet, the refill): 2-3 MiB
	 * more seen there, so 8 MiB of room */
	long emu = ck_emulated() ? 8 * 1024 : 0;
	CHECK_LE(later, base + 4 * 1024 + emu);
	if (!off)
		CHECK_EQ(run_off(argv), 0);
	return CHECK_DONE();
}
