/* dumpstall — how long an allocating thread stalls while a large profile is
 * dumped.  Run under heapalloc with profiling on (make bench-stall does):
 * first 65536 distinct stacks fill the stack table, then two threads malloc/free random
 * 16 B - 4 KiB blocks, timing every iteration, while the main thread calls
 * HeapProfilerDump every 50 ms.  The same loop without dumps first gives the
 * machine's own noise.  make bench-stall turns the threshold dumps off
 * (these threads cross the allocation interval many times a second, and the
 * helper thread would be writing the whole table all the time), so only the
 * main thread's dumps are measured.  Prints "key value" lines: lines in the profile,
 * median dump time, and each phase's longest iteration and 99.99th
 * percentile (microseconds).
 * With HEAP_PROFILE_HTTP_ADDR_FILE naming the address HEAP_PROFILE_HTTP
 * bound (make bench-stall sets both), two more phases: "scraped", where the
 * main thread fetches /debug/pprof/heap every 50 ms (the helper thread
 * builds each one), and "attacked", where every 50 ms it sends junk, a 1 MB
 * header, opens 10 more half-open connections (50 at most) and makes 20
 * requests in a row, so the stalls beside a dump, a scrape and an attack
 * are measured on one table in one run.
 */
#include "bench.h"
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

#define THREADS 2
#define SAMPLES (1 << 22)

typedef void (*leaf_fn)(size_t);
static void *volatile keep_sink;

#define LEAF(k) \
	__attribute__((noinline)) static void leaf##k(size_t n) \
	{ void *p = malloc(n + k); keep_sink = p; }
LEAF(0) LEAF(1) LEAF(2) LEAF(3) LEAF(4) LEAF(5) LEAF(6) LEAF(7)
LEAF(8) LEAF(9) LEAF(10) LEAF(11) LEAF(12) LEAF(13) LEAF(14) LEAF(15)
static const leaf_fn leaves[16] = { leaf0, leaf1, leaf2, leaf3, leaf4, leaf5, leaf6, leaf7,
				    leaf8, leaf9, leaf10, leaf11, leaf12, leaf13, leaf14, leaf15 };

/* Two call paths per level: the bits of `path` pick one at each of `d`
 * levels, so 2^d distinct stacks reach each leaf. */
__attribute__((noipa)) static void desc_b(unsigned path, int d, int leaf, size_t n);
__attribute__((noipa)) static void desc_a(unsigned path, int d, int leaf, size_t n)
{
	if (d == 0)
		leaves[leaf](n);
	else if (path & 1)
		desc_a(path >> 1, d - 1, leaf, n);
	else
		desc_b(path >> 1, d - 1, leaf, n);
	__asm__ volatile("" ::: "memory");   /* not a tail call */
}

__attribute__((noipa)) static void desc_b(unsigned path, int d, int leaf, size_t n)
{
	if (d == 0)
		leaves[leaf](n);
	else if (path & 1)
		desc_a(path >> 1, d - 1, leaf, n);
	else
		desc_b(path >> 1, d - 1, leaf, n);
	__asm__ volatile("" ::: "memory");
}

static void descend_top(unsigned path, int leaf)
{
	desc_a(path, 12, leaf, (size_t)4 << 20);
	free(keep_sink);
}

static volatile int phase_running;
static float gaps[THREADS][SAMPLES];
static long ngaps[THREADS];

