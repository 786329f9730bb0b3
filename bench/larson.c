/* larson — a server's churn in the manner of Larson and Krishnan's benchmark:
 * worker threads replace random objects and are retired and replaced.
 *
 * LANES lanes (argv[2], default 2) run at once.  A lane owns an array of
 * SLOTS objects of 10–1000 B (about 500 B on average).  Its current thread
 * replaces random slots ROUNDS times — free the old object, malloc a new one
 * of a random size, write its ends — then creates the lane's next thread,
 * hands it the array and exits.  So threads are created and retired all the
 * time, and a new thread's first frees are of blocks its predecessor
 * allocated (remote frees into a cache that has gone away).
 * Prints "ops_per_sec <replacements per second, all lanes>" and "threads <N>".
 * argv[1]: scale in percent.
 */
#include "bench.h"
#include <pthread.h>

#define SLOTS 1000
#define ROUNDS 4000
#define MAX_LANES 16

struct lane {
	char *slot[SLOTS];
	uint64_t seed;
	long gens_left;
	long bad;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t all_done = PTHREAD_COND_INITIALIZER;
static int lanes_left;
static long threads_made;

static void spawn(struct lane *l);

static char *fresh(struct lane *l)
{
	size_t sz = bench_range(&l->seed, 10, 1000);
	char *p = malloc(sz);
	p[0] = 'L';
	p[sz - 1] = 'R';
	return p;
}

static void *worker(void *arg)
{
	struct lane *l = arg;
	for (int r = 0; r < ROUNDS; r++) {
		unsigned i = (unsigned)(bench_rand(&l->seed) % SLOTS);
		l->bad += l->slot[i][0] != 'L';
		free(l->slot[i]);
		l->slot[i] = fresh(l);
	}
	if (--l->gens_left > 0) {
		spawn(l);
		return NULL;
	}
	for (int i = 0; i < SLOTS; i++)
		free(l->slot[i]);
	pthread_mutex_lock(&lock);
	lanes_left--;
	pthread_cond_signal(&all_done);
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* The lane's next thread, detached: nobody joins a retired worker. */
static void spawn(struct lane *l)
{
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, worker, l) != 0) {
		fprintf(stderr, "larson: pthread_create failed\n");
		exit(1);
	}
	pthread_attr_destroy(&attr);
	pthread_mutex_lock(&lock);
	threads_made++;
	pthread_mutex_unlock(&lock);
}

int main(int argc, char **argv)
{
	static struct lane lane[MAX_LANES];
	int nlanes = argc > 2 ? atoi(argv[2]) : 2;
	if (nlanes < 1 || nlanes > MAX_LANES)
		nlanes = 2;
	long gens = (long)(250 * bench_scale(argc, argv));
	if (gens < 2)
		gens = 2;
	bench_print_allocator();
	for (int k = 0; k < nlanes; k++) {
		lane[k].seed = 0xA0761D6478BD642FULL * (uint64_t)(k + 1);
		lane[k].gens_left = gens;
		for (int i = 0; i < SLOTS; i++)
			lane[k].slot[i] = fresh(&lane[k]);
	}
	lanes_left = nlanes;
	double t0 = bench_now();
	for (int k = 0; k < nlanes; k++)
		spawn(&lane[k]);
	pthread_mutex_lock(&lock);
	while (lanes_left > 0)
		pthread_cond_wait(&all_done, &lock);
	pthread_mutex_unlock(&lock);
	double t = bench_now() - t0;
	long bad = 0;
	for (int k = 0; k < nlanes; k++)
		bad += lane[k].bad;
	if (bad) {
		fprintf(stderr, "larson: %ld objects had a wrong tag\n", bad);
		return 1;
	}
	printf("threads %ld\n", threads_made);
	printf("ops_per_sec %.0f\n", (double)gens * ROUNDS * nlanes / t);
	return 0;
}
