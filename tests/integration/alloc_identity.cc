// alloc_identity — heapalloc really is this process's allocator.  Built twice:
// linked with -lheapalloc (alloc_identity) and without it (alloc_identity_plain,
// run by alloc_identity_preload.sh under LD_PRELOAD).  It checks that
//  - every malloc-family name and every operator new/delete, both as the
//    program sees it (&malloc) and as the dynamic linker resolves it for
//    everyone else (dlsym(RTLD_DEFAULT)), lives in libheapalloc.so — not in
//    libc, and not in libmimalloc.so, which exports malloc too;
//  - blocks that libc and libstdc++ allocate internally (strdup, asprintf,
//    getline, open_memstream, fopen, ostringstream...) are heapalloc's: its
//    counters move, and our free() releases them without trouble.
#include <dirent.h>
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <new>
#include <sstream>
#include <string>
#include "tests/lib/check.h"
#include "heapalloc.h"

typedef void (*stats_fn)(heapalloc_stats *);
static stats_fn get_stats;
static Dl_info ha_info; // the library that defines heapalloc_get_stats

static heapalloc_stats snap()
{
	heapalloc_stats s;
	memset(&s, 0, sizeof s);
	get_stats(&s);
	return s;
}
static long long small_inuse(const heapalloc_stats &s)
{
	return (long long)s.small_span_bytes - (long long)s.small_free_bytes;
}

// Does this address belong to the same object as heapalloc_get_stats?
static void check_owner(const char *name, const char *how, const void *addr)
{
	Dl_info di;
	if (!addr) {
		fprintf(stderr, "FAIL %s (%s): no address\n", name, how);
		CHECK(addr != NULL);
		return;
	}
	if (!dladdr(addr, &di) || di.dli_fbase != ha_info.dli_fbase) {
		fprintf(stderr, "FAIL %s (%s) = %p resolves to %s, not %s\n", name, how, addr,
			di.dli_fname ? di.dli_fname : "(unknown)", ha_info.dli_fname);
		CHECK(di.dli_fbase == ha_info.dli_fbase);
	}
}

static const char *const kNames[] = {
	"malloc", "free", "calloc", "realloc", "reallocarray", "memalign", "posix_memalign",
	"aligned_alloc", "valloc", "pvalloc", "malloc_usable_size", "malloc_trim", "mallopt",
	"mallinfo", "mallinfo2", "malloc_stats",
	"__libc_malloc", "__libc_free", "__libc_calloc", "__libc_realloc", "__libc_memalign",
	"_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
	"_ZnwmSt11align_val_t", "_ZnamSt11align_val_t",
	"_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
	"_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm", "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t",
	"_ZdlPvSt11align_val_t", "_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t",
	"_ZdaPvmSt11align_val_t", "_ZdlPvSt11align_val_tRKSt9nothrow_t",
	"_ZdaPvSt11align_val_tRKSt9nothrow_t",
};

static void entry_points()
{
	for (const char *n : kNames)
		check_owner(n, "dlsym(RTLD_DEFAULT)", dlsym(RTLD_DEFAULT, n));
	// as the program itself sees them
#define OWN(f) check_owner(#f, "&" #f, (const void *)&f)
	OWN(malloc); OWN(free); OWN(calloc); OWN(realloc); OWN(reallocarray);
	OWN(memalign); OWN(posix_memalign); OWN(aligned_alloc); OWN(valloc); OWN(pvalloc);
	OWN(malloc_usable_size); OWN(malloc_trim); OWN(mallopt); OWN(mallinfo2);
	OWN(malloc_stats);
#undef OWN
	check_owner("operator new", "&", (const void *)static_cast<void *(*)(size_t)>(&::operator new));
	check_owner("operator new[]", "&", (const void *)static_cast<void *(*)(size_t)>(&::operator new[]));
	check_owner("operator delete", "&", (const void *)static_cast<void (*)(void *) noexcept>(&::operator delete));
	check_owner("operator delete[]", "&", (const void *)static_cast<void (*)(void *) noexcept>(&::operator delete[]));
	check_owner("operator delete(sized)", "&", (const void *)static_cast<void (*)(void *, size_t) noexcept>(&::operator delete));
	check_owner("operator new(align)", "&", (const void *)static_cast<void *(*)(size_t, std::align_val_t)>(&::operator new));
	check_owner("operator delete(align)", "&", (const void *)static_cast<void (*)(void *, std::align_val_t) noexcept>(&::operator delete));
	check_owner("operator new(nothrow)", "&", (const void *)static_cast<void *(*)(size_t, const std::nothrow_t &) noexcept>(&::operator new));

	// libmimalloc.so is loaded (heapalloc's back-end) and exports malloc as
	// well: it must not be the one in use.
	void *mi = dlopen("libmimalloc.so.2", RTLD_LAZY | RTLD_NOLOAD);
	if (mi) {
		void *mi_malloc = dlsym(mi, "malloc");
		CHECK(mi_malloc != dlsym(RTLD_DEFAULT, "malloc"));
		CHECK(mi_malloc != (void *)&malloc);
		dlclose(mi);
	}
	CHECK(strstr(ha_info.dli_fname, "libheapalloc") != NULL);
}