static void *churn(void *arg)
{
	int t = (int)(intptr_t)arg;
	uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(t + 1);
	long k = 0;
	double last = bench_now();
	while (__atomic_load_n(&phase_running, __ATOMIC_ACQUIRE)) {
		void *p = malloc(bench_range(&seed, 16, 4096));
		*(volatile char *)p = 1;
		free(p);
		double now = bench_now();
		if (k < SAMPLES)
			gaps[t][k++] = (float)((now - last) * 1e6);
		last = now;
	}
	ngaps[t] = k;
	return NULL;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* ---- the HTTP client of the scraped and attacked phases ------------------ */
static struct sockaddr_in http_sa;
static int half_open[50], nhalf;

static int http_connect(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&http_sa, sizeof http_sa) != 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Send req, read the answer to EOF; its bytes (-1: no connection). */
static long http_exchange(const char *req, size_t n)
{
	int fd = http_connect();
	if (fd < 0)
		return -1;
	static char buf[1 << 16];
	long got = 0;
	if (send(fd, req, n, MSG_NOSIGNAL) >= 0)
		for (ssize_t k; (k = recv(fd, buf, sizeof buf, 0)) > 0;)
			got += k;
	close(fd);
	return got;
}

static const char get_heap[] = "GET /debug/pprof/heap HTTP/1.1\r\nHost: b\r\n\r\n";
static long scrape_bytes;

static void scrape(const char *why)
{
	(void)why;
	scrape_bytes = http_exchange(get_heap, sizeof get_heap - 1);
}

static void attack(const char *why)
{
	(void)why;
	static char junk[4096], *big;
	for (size_t i = 0; i < sizeof junk - 4; i++)
		junk[i] = (char)(i * 131 + 7);
	memcpy(junk + sizeof junk - 4, "\r\n\r\n", 4);   /* a head, of junk: 400 at once */
	http_exchange(junk, sizeof junk);
	if (!big && (big = malloc(1 << 20))) {
		memset(big, 'a', 1 << 20);
		memcpy(big, "GET /debug/pprof/heap HTTP/1.1\r\nX-Big: ", 39);
	}
	if (big) {
		int fd = http_connect();     /* as much of it as goes before the 431 */
		if (fd >= 0) {
			fcntl(fd, F_SETFL, O_NONBLOCK);
			send(fd, big, 1 << 20, MSG_NOSIGNAL);
			usleep(1000);
			close(fd);
		}
	}
	for (int i = 0; i < 10 && nhalf < 50; i++) {
		int fd = http_connect();
		if (fd >= 0 && send(fd, "GET /debug/pprof/heap HTTP/1.1\r\nHo", 35, MSG_NOSIGNAL) >= 0)
			half_open[nhalf++] = fd;
	}
	static const char idx[] = "GET /debug/pprof/ HTTP/1.1\r\n\r\n";
	for (int i = 0; i < 20; i++)
		http_exchange(idx, sizeof idx - 1);
}

/* HEAP_PROFILE_HTTP_ADDR_FILE's 127.0.0.1:PORT into http_sa; 0 when absent. */
static int http_setup(void)
{
	const char *f = getenv("HEAP_PROFILE_HTTP_ADDR_FILE");
	FILE *in = f ? fopen(f, "r") : NULL;
	unsigned a, b, c, d, port;
	int ok = in && fscanf(in, "%u.%u.%u.%u:%u", &a, &b, &c, &d, &port) == 5;
	if (in)
		fclose(in);
	if (!ok)
		return 0;
	http_sa.sin_family = AF_INET;
	http_sa.sin_port = htons((uint16_t)port);
	http_sa.sin_addr.s_addr = htonl(a << 24 | b << 16 | c << 8 | d);
	return 1;
}

/* One phase of `ms` milliseconds; dump every 50 ms when dump != NULL. */
static void phase(const char *name, int ms, void (*dump)(const char *))
{
	pthread_t th[THREADS];
	__atomic_store_n(&phase_running, 1, __ATOMIC_RELEASE);
	for (int t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, churn, (void *)(intptr_t)t);
	double dts[64];
	int nd = 0;
	for (int waited = 0; waited < ms; waited += 50) {
		usleep(50000);
		if (dump && nd < 64) {
			double t0 = bench_now();
			dump("dumpstall");
			dts[nd++] = (bench_now() - t0) * 1e3;
		}
	}
	__atomic_store_n(&phase_running, 0, __ATOMIC_RELEASE);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	float worst = 0, p9999 = 0;
	for (int t = 0; t < THREADS; t++) {
		qsort(gaps[t], (size_t)ngaps[t], sizeof(float), cmp_float);
		if (ngaps[t] && gaps[t][ngaps[t] - 1] > worst)
			worst = gaps[t][ngaps[t] - 1];
		float q = ngaps[t] ? gaps[t][(long)(ngaps[t] * 0.9999)] : 0;
		if (q > p9999)
			p9999 = q;
	}
	printf("%s_stall_max_us %.0f\n%s_stall_p9999_us %.1f\n", name, worst, name, p9999);
	if (nd) {
		double s = 0, mx = 0;
		for (int i = 0; i < nd; i++) {
			s += dts[i];
			mx = dts[i] > mx ? dts[i] : mx;
		}
		if (!strcmp(name, "dumping"))
			printf("dumps %d\ndump_ms_mean %.2f\ndump_ms_max %.2f\n", nd, s / nd, mx);
		else
			printf("%s_calls %d\n%s_ms_mean %.2f\n%s_ms_max %.2f\n", name, nd, name,
			       s / nd, name, mx);
	}
}

int main(int argc, char **argv)
{
	double scale = bench_scale(argc, argv);
	void (*dump)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, "HeapProfilerDump");
	bench_print_allocator();
	if (!dump || !getenv("HEAPPROFILE")) {
		fprintf(stderr, "dumpstall: run under heapalloc with HEAPPROFILE set\n");
		return 2;
	}
	/* fill the table: 4096 paths x 16 leaves of 4 MiB blocks (sampled
	 * every time at the default interval), each freed at once */
	long lines = 0;
	for (unsigned path = 0; path < 4096; path++)
		for (int l = 0; l < 16; l++, lines++) {
			descend_top(path, l);
		}
	printf("stacks %ld\n", lines);
	int ms = (int)(2000 * scale);
	if (ms < 400)
		ms = 400;
	phase("nodump", ms, NULL);
	phase("dumping", ms, dump);
	if (http_setup()) {
		phase("scraped", ms, scrape);
		printf("scrape_bytes %ld\n", scrape_bytes);
		phase("attacked", ms, attack);
		for (int i = 0; i < nhalf; i++)
			close(half_open[i]);
	}
	return 0;
}
