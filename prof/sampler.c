/* prof/sampler.c — how far the next sample is, in bytes.
 *
 * Model (docs/heap-profile-spec.md §4): every allocated byte is marked with probability 1/R; an
 * allocation is sampled when it holds a marked byte.  The distance to the
 * next marked byte is geometric, which we draw from the exponential
 * distribution with mean R:  d = -R * ln(U),  U uniform in (0, 1].
 * So a block of S bytes is sampled with P = 1 - exp(-S/R).  At the default
 * R = 512 KiB:
 *        S = 4 KiB   P = 1 - e^(-1/128)  = 0.78 %
 *        S = 64 KiB  P = 1 - e^(-1/8)    = 11.8 %
 *        S = 1 MiB   P = 1 - e^(-2)      = 86.5 %
 *        S = 2 MiB   P = 1 - e^(-4)      = 98.2 %   (objects of 4R: "always")
 *        S = 1 GiB   P = 1 - e^(-2048)   = 1 to double precision
 * and pprof unsamples a line of c objects, b bytes by 1/(1-exp(-(b/c)/R)),
 * e.g. one sampled 4 KiB object stands for 128.5 objects (514 KiB).
 * The countdown is per thread (ha_tc.sample_left, kept by the allocator),
 * so the sequence of marks on a thread is memoryless and independent of
 * other threads.  R = 1 means "record everything": the distance is 0.
 *
 * The random source is a per-thread xorshift64* generator; ln() is computed
 * here (no libm): ln(m * 2^e) = e ln 2 + ln(c) + ln(m / c), c the centre of
 * m's 1/128-wide bin in [1, 2), ln(c) and 1/c from a table built once (by
 * the atanh series, to ~1e-15), ln(1 + r) with |r| < 1/256 by 4 terms of
 * its series: no division on the sampling path, where a divide costs as
 * much as the rest of the draw.
 * Never allocates, takes no lock.
 */
#include "prof/prof.h"
#include "prof/sampler.h"

#include <string.h>

static HA_TLS uint64_t rng_state;
static uint64_t rng_seed = 0x9e3779b97f4a7c15ull;
/* HEAP_PROFILE_SEED: threads are told apart by the order they first draw
 * in, not by their addresses, so that a run is sampled alike each time */
static int rng_fixed;
static uint64_t rng_threads;

void ha_sampler_seed(uint64_t seed)
{
	/* splitmix64's finaliser: seeds 1, 2, 3 start far apart */
	seed += 0x9e3779b97f4a7c15ull;
	seed = (seed ^ (seed >> 30)) * 0xbf58476d1ce4e5b9ull;
	seed = (seed ^ (seed >> 27)) * 0x94d049bb133111ebull;
	rng_seed = (seed ^ (seed >> 31)) | 1;
	__atomic_store_n(&rng_fixed, 1, __ATOMIC_RELAXED);
}