static heapalloc_stats s0, s1;
#define LARGE 40000 /* > HEAPALLOC_SMALL_MAX: counted in large_blocks */

// After `what` made `n` large blocks, large_blocks rose by n.
static void large_rose(const char *what, long long n)
{
	s1 = snap();
	long long d = (long long)s1.large_blocks - (long long)s0.large_blocks;
	if (d < n)
		fprintf(stderr, "%s: large_blocks %llu -> %llu, expected +%lld\n", what,
			(unsigned long long)s0.large_blocks, (unsigned long long)s1.large_blocks, n);
	CHECK_GE(d, n);
}
static void large_back(const char *what)
{
	heapalloc_stats s2 = snap();
	if (s2.large_blocks > s0.large_blocks)
		fprintf(stderr, "%s: after free, large_blocks %llu, was %llu before\n", what,
			(unsigned long long)s2.large_blocks, (unsigned long long)s0.large_blocks);
	CHECK_LE(s2.large_blocks, s0.large_blocks);
}

static void *thread_body(void *arg)
{
	void *p = malloc(100); // this thread now has a cache of its own
	memset(p, 1, 100);
	pthread_barrier_wait((pthread_barrier_t *)arg); // main looks now
	pthread_barrier_wait((pthread_barrier_t *)arg);
	free(p);
	return NULL;
}

