// alloc_sized — C++'s sized delete and C23's free_sized take their own path
// (the class from the size, checked against the page map), so they are
// tested on their own, in four
// runs of this program: sampling off, every 64 bytes (nearly every block a
// sampled one, with a header), every allocation recorded (interval 1), and
// the compatibility mode (a header on every block).  In each:
//   - every size up to 32 KiB + 1: new, the pattern, sized delete, plain and
//     array, and malloc or calloc with free_sized; with sampling off the
//     next new (malloc) of that size returns the same block, so the sized
//     free put it on its own class's list; free_aligned_sized of an
//     aligned_alloc block;
//   - a live set of 12,000 blocks of random sizes, half of them deleted
//     (sized) in random order and new ones made, every live block's pattern
//     checked after each phase (a block on the wrong class's list would be
//     handed out for a bigger request and overlap its neighbour);
//   - profiling: after everything is deleted the profile's sampled in-use
//     objects are what they were before (no sampled block's free was
//     missed), and in the exact modes the session's requested bytes
//     allocated and freed grew by the same amount.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>
#include <malloc.h>
#include "tests/lib/check.h"
#include "tests/lib/alloc_util.h"
#include "tests/lib/prof_util.h"

extern "C" void free_sized(void *p, size_t n);
extern "C" void free_aligned_sized(void *p, size_t align, size_t n);

static volatile size_t vsize;
static size_t sz(size_t n) { vsize = n; return vsize; }
static volatile uintptr_t was;   // an address kept past its delete, as a number

static uint64_t rng = 88172645463325252ull;
static uint64_t next()
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

// The profile's sampled in-use objects, summed over its sites.
static long inuse_objects()
{
	char *t = GetHeapProfile();
	CHECK(t != nullptr);
	long sum = 0;
	for (char *l = strchr(t, '\n'); l && *l; l = strchr(l + 1, '\n')) {
		long objs, bytes;
		if (sscanf(l + 1, " %ld: %ld [", &objs, &bytes) == 2 && strstr(l + 1, " @ ") &&
		    strstr(l + 1, " @ ") < strchr(l + 1, '\n')) {
			sum += objs;
		}
	}
	free(t);
	return sum;
}

static void every_size(bool off)
{
	for (size_t n = 0; n <= 32769; n++) {
		size_t m = sz(n);
		uint32_t s = (uint32_t)n;
		void *p = ::operator new(m);
		was = (uintptr_t)p;
		pat_fill(p, m, s);
		CHECK_EQ(pat_check(p, m, s), (size_t)-1);
		CHECK_GE(malloc_usable_size(p), m);
		::operator delete(p, m);
		if (off && m <= 32768) {
			void *q = ::operator new(m);
			CHECK_EQ((uintptr_t)q, was);
			::operator delete(q, m);
		}
		p = ::operator new[](m);
		pat_fill(p, m, s + 1);
		CHECK_EQ(pat_check(p, m, s + 1), (size_t)-1);
		::operator delete[](p, m);
		p = n & 1 ? malloc(m) : calloc(1, m);
		CHECK(p != nullptr);
		if (!(n & 1))
			CHECK_EQ(zero_check(p, m), (size_t)-1);
		was = (uintptr_t)p;
		pat_fill(p, m, s + 2);
		CHECK_EQ(pat_check(p, m, s + 2), (size_t)-1);
		free_sized(p, m);
		if (off && m <= 32768) {
			void *q = malloc(m);
			CHECK_EQ((uintptr_t)q, was);
			free_sized(q, m);
		}
		p = aligned_alloc(64, (m + 63) & ~(size_t)63);
		CHECK(p != nullptr && (uintptr_t)p % 64 == 0);
		pat_fill(p, m, s + 3);
		CHECK_EQ(pat_check(p, m, s + 3), (size_t)-1);
		free_aligned_sized(p, 64, (m + 63) & ~(size_t)63);
	}
}

struct blk {
	char *p;
	size_t n;
	uint32_t seed;
};

// a third of the live set from malloc, freed with free_sized
static bool from_malloc(const blk &b) { return b.seed % 3 == 0; }