static uint64_t rng_next(void)
{
	uint64_t x = rng_state;
	if (HA_UNLIKELY(x == 0)) {
		/* per-thread seed: the TLS address differs per thread */
		uint64_t t = __atomic_load_n(&rng_fixed, __ATOMIC_RELAXED)
			   ? __atomic_add_fetch(&rng_threads, 1, __ATOMIC_RELAXED)
			   : (uint64_t)(uintptr_t)&rng_state;
		x = rng_seed ^ (t * 0xff51afd7ed558ccdull);
		x ^= x >> 33;
		if (!x)
			x = 1;
	}
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* ln(x), x > 0, by 2 atanh((m-1)/(m+1)) to s^23 (relative error ~1e-15
 * for m in [0.707, 1.414)): slow, only to build the table. */
static double ln_series(double x)
{
	uint64_t bits;
	memcpy(&bits, &x, sizeof bits);
	int e = (int)((bits >> 52) & 0x7ff) - 1023;
	bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
	double m;
	memcpy(&m, &bits, sizeof m);          /* m in [1, 2) */
	if (m > 1.41421356237309515) {        /* keep s small: m in [0.707, 1.414) */
		m *= 0.5;
		e++;
	}
	double s = (m - 1) / (m + 1), s2 = s * s, sum = 0;
	for (int k = 23; k >= 1; k -= 2)
		sum = sum * s2 + 2.0 / k;
	return e * 0.69314718055994531 + s * sum;
}

#define LN_BINS 128
static double ln_c[LN_BINS], inv_c[LN_BINS];
static int ln_ready;

/* Every caller computes the same values: relaxed stores, published by the
 * release store of ln_ready. */
static HA_NOINLINE void ln_init(void)
{
	for (int k = 0; k < LN_BINS; k++) {
		double c = 1 + (k + 0.5) / LN_BINS, l = ln_series(c), i = 1 / c;
		__atomic_store(&ln_c[k], &l, __ATOMIC_RELAXED);
		__atomic_store(&inv_c[k], &i, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&ln_ready, 1, __ATOMIC_RELEASE);
}

/* ln(x), x > 0 normal: table and 4-term series, absolute error < 1e-12. */
double ha_ln(double x)
{
	if (HA_UNLIKELY(!__atomic_load_n(&ln_ready, __ATOMIC_ACQUIRE)))
		ln_init();
	uint64_t bits;
	memcpy(&bits, &x, sizeof bits);
	int e = (int)((bits >> 52) & 0x7ff) - 1023;
	unsigned k = (unsigned)(bits >> (52 - 7)) & (LN_BINS - 1);
	bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
	double m;
	memcpy(&m, &bits, sizeof m);          /* m in [1, 2), in bin k */
	double r = m * inv_c[k] - 1;          /* |r| <= 1/257 */
	double l1r = r * (1 - r * (0.5 - r * (1.0 / 3 - r * 0.25)));
	return e * 0.69314718055994531 + (ln_c[k] + l1r);
}

/* e^y for y <= 0 without libm: 2^k e^f with f in (-ln 2, 0], e^f by its
 * Taylor series to f^12 in Horner form (relative error < 1e-9), 2^k put
 * into the exponent bits; 0 below -700.  No division: this runs twice per
 * sampled object in estimate mode. */
double ha_exp_neg(double y)
{
	if (y < -700)
		return 0;
	int k = (int)(y * 1.4426950408889634);   /* y / ln 2, toward 0 */
	double f = y - k * 0.69314718055994531;
	double sum = 1 + f * (1 + f * (1.0 / 2 + f * (1.0 / 6 + f * (1.0 / 24 +
		     f * (1.0 / 120 + f * (1.0 / 720 + f * (1.0 / 5040 +
		     f * (1.0 / 40320 + f * (1.0 / 362880 + f * (1.0 / 3628800 +
		     f * (1.0 / 39916800 + f * (1.0 / 479001600))))))))))));
	uint64_t bits;                           /* sum in (0.5, 1]: scale by 2^k, */
	memcpy(&bits, &sum, sizeof bits);        /* k >= -1010, no denormals */
	bits += (uint64_t)(int64_t)k << 52;
	memcpy(&sum, &bits, sizeof sum);
	return sum;
}

uint64_t ha_sampler_unsample(uint64_t req, int64_t r)
{
	if (r <= 1 || req == 0)
		return req;
	double x = (double)req / (double)r;
	return (uint64_t)((double)req / ha_sample_p(x) + 0.5);
}

int64_t ha_sampler_next(int64_t r)
{
	if (r <= 1)
		return 0;
	/* U in (0, 1]: 53 random bits, +1 so ln never sees 0 */
	double u = ((double)(rng_next() >> 11) + 1.0) * (1.0 / 9007199254740992.0);
	double d = -ha_ln(u) * (double)r;
	if (d > 4e18)
		d = 4e18;
	return d > 0 ? (int64_t)d : 0;   /* ln(1) may come out as -2e-13 */
}