static void counters()
{
	enum { N = 50 };
	static char big[LARGE + 1];
	memset(big, 'q', LARGE);
	big[LARGE] = 0;

	// malloc itself
	s0 = snap();
	void *p = malloc(100000);
	REQUIRE(p != NULL);
	large_rose("malloc(100000)", 1);
	CHECK_GE((long long)(s1.large_bytes - s0.large_bytes), 100000);
	CHECK_GE(s1.mallocs, s0.mallocs + 1);
	free(p);
	large_back("free");

	// a very big block (heapalloc maps these on their own) counts as large too
	s0 = snap();
	p = malloc(64 << 20);
	REQUIRE(p != NULL);
	large_rose("malloc(64 MiB)", 1);
	CHECK_GE((long long)(s1.large_bytes - s0.large_bytes), 64 << 20);
	CHECK_GE(s1.mallocs, s0.mallocs + 1);
	free(p);
	large_back("free(64 MiB)");

	// small blocks: in-use bytes rise
	s0 = snap();
	static void *v[2000];
	for (int i = 0; i < 2000; i++)
		v[i] = malloc(1000);
	s1 = snap();
	CHECK_GE(small_inuse(s1) - small_inuse(s0), 2000 * 1000);
	CHECK_GE(s1.small_spans, 1);
	for (int i = 0; i < 2000; i++)
		free(v[i]);

	// libc: strdup
	s0 = snap();
	char *d[N];
	for (int i = 0; i < N; i++)
		d[i] = strdup(big);
	large_rose("strdup", N);
	for (int i = 0; i < N; i++) {
		CHECK(d[i] && strlen(d[i]) == LARGE);
		free(d[i]);
	}
	large_back("strdup");

	// libc: asprintf
	s0 = snap();
	char *a = NULL;
	CHECK_EQ(asprintf(&a, "%s%d", big, 42), LARGE + 2);
	large_rose("asprintf", 1);
	free(a);
	large_back("asprintf");

	// libc: getline and fopen/fclose
	FILE *f = tmpfile();
	REQUIRE(f != NULL);
	fputs(big, f);
	fputs("\nshort\n", f);
	rewind(f);
	s0 = snap();
	char *line = NULL;
	size_t cap = 0;
	CHECK_EQ(getline(&line, &cap, f), LARGE + 1);
	large_rose("getline", 1);
	free(line);
	line = NULL;
	CHECK_EQ(getline(&line, &cap, f), 6);
	free(line);
	fclose(f);
	large_back("getline");

	s0 = snap();
	FILE *fs[100];
	for (int i = 0; i < 100; i++) {
		fs[i] = fopen("/proc/self/status", "r");
		REQUIRE(fs[i] != NULL);
		CHECK(fgetc(fs[i]) != EOF); // allocates the stdio buffer
	}
	s1 = snap();
	if (small_inuse(s1) - small_inuse(s0) < 100 * 400)
		fprintf(stderr, "100 open FILEs: small in-use bytes %lld -> %lld\n", small_inuse(s0),
			small_inuse(s1));
	CHECK_GE(small_inuse(s1) - small_inuse(s0) + (long long)(s1.large_bytes - s0.large_bytes),
		 100 * 400); // FILE objects (and buffers) are ours
	for (int i = 0; i < 100; i++)
		fclose(fs[i]);

	// libc: open_memstream grows with realloc
	s0 = snap();
	char *ms = NULL;
	size_t msz = 0;
	FILE *m = open_memstream(&ms, &msz);
	REQUIRE(m != NULL);
	for (int i = 0; i < 4; i++)
		fputs(big, m);
	fclose(m);
	CHECK_EQ(msz, 4 * LARGE);
	large_rose("open_memstream", 1);
	free(ms);
	large_back("open_memstream");

	// libc: opendir, realpath, scandir (crash-free round trips)
	DIR *dir = opendir("/proc/self");
	CHECK(dir != NULL);
	if (dir)
		closedir(dir);
	char *rp = realpath("/proc/self/status", NULL);
	CHECK(rp != NULL);
	free(rp);
	struct dirent **names = NULL;
	int nn = scandir("/proc/self", &names, NULL, alphasort);
	CHECK(nn > 0);
	for (int i = 0; i < nn; i++)
		free(names[i]);
	free(names);

	// libstdc++: a stringbuf grows inside libstdc++.so
	s0 = snap();
	{
		std::ostringstream os;
		for (int i = 0; i < 3; i++)
			os << big;
		std::string s = os.str();
		CHECK_EQ(s.size(), 3 * LARGE);
		large_rose("ostringstream", 1);
	}
	large_back("ostringstream");
	s0 = snap();
	char *arr = new char[LARGE];
	large_rose("new char[]", 1);
	delete[] arr;
	large_back("delete[]");

	// a thread gets a cache of its own
	pthread_barrier_t b;
	pthread_barrier_init(&b, NULL, 2);
	pthread_t t;
	s0 = snap();
	REQUIRE(pthread_create(&t, NULL, thread_body, &b) == 0);
	pthread_barrier_wait(&b);
	s1 = snap();
	CHECK_GE(s1.thread_caches, s0.thread_caches + 1);
	pthread_barrier_wait(&b);
	pthread_join(t, NULL);
	pthread_barrier_destroy(&b);
}

int main()
{
	void *sym = dlsym(RTLD_DEFAULT, "heapalloc_get_stats");
	if (!sym) {
		fprintf(stderr, "FAIL: heapalloc_get_stats not found: heapalloc is not loaded\n");
		return 1;
	}
	get_stats = (stats_fn)sym;
	REQUIRE(dladdr(sym, &ha_info) && ha_info.dli_fname);
	entry_points();
	counters();
	return CHECK_DONE();
}
