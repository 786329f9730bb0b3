/* tests/stress/rel_forkstorm.c — 50 forks under HEAPPROFILE while two threads
 * allocate: 30 children dump then exit (PREFIX_PID.0001/.0002.heap),
 * 10 exec this program as an allocating helper (PREFIX_PID.0001.heap from
 * its exit dump), 10 exec /bin/true (no heapalloc, no file).  The root
 * dumps before and after (PREFIX.0001/.0002.heap).  Every exit status
 * comes back intact, every process has exactly its own files, every file is
 * whole, no temporary is left and nothing else appears; the exec'd
 * helpers see HEAPPROFILE unchanged (exit 123 if not).
 */
#include <stdint.h>

#include "tests/lib/rel_util.h"
#include "include/heapalloc.h"

#define NCHILD 50

static volatile int stop;

static void *allocator(void *arg)
{
	(void)arg;
	void *keep[256] = { 0 };
	for (unsigned i = 0; !stop; i++) {
		unsigned k = i % 256;
		free(keep[k]);
		keep[k] = malloc((i * 2654435761u) % 5000 + 1);
	}
	for (int k = 0; k < 256; k++)
		free(keep[k]);
	return NULL;
}

static void allocate_some(void)
{
	void *v[64];
	for (int i = 0; i < 64; i++) {
		v[i] = malloc((size_t)i * 100 + 1);
		memset(v[i], i, (size_t)i * 100 + 1);
	}
	for (int i = 0; i < 64; i += 2)
		free(v[i]);
}

static int whole_file(const char *fmt, ...)
{
	char p[1200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p, sizeof p, fmt, ap);
	va_end(ap);
	if (access(p, F_OK) != 0) {
		fprintf(stderr, "missing: %s\n", p);
		return 0;
	}
	return rel_profile_whole(p);
}

static int absent(const char *fmt, ...)
{
	char p[1200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p, sizeof p, fmt, ap);
	va_end(ap);
	if (access(p, F_OK) == 0) {
		fprintf(stderr, "unexpected file: %s\n", p);
		return 0;
	}
	return 1;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "helper")) {    /* exec'd child */
		/* HEAPPROFILE reaches descendants byte for byte (docs/heap-profile-spec.md §6) */
		char want_p[600];
		snprintf(want_p, sizeof want_p, "%s/p", getenv("REL_DIR"));
		if (!getenv("HEAPPROFILE") || strcmp(getenv("HEAPPROFILE"), want_p))
			return 123;
		allocate_some();
		return atoi(argv[2]);
	}
	static char dir[512], env_p[600], env_d[600];
	if (!getenv("REL_CHILD")) {
		rel_mkdtemp(dir, sizeof dir, "relfork");
		snprintf(env_p, sizeof env_p, "HEAPPROFILE=%s/p", dir);
		snprintf(env_d, sizeof env_d, "REL_DIR=%s", dir);
		rel_reexec(argv, env_p, env_d, "HEAP_PROFILE_ALLOCATION_INTERVAL=0",
			   "HEAP_PROFILE_INUSE_INTERVAL=0", "HEAP_PROFILE_SAMPLE_INTERVAL=4096",
			   (char *)NULL);
	}
	rel_watchdog(60, "rel_forkstorm");
	snprintf(dir, sizeof dir, "%s", getenv("REL_DIR"));
	REQUIRE(heapalloc_profile_running());
	REQUIRE(heapalloc_profile_dump("root before") == 0);

	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, allocator, NULL);
	pid_t pid[NCHILD];
	int kind[NCHILD], want[NCHILD];
	for (int i = 0; i < NCHILD; i++) {
		kind[i] = i % 5 == 1 ? 1 : i % 5 == 3 ? 2 : 0;
		want[i] = kind[i] == 2 ? 0 : 1 + i;
		fflush(NULL);
		pid[i] = fork();
		REQUIRE(pid[i] >= 0);
		if (pid[i] == 0) {
			alarm(30);       /* a hung child dies, it does not linger */
			char st[16];
			snprintf(st, sizeof st, "%d", want[i]);
			if (kind[i] == 1) {
				execl("/proc/self/exe", argv[0], "helper", st, (char *)NULL);
				_exit(120);
			}
			if (kind[i] == 2) {
				execl("/bin/true", "true", (char *)NULL);
				_exit(121);
			}
			allocate_some();
			if (heapalloc_profile_dump("child") != 0)
				_exit(122);
			allocate_some();
			exit(want[i]);           /* exit dump: PREFIX_PID.0002.heap */
		}
	}
	int status_ok = 0;
	for (int i = 0; i < NCHILD; i++) {
		int st;
		REQUIRE(waitpid(pid[i], &st, 0) == pid[i]);
		if (WIFEXITED(st) && WEXITSTATUS(st) == want[i])
			status_ok++;
		else
			fprintf(stderr, "child %d (kind %d): status %#x, want exit %d\n", i,
				kind[i], st, want[i]);
	}
	stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	REQUIRE(heapalloc_profile_dump("root after") == 0);
	heapalloc_profile_stop();

	CHECK_EQ(status_ok, NCHILD);
	int expect = 2, logs = 1;
	char logp[700];
	snprintf(logp, sizeof logp, "%s/p.log", dir);
	CHECK_EQ(rel_log_lines(logp, NULL, 0), 2);
	CHECK(whole_file("%s/p.0001.heap", dir));
	CHECK(whole_file("%s/p.0002.heap", dir));
	CHECK(absent("%s/p.0003.heap", dir));
	for (int i = 0; i < NCHILD; i++) {
		int n = kind[i] == 0 ? 2 : kind[i] == 1 ? 1 : 0;
		expect += n;
		for (int k = 1; k <= n; k++)
			CHECK(whole_file("%s/p_%d.%04d.heap", dir, (int)pid[i], k));
		/* each process that dumped has its own log, one line a dump */
		snprintf(logp, sizeof logp, "%s/p_%d.log", dir, (int)pid[i]);
		if (n) {
			logs++;
			CHECK_EQ(rel_log_lines(logp, NULL, 0), n);
		} else {
			CHECK(absent("%s/p_%d.log", dir, (int)pid[i]));
		}
		CHECK(absent("%s/p_%d.%04d.heap", dir, (int)pid[i], n + 1));
	}
	CHECK_EQ(rel_count_files(dir, ".heap"), expect);
	CHECK_EQ(rel_count_files(dir, ".log"), logs);
	CHECK_EQ(rel_count_files(dir, NULL), expect + logs);     /* no temporaries */
	if (ck_failures) {
		fprintf(stderr, "files in %s:\n", dir);
		DIR *d = opendir(dir);
		struct dirent *e;
		int shown = 0;
		while (d && (e = readdir(d)) && shown++ < 200)
			fprintf(stderr, "  %s\n", e->d_name);
		if (d)
			closedir(d);
	}
	rel_rmtree(dir);
	return CHECK_DONE();
}
