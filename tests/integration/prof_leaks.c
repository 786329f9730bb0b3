/* tests/integration/prof_leaks.c — a heap whose leaks are known by construction, for
 * tests/integration/prof_leaks.sh (`heapalloc leaks PID`).  Blocks of 4000 bytes (every
 * one sampled at HEAP_PROFILE_SAMPLE_INTERVAL=64):
 *   leak_site    10 blocks whose pointers were dropped          leaked
 *   cycle_site   2 blocks pointing at each other, nothing else  leaked
 *   cache_site   10 blocks in a global array                    kept
 *   inner_site   5 blocks known only by a pointer into their middle
 *   packed_site  5 blocks known only from a packed struct (unaligned)
 *   chain_site   a list of 6 blocks, the head in a global, each
 *                the next's only holder
 *   stack_site   5 blocks known only to a thread's stack frame
 *   last_site    3 blocks of 3000 bytes, the last of their size class
 *                taken, their pointers dropped                  leaked
 *                (every allocation sampled, HEAP_PROFILE_SAMPLE_INTERVAL=1,
 *                a sample has no header: the allocator's popped stack
 *                slots hold the very addresses the scan looks for)
 * With a second argument "freed", also (at exit: the scan there knows
 * which memory the allocator holds free):
 *   freed_site   2 blocks of 2000 bytes whose only pointers were left in
 *                48-byte blocks since freed (now in this thread's
 *                cache)                                         leaked
 *                (not of stdio's 4096-byte buffers' class: a FILE's
 *                buffer end points at the block after its buffer)
 * Writes "ready" to argv[1] and waits for stdin's end, then prints "done"
 * and exits 0 (the scan must not change either).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SZ 4000

/* extern and read at the end: stores the compiler cannot drop */
void *cache[10];
char *inner[5];                        /* p + 1000 */
struct __attribute__((packed)) {
	char tag;
	void *p[5];
} packed;
void **chain;
void *volatile sink;
static int pipefd[2];

/* a block of SZ bytes with no stale pointers inside, allocated in the
 * site's own frame (pprof's leaf) */
#define block() memset(malloc(SZ), 0x5a, SZ)

__attribute__((noinline)) static void leak_site(void)
{
	for (int i = 0; i < 10; i++)
		sink = block();
	sink = NULL;
}

__attribute__((noinline)) static void cycle_site(void)
{
	void **a = block(), **b = block();
	a[0] = b;
	b[0] = a;
	sink = NULL;
}

__attribute__((noinline)) static void cache_site(void)
{
	for (int i = 0; i < 10; i++)
		cache[i] = block();
}

__attribute__((noinline)) static void inner_site(void)
{
	for (int i = 0; i < 5; i++)
		inner[i] = (char *)block() + 1000;
}

__attribute__((noinline)) static void packed_site(void)
{
	for (int i = 0; i < 5; i++)
		packed.p[i] = block();
}

__attribute__((noinline)) static void chain_site(void)
{
	void **head = NULL;
	for (int i = 0; i < 6; i++) {
		void **n = block();
		n[0] = head;
		head = n;
	}
	chain = head;
}

__attribute__((noinline)) static void last_site(void)
{
	for (int i = 0; i < 3; i++)
		sink = memset(malloc(3000), 0x5a, 3000);
	sink = NULL;
}

/* A 48-byte block holds a new block's only pointer and is freed: free
 * leaves its bytes as they were (two at once: the second malloc(48) would
 * take the first back). */
__attribute__((noinline)) static void freed_site(void)
{
	void **h = malloc(48), **g = malloc(48);
	h[0] = memset(malloc(2000), 0x5a, 2000);
	g[0] = memset(malloc(2000), 0x5a, 2000);
	free(h);
	free(g);
}

/* Zero the dead frames below main's: the sites' malloc calls (the sample
 * path runs deep) leave the blocks' addresses there, and the at-exit scan
 * reads the frames the exit path builds over them, which need not write
 * every slot before it runs. */
__attribute__((noinline)) static void scrub_stack(void)
{
	volatile char pad[256 << 10];
	memset((char *)pad, 0, sizeof pad);
	__asm__ volatile("" : : "r"(pad) : "memory");
}

__attribute__((noinline)) static void stack_site(void **held)
{
	for (int i = 0; i < 5; i++)
		held[i] = block();
}

static void *holder(void *arg)
{
	void *volatile held[5];
	stack_site((void **)held);
	char c;
	(void)arg;
	/* blocked in read until main is done: the only holder of the five */
	if (read(pipefd[0], &c, 1) < 0)
		return NULL;
	return held[0];
}

int main(int argc, char **argv)
{
	if (argc != 2 && !(argc == 3 && !strcmp(argv[2], "freed"))) {
		fprintf(stderr, "usage: prof_leaks READY [freed]\n");
		return 2;
	}
	if (pipe(pipefd) != 0)
		return 3;
	pthread_t t;
	if (pthread_create(&t, NULL, holder, NULL) != 0)
		return 4;
	leak_site();
	cycle_site();
	cache_site();
	inner_site();
	packed_site();
	chain_site();
	last_site();
	if (argc == 3)
		freed_site();
	scrub_stack();
	FILE *r = fopen(argv[1], "w");
	if (!r || fputs("ready\n", r) < 0 || fclose(r) != 0)
		return 5;
	while (getchar() != EOF)
		;
	if (write(pipefd[1], "x", 1) != 1)
		return 6;
	void *got;
	pthread_join(t, &got);
	int ok = got != NULL && chain != NULL;
	for (int i = 0; i < 10; i++)
		ok &= cache[i] != NULL && (i >= 5 || (inner[i] != NULL && packed.p[i] != NULL));
	printf("done %d\n", ok);
	return 0;
}
