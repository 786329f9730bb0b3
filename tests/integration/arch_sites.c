/* tests/integration/arch_sites.c — the program tests/integration/arch_profile.sh builds for both
 * architectures and profiles recording every allocation: call sites at
 * several depths (recursion, a frame with a variable-length array, a
 * callback through libc's qsort), two threads, calloc, realloc,
 * posix_memalign and frees, so that every kind of frame the stack
 * capture meets is on some stack.  No tail calls and no inlining: each
 * site is a frame of its own on both. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))
static void *volatile keep[8192];
static volatile int sink;

NOINLINE void *site_small(int i) { void *p = malloc(24 + (i & 7)); sink++; return p; }
NOINLINE void *site_big(void) { void *p = malloc(1 << 20); sink++; return p; }
NOINLINE void *site_calloc(int i) { void *p = calloc(10, 100 + (size_t)i); sink++; return p; }
NOINLINE void *site_realloc(void *p) { void *q = realloc(p, 5000); sink++; return q; }
NOINLINE void *site_aligned(void)
{
	void *p = NULL;
	if (posix_memalign(&p, 256, 3000))
		return NULL;
	sink++;
	return p;
}

NOINLINE void deep(int d, int i)
{
	if (d)
		deep(d - 1, i);
	else
		keep[i] = site_small(i);
	sink++;
}

NOINLINE void *site_vla(int n)
{
	volatile char v[n];
	v[0] = 1;
	void *p = malloc(700 + (size_t)v[0]);
	sink++;
	return p;
}

static int compared;
static int by_value(const void *a, const void *b)
{
	if (compared++ < 50)
		keep[7000 + compared] = malloc(48);
	return *(const int *)a - *(const int *)b;
}

NOINLINE void *thread_body(void *arg)
{
	int base = (int)(long)arg;
	for (int i = 0; i < 200; i++) {
		void *p = site_small(i);
		if (i & 1)
			free(p);
		else
			keep[base + i] = p;
	}
	return NULL;
}

int main(void)
{
	for (int i = 0; i < 1000; i++)
		deep(i % 7, i);
	for (int i = 1000; i < 1010; i++)
		keep[i] = site_big();
	for (int i = 1010; i < 1500; i++) {
		keep[i] = site_calloc(i);
		if (i & 1) {
			free(keep[i]);
			keep[i] = NULL;
		}
	}
	for (int i = 1500; i < 1600; i++)
		keep[i] = site_realloc(malloc(100));
	for (int i = 1600; i < 1700; i++)
		keep[i] = site_aligned();
	for (int i = 1700; i < 1800; i++)
		keep[i] = site_vla(16 + i % 64);
	int v[64];
	for (int i = 0; i < 64; i++)
		v[i] = (i * 37) % 64;
	qsort(v, 64, sizeof *v, by_value);
	pthread_t t[2];
	for (long k = 0; k < 2; k++)
		pthread_create(&t[k], NULL, thread_body, (void *)(2000 + 1000 * k));
	for (int k = 0; k < 2; k++)
		pthread_join(t[k], NULL);
	return 0;
}
