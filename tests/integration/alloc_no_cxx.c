/* alloc_no_cxx — a C program under heapalloc (linked, linked statically, or
 * preloaded into a program built without it: alloc_no_cxx_preload.sh) maps
 * no C++ runtime, no libm, libgcc_s, zlib or libxxhash; and the C++ pieces
 * operator new needs are still found when a C++ runtime arrives later, as a
 * C program (python3) dlopens a C++ extension RTLD_LOCAL: new of a huge size
 * through libstdc++'s nothrow new calls the installed new_handler, then
 * throws std::bad_alloc (caught there: nullptr), and heapalloc's own nothrow
 * new does the same.  A gzipped profile still comes out (zlib loaded then). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include "tests/lib/check.h"
#include "heapalloc.h"

/* linked in (also statically, where dlsym cannot see them) or preloaded */
#pragma weak heapalloc_get_stats_size
#pragma weak heapalloc_profile_start
#pragma weak heapalloc_profile_stop
#pragma weak heapalloc_profile_pprof
#define API(f) (f ? (void *)f : dlsym(RTLD_DEFAULT, #f))

/* the first of names mapped into this process, else NULL */
static const char *mapped(const char *const *names)
{
	static char line[4096];
	const char *hit = NULL;
	FILE *f = fopen("/proc/self/maps", "r");
	REQUIRE(f != NULL);
	while (!hit && fgets(line, sizeof line, f))
		for (const char *const *n = names; *n && !hit; n++)
			if (strstr(line, *n))
				hit = *n;
	fclose(f);
	return hit;
}

typedef void (*handler_fn)(void);
typedef handler_fn (*set_handler_fn)(handler_fn);
typedef void *(*nothrow_new_fn)(size_t, const void *);
static set_handler_fn set_handler;
static int calls, limit;
static void counting_handler(void)
{
	if (++calls >= limit)
		set_handler(NULL);   /* the next failure throws bad_alloc */
}

int main(void)
{
	if (!API(heapalloc_get_stats_size)) {
		fprintf(stderr, "FAIL: heapalloc is not in this process\n");
		return 1;
	}
	static const char *const banned[] = { "libstdc++", "libc++", "libm.so", "libgcc_s",
					      "libz.so", "libxxhash", NULL };
	void *p = malloc(1000);
	CHECK(p != NULL);
	free(p);
	/* a sanitizer build's runtime (libubsan) maps libstdc++ and libm
	 * itself: there the plain build's run of this test is the check */
	static const char *const sanitizer[] = { "libubsan", "libasan", NULL };
	const char *hit = mapped(sanitizer) ? NULL : mapped(banned);
	if (mapped(sanitizer))
		fprintf(stderr, "note: %s maps a C++ runtime itself; the mapping check "
			"is the plain build's\n", mapped(sanitizer));
	if (hit) {
		fprintf(stderr, "FAIL: %s is mapped into a C program\n", hit);
		ck_failures++;
	}

	/* a C++ runtime arrives later, private to its module */
	void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		SKIP("no libstdc++.so.6 to load");
	static const char *const cxx[] = { "libstdc++", NULL };
	REQUIRE(mapped(cxx) != NULL);
	set_handler = (set_handler_fn)dlsym(h, "_ZSt15set_new_handlerPFvvE");
	nothrow_new_fn rt_nothrow = (nothrow_new_fn)dlsym(h, "_ZnwmRKSt9nothrow_t");
	nothrow_new_fn ha_nothrow = (nothrow_new_fn)dlsym(RTLD_DEFAULT, "_ZnwmRKSt9nothrow_t");
	void (*del)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "_ZdlPv");
	REQUIRE(set_handler && rt_nothrow && ha_nothrow && del);
	Dl_info ha, di;
	REQUIRE(dladdr(API(heapalloc_get_stats_size), &ha));
	CHECK(dladdr((void *)ha_nothrow, &di) && di.dli_fbase == ha.dli_fbase);
	static const char tag = 0;   /* a std::nothrow_t argument */
	volatile size_t huge = (size_t)1 << 62;

	/* libstdc++'s nothrow new calls operator new (heapalloc's) in try/catch */
	p = rt_nothrow(100, &tag);
	CHECK(p != NULL);
	del(p);
	CHECK(rt_nothrow(huge, &tag) == NULL);   /* bad_alloc thrown and caught */
	calls = 0;
	limit = 3;
	set_handler(counting_handler);
	CHECK(rt_nothrow(huge, &tag) == NULL);
	CHECK_EQ(calls, 3);
	/* heapalloc's nothrow new: nullptr with no handler, after it with one */
	CHECK(ha_nothrow(huge, &tag) == NULL);
	calls = 0;
	limit = 2;
	set_handler(counting_handler);
	CHECK(ha_nothrow(huge, &tag) == NULL);
	CHECK_EQ(calls, 2);
	p = ha_nothrow(24, &tag);
	CHECK(p != NULL);
	del(p);

	/* a pprof profile is gzipped (zlib loaded on this first one) */
	int (*start)(const char *) = (int (*)(const char *))API(heapalloc_profile_start);
	void (*stop)(void) = (void (*)(void))API(heapalloc_profile_stop);
	int (*pprof)(void **, size_t *) = (int (*)(void **, size_t *))API(heapalloc_profile_pprof);
	REQUIRE(start && stop && pprof);
	char dir[] = "/tmp/alloc_no_cxx.XXXXXX", prefix[64], cmd[96];
	REQUIRE(mkdtemp(dir) != NULL);
	snprintf(prefix, sizeof prefix, "%s/prof", dir);
	CHECK_EQ(start(prefix), 0);
	void *keep = malloc(1 << 20);
	void *buf = NULL;
	size_t len = 0;
	CHECK_EQ(pprof(&buf, &len), 0);
	CHECK(buf != NULL && len > 2);
	if (buf && len > 2)
		CHECK(((unsigned char *)buf)[0] == 0x1f && ((unsigned char *)buf)[1] == 0x8b);
	free(buf);
	free(keep);
	stop();
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	CHECK_EQ(system(cmd), 0);
	return CHECK_DONE();
}
