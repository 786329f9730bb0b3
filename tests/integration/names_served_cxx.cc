// tests/integration/names_served_cxx.cc — the C++ ground truth of tests/integration/names_served.sh
// (see tests/integration/names_served.c for the protocol): a namespaced function, a
// member function inlined into its caller.
//   app::keep_blocks      6 x 3000 = 18000 bytes kept
//   app::Pool::grow       4 x 2500 = 10000 bytes kept, inlined into app::fill
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "names_deleted.h"

char *volatile keep[16];

namespace app {

__attribute__((noinline)) void keep_blocks()
{
	for (int i = 0; i < 6; i++)
		keep[i] = new char[3000];
}

struct Pool {
	int used = 0;
	__attribute__((always_inline)) inline void grow()
	{
		keep[6 + used++] = new char[2500];
	}
};

__attribute__((noinline)) void fill()
{
	Pool p;
	for (int i = 0; i < 4; i++)
		p.grow();
}

} // namespace app

int main(int argc, char **argv)
{
	if (argc != 3)
		return 99;
	app::keep_blocks();
	app::fill();
	FILE *r = fopen(argv[2], "w");
	if (!r || fclose(r) != 0 || wait_deleted((uintptr_t)&app::fill) != 0) {
		fprintf(stderr, "names_served_cxx: the binary was not deleted\n");
		return 99;
	}
	auto pprof = (int (*)(void **, size_t *))dlsym(RTLD_DEFAULT, "heapalloc_profile_pprof");
	void *buf = nullptr;
	size_t len = 0;
	int err = pprof ? pprof(&buf, &len) : -1;
	FILE *f = err ? nullptr : fopen(argv[1], "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "names_served_cxx: no profile (%d)\n", err);
		return 99;
	}
	free(buf);
	return 0;
}
