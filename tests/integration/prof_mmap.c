/* tests/integration/prof_mmap.c — the mmap family under heapalloc (tests/integration/prof_mmap.sh).
 * Every call site is a noinline function with a unique name, so pprof
 * attributes its mappings to exactly that name.
 * Modes (argv[1]):
 *   sites    8 MiB kept, 4 MiB unmapped, 2 MiB grown by mremap to 6 MiB,
 *            1 MiB by mmap64 unmapped, 1 MiB whose tail half is unmapped,
 *            2 MiB whose first half is mapped over (MAP_FIXED),
 *            and a dlopen of a library not loaded yet (the loader's
 *            mappings are not the program's; `sites nodl`: no dlopen)
 *   errors   every call fails (or succeeds) as glibc's own does, with the
 *            same errno; a success leaves errno alone
 * Exit 0 pass, 1 failure, 77 skip, 99 hard error.
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/lib/check.h"

#define MiB ((size_t)1 << 20)
void *volatile sink;

/* inline: the site itself must call mmap (pprof's flat value) */
static inline __attribute__((always_inline)) void *anon(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(p != MAP_FAILED);
	memset(p, 1, 4096);
	return p;
}

__attribute__((noinline)) void *site_map_keep(void)
{
	return anon(8 * MiB);
}

__attribute__((noinline)) void site_map_free(void)
{
	void *p = anon(4 * MiB);
	CHECK(munmap(p, 4 * MiB) == 0);
}

__attribute__((noinline)) void *site_map_grow(void)
{
	return anon(2 * MiB);
}

__attribute__((noinline)) void *site_remap_grow(void *p)
{
	void *q = mremap(p, 2 * MiB, 6 * MiB, MREMAP_MAYMOVE);
	CHECK(q != MAP_FAILED);
	((char *)q)[6 * MiB - 1] = 2;
	return q;
}