static size_t rand_size()
{
	uint64_t r = next();
	switch (r % 8) {
	case 7:
		return (size_t)(r >> 8) % 32769;       // up to a page group
	case 6:
		return (size_t)(r >> 8) % 4097;
	default:
		return (size_t)(r >> 8) % 513;         // most: small, many classes
	}
}

static blk make(uint32_t seed)
{
	blk b = { nullptr, sz(rand_size()), seed };
	b.p = static_cast<char *>(from_malloc(b) ? malloc(b.n) : ::operator new(b.n));
	CHECK(b.p != nullptr);
	pat_fill(b.p, b.n, seed);
	return b;
}

static void drop(const blk &b)
{
	if (from_malloc(b))
		free_sized(b.p, b.n);
	else
		::operator delete(b.p, b.n);
}

static void check_all(const std::vector<blk> &v)
{
	for (const blk &b : v)
		CHECK_EQ(pat_check(b.p, b.n, b.seed), (size_t)-1);
}

static void live_set()
{
	std::vector<blk> v;
	v.reserve(20000);
	for (uint32_t i = 0; i < 12000; i++)
		v.push_back(make(i));
	check_all(v);
	for (int round = 0; round < 4; round++) {
		for (size_t i = v.size() - 1; i > 0; i--) {   // shuffle
			size_t j = (size_t)(next() % (i + 1));
			blk t = v[i];
			v[i] = v[j];
			v[j] = t;
		}
		for (size_t i = 0; i < 6000; i++) {
			drop(v.back());
			v.pop_back();
		}
		check_all(v);
		for (uint32_t i = 0; i < 6000; i++)
			v.push_back(make(100000 * (round + 1) + i));
		check_all(v);
	}
	for (const blk &b : v)
		drop(b);
}

int main(int argc, char **argv)
{
	if (argc == 1) {
		char dir[] = "/tmp/ha_cxx_sized.XXXXXX";
		CHECK(mkdtemp(dir) != nullptr);
		std::string pre = std::string(dir) + "/p";
		const char *off[] = { nullptr };
		const char *prof[] = { "HEAPPROFILE", pre.c_str(), nullptr };
		const char *compat[] = { "HEAPPROFILE", pre.c_str(), "HEAP_PROFILE_EXACT_TOTALS", "1", nullptr };
		int ok = rerun_self(argv[0], dir, "0", off);
		ok &= rerun_self(argv[0], dir, "64", prof);
		ok &= rerun_self(argv[0], dir, "1", prof);
		ok &= rerun_self(argv[0], dir, "512", compat);
		CHECK(remove_dir(dir));
		CHECK(ok);
		return CHECK_DONE();
	}
	bool sampling_off = strcmp(argv[2], "0") == 0;
	const char *ex = getenv("HEAP_PROFILE_EXACT_TOTALS");
	bool exact = (ex && ex[0] == '1') || strcmp(argv[2], "1") == 0;
	bool profiling = !sampling_off;
	CHECK_EQ(heapalloc_profile_running(), profiling ? 1 : 0);

	// a block that stays: sampled at every interval used here, so the
	// profile has a site to count and the parse is seen to work
	void *marker = ::operator new(1 << 20);
	long objs0 = profiling ? inuse_objects() : 0;
	if (profiling)
		CHECK_GE(objs0, 1);
	heapalloc_stats s0;
	heapalloc_get_stats(&s0);
	every_size(sampling_off);
	live_set();
	heapalloc_stats s1;
	heapalloc_get_stats(&s1);
	if (profiling) {
		CHECK_GE(s1.prof_samples, s0.prof_samples + 1000);   // samples were taken
		CHECK_EQ(inuse_objects(), objs0);
	}
	if (exact) {
		CHECK_GE(s1.prof_alloc_bytes, s0.prof_alloc_bytes + 1000000);
		CHECK_EQ(s1.prof_alloc_bytes - s0.prof_alloc_bytes, s1.prof_free_bytes - s0.prof_free_bytes);
	}
	::operator delete(marker, 1 << 20);
	fprintf(stderr, "interval %s%s: %llu samples, %llu requested bytes in and out\n", argv[2],
		ex ? " (compatibility mode)" : "", (unsigned long long)(s1.prof_samples - s0.prof_samples),
		(unsigned long long)(s1.prof_alloc_bytes - s0.prof_alloc_bytes));
	return CHECK_DONE();
}
