/* tools/demo.c — heapalloc-demo: a small program whose heap has a known
 * shape, for tools/demo (HEAPPROFILE=... then go tool pprof -top).
 *
 *   cache_insert      keeps 40 MB  (20 000 x 2 000 B)     the leak
 *   parse_request     keeps 12 MB  (3 000 x 4 000 B) and churns 200 MB
 *   build_index       keeps  8 MB  (one 8 MB table, C-style realloc growth)
 *   log_line          keeps  0     (churns 50 MB of 256 B lines)
 *   worker_session    keeps  6 MB  (4 threads x 1 500 x 1 000 B)
 *
 * Sampled every 512 KiB (tools/demo sets it; the default is 2 MiB), so
 * pprof's numbers are estimates within a few percent for sites this large.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile sink;

struct entry { struct entry *next; char data[2000 - sizeof(void *)]; };
static struct entry *cache;
static void **requests;
static char *table;

__attribute__((noinline)) static void cache_insert(int i)
{
	struct entry *e = malloc(sizeof *e);
	if (!e)
		exit(1);
	e->data[0] = (char)i;
	e->next = cache;
	cache = e;
}

__attribute__((noinline)) static void *parse_request(int keep)
{
	char *buf = malloc(4000);
	if (!buf)
		exit(1);
	memset(buf, 'r', 64);
	if (keep)
		return buf;
	free(buf);
	return NULL;
}

__attribute__((noinline)) static void build_index(void)
{
	size_t cap = 4096;
	table = malloc(cap);
	while (cap < 8u << 20) {
		cap *= 2;
		char *t = realloc(table, cap);
		if (!t)
			exit(1);
		table = t;
	}
	memset(table, 0, 4096);
}

__attribute__((noinline)) static void log_line(int i)
{
	char *line = malloc(256);
	if (!line)
		exit(1);
	snprintf(line, 256, "request %d handled", i);
	sink = line;
	free(line);
}

__attribute__((noinline)) static void *worker_session(void *arg)
{
	void **mine = arg;
	for (int i = 0; i < 1500; i++)
		mine[i] = malloc(1000);
	return NULL;
}

int main(void)
{
	requests = malloc(3000 * sizeof *requests);
	for (int i = 0; i < 20000; i++)
		cache_insert(i);
	for (int i = 0; i < 53000; i++) {
		void *r = parse_request(i % 50000 < 3000 && i < 3000);
		if (r)
			requests[i] = r;
	}
	build_index();
	for (int i = 0; i < 200000; i++)
		log_line(i);
	pthread_t t[4];
	static void *sessions[4][1500];
	for (int i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, worker_session, sessions[i]) != 0)
			return 1;
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	printf("heapalloc-demo: kept ~66 MB at five call sites\n");
	return 0;
}