__attribute__((noinline)) void site_map64(void)
{
	void *p = mmap64(NULL, MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	CHECK(munmap(p, MiB) == 0);
}

__attribute__((noinline)) void *site_map_part(void)
{
	char *p = anon(MiB);
	CHECK(munmap(p + MiB / 2, MiB / 2) == 0);   /* the tail: frees nothing */
	return p;
}

__attribute__((noinline)) void *site_map_under(void)
{
	return anon(2 * MiB);
}

/* MAP_FIXED over the first half: the mapping under it is freed whole */
__attribute__((noinline)) void *site_map_over(void *p)
{
	void *q = mmap(p, MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	CHECK(q == p);
	return q;
}

/* A library nothing here links: the loader maps it (ld.so's own mmap). */
static const char *const libs[] = { "libexpat.so.1", "libzstd.so.1", "libbz2.so.1", "libffi.so.8" };

__attribute__((noinline)) void *site_dlopen(const char *lib)
{
	return dlopen(lib, RTLD_NOW);
}

static int mode_sites(int dl)
{
	sink = site_map_keep();
	site_map_free();
	sink = site_remap_grow(site_map_grow());
	site_map64();
	sink = site_map_part();
	sink = site_map_over(site_map_under());
	sink = NULL;
	for (size_t i = 0; dl && i < sizeof libs / sizeof libs[0] && !sink; i++)
		if (!dlopen(libs[i], RTLD_NOW | RTLD_NOLOAD))
			sink = site_dlopen(libs[i]);
	if (dl && !sink)
		HARD_ERROR("no library to dlopen");
	return CHECK_DONE();
}

/* ---- errors ------------------------------------------------------------- */
typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
typedef int (*munmap_fn)(void *, size_t);
typedef void *(*mremap_fn)(void *, size_t, size_t, int, ...);

/* The same call through heapalloc's symbol (ours) and glibc's (libc's):
 * same result class, same errno. */
#define SAME_MMAP(fn_ours, fn_libc, ...) do {                                   \
	errno = 1234;                                                            \
	void *a_ = fn_ours(__VA_ARGS__);                                         \
	int ea_ = errno;                                                         \
	errno = 1234;                                                            \
	void *b_ = fn_libc(__VA_ARGS__);                                         \
	int eb_ = errno;                                                         \
	CHECK_EQ((long)(a_ == MAP_FAILED), (long)(b_ == MAP_FAILED));            \
	CHECK_EQ((long)ea_, (long)eb_);                                          \
	if (a_ == MAP_FAILED)                                                    \
		CHECK_EQ((long)a_, -1L);                                         \
	last_a = a_;                                                             \
	last_b = b_;                                                             \
} while (0)

static int mode_errors(const char *self)
{
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	CHECK(libc != NULL);
	mmap_fn lmmap = (mmap_fn)dlsym(libc, "mmap");
	mmap_fn lmmap64 = (mmap_fn)dlsym(libc, "mmap64");
	munmap_fn lmunmap = (munmap_fn)dlsym(libc, "munmap");
	mremap_fn lmremap = (mremap_fn)dlsym(libc, "mremap");
	CHECK(lmmap && lmmap64 && lmunmap && lmremap);
	CHECK(lmmap != (mmap_fn)mmap);   /* ours is another definition */
	if (ck_failures)
		HARD_ERROR("glibc's mmap family not found");
	void *last_a, *last_b;
	int fd = open(self, O_RDONLY);
	CHECK(fd >= 0);
	/* an offset not page-aligned: EINVAL before the kernel */
	SAME_MMAP(mmap, lmmap, NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 100);
	CHECK(last_a == MAP_FAILED);
	CHECK_EQ((long)errno, (long)EINVAL);
	SAME_MMAP(mmap64, lmmap64, NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 4097);
	CHECK(last_a == MAP_FAILED);
	/* an aligned offset maps the same bytes; errno is left alone */
	SAME_MMAP(mmap, lmmap, NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 4096);
	CHECK(last_a != MAP_FAILED && last_b != MAP_FAILED);
	CHECK_EQ((long)errno, 1234L);
	if (last_a != MAP_FAILED && last_b != MAP_FAILED) {
		CHECK(memcmp(last_a, last_b, 4096) == 0);
		munmap(last_a, 4096);
		lmunmap(last_b, 4096);
	}
	/* length 0, bad descriptor, a negative offset */
	SAME_MMAP(mmap, lmmap, NULL, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	SAME_MMAP(mmap, lmmap, NULL, 4096, PROT_READ, MAP_PRIVATE, -1, 0);
	CHECK_EQ((long)errno, (long)EBADF);
	SAME_MMAP(mmap, lmmap, NULL, 4096, PROT_READ, MAP_PRIVATE, fd, -4096);
	close(fd);
	/* munmap of an unaligned address, of length 0 */
	char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(m != MAP_FAILED);
	errno = 1234;
	int ra = munmap(m + 1, 4096), ea = errno;
	errno = 1234;
	int rb = lmunmap(m + 1, 4096), eb = errno;
	CHECK_EQ((long)ra, -1L);
	CHECK_EQ((long)ra, (long)rb);
	CHECK_EQ((long)ea, (long)eb);
	errno = 1234;
	ra = munmap(m, 0), ea = errno;
	errno = 1234;
	rb = lmunmap(m, 0), eb = errno;
	CHECK_EQ((long)ra, (long)rb);
	CHECK_EQ((long)ea, (long)eb);
	/* mremap: MREMAP_FIXED without MREMAP_MAYMOVE is EINVAL; growing in
	 * place over a neighbour without MREMAP_MAYMOVE is ENOMEM */
	SAME_MMAP(mremap, lmremap, m, 4096, 8192, MREMAP_FIXED, (void *)(m + 4096));
	CHECK(last_a == MAP_FAILED);
	SAME_MMAP(mremap, lmremap, m, 4096, 8192, 0);
	CHECK(last_a == MAP_FAILED);
	CHECK_EQ((long)errno, (long)ENOMEM);
	/* new_address is read with MREMAP_FIXED: both land on it */
	char *to = mmap(NULL, 4 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(to != MAP_FAILED);
	errno = 1234;
	void *q = mremap(m, 8192, 8192, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)to);
	CHECK(q == (void *)to);
	CHECK_EQ((long)errno, 1234L);
	void *q2 = lmremap(q, 8192, 8192, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)(to + 8192));
	CHECK(q2 == (void *)(to + 8192));
	CHECK(munmap(to, 4 * 4096) == 0);
	return CHECK_DONE();
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 99;
	if (!strcmp(argv[1], "sites"))
		return mode_sites(argc < 3 || strcmp(argv[2], "nodl") != 0);
	if (!strcmp(argv[1], "errors"))
		return mode_errors(argv[0]);
	return 99;
}
