/* alloc_static — heapalloc linked in statically (libheapalloc.a, through
 * libtool's -static) into a C program that uses malloc: every malloc-family
 * name and every C++ operator new/delete must then be the program's own
 * (heapalloc's), as the program sees them and as the dynamic linker resolves
 * them for the shared libraries — libc, libstdc++ and libmimalloc.so, which
 * exports malloc and operator new too — and libc's internal allocations
 * must move heapalloc's counters. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include "tests/lib/check.h"
#include "heapalloc.h"

static const char *const names[] = {
	"malloc", "free", "calloc", "realloc", "reallocarray", "memalign", "posix_memalign",
	"aligned_alloc", "valloc", "pvalloc", "malloc_usable_size", "malloc_trim", "mallopt",
	"mallinfo", "mallinfo2", "malloc_stats",
	"_Znwm", "_Znam", "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZnwmRKSt9nothrow_t",
	"_ZnwmSt11align_val_t", "_ZdlPvSt11align_val_t", "_ZdlPvmSt11align_val_t",
};

int main(void)
{
	Dl_info self, di;
	REQUIRE(dladdr((void *)&main, &self));
	void *p = malloc(100); /* the program uses malloc: the archive is linked in */
	free(p);
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		void *s = dlsym(RTLD_DEFAULT, names[i]);
		if (!s || !dladdr(s, &di) || di.dli_fbase != self.dli_fbase) {
			fprintf(stderr, "FAIL %s resolves to %s, not the program\n", names[i],
				s && di.dli_fname ? di.dli_fname : "(nothing)");
			ck_failures++;
		}
	}
	CHECK(dladdr((void *)&posix_memalign, &di) && di.dli_fbase == self.dli_fbase);
	CHECK(dladdr((void *)&malloc_usable_size, &di) && di.dli_fbase == self.dli_fbase);

	/* libc's own allocations are heapalloc's */
	static char big[50001];
	memset(big, 'z', 50000);
	heapalloc_stats s0, s1;
	heapalloc_get_stats(&s0);
	char *d = strdup(big);
	heapalloc_get_stats(&s1);
	CHECK(d != NULL);
	CHECK_GE(s1.large_blocks, s0.large_blocks + 1);
	free(d);
	void *a = NULL;
	CHECK_EQ(posix_memalign(&a, 4096, 40000), 0);
	CHECK_EQ((uintptr_t)a % 4096, 0);
	CHECK_GE(malloc_usable_size(a), 40000);
	free(a);
	return CHECK_DONE();
}
