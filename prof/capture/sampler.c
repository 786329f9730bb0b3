/* prof/capture/sampler.c — how far the next sample is, in bytes.
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
 * m's 1/128-wide bin in [1, 2), ln(c) and 1/c from a table (by the atanh
 * series, to ~1e-15), ln(1 + r) with |r| < 1/256 by 4 terms of
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

#define LN_BINS 128
/* { ln(c), 1/c } for c = 1 + (k + 0.5) / 128, the centre of bin k: ln(c) by
 * 2 atanh(s) = 2 (s + s^3/3 + ... + s^23/23), s = (c - 1) / (c + 1), summed
 * from the s^23 term down (relative error ~1e-15), both printed with %a.
 * Written out rather than built at the first draw, which cost ~19,000
 * instructions. */
static const struct { double ln_c, inv_c; } ln_tab[LN_BINS] = {
	{ 0x1.ff00aa2b10bcp-9, 0x1.fe01fe01fe02p-1 },
	{ 0x1.7dc475f810a77p-7, 0x1.fa11caa01fa12p-1 },
	{ 0x1.3cea44346a575p-6, 0x1.f6310aca0dbb5p-1 },
	{ 0x1.b9fc027af9198p-6, 0x1.f25f644230ab5p-1 },
	{ 0x1.1b0d98923d97fp-5, 0x1.ee9c7f8458e02p-1 },
	{ 0x1.58a5bafc8e4d5p-5, 0x1.eae807aba01ebp-1 },
	{ 0x1.95c830ec8e3ebp-5, 0x1.e741aa59750e4p-1 },
	{ 0x1.d276b8adb0b52p-5, 0x1.e3a9179dc1a73p-1 },
	{ 0x1.075983598e472p-4, 0x1.e01e01e01e01ep-1 },
	{ 0x1.253f62f0a1417p-4, 0x1.dca01dca01dcap-1 },
	{ 0x1.42edcbea646f1p-4, 0x1.d92f2231e7f8ap-1 },
	{ 0x1.60658a93750c5p-4, 0x1.d5cac807572b2p-1 },
	{ 0x1.7da766d7b12ccp-4, 0x1.d272ca3fc5b1ap-1 },
	{ 0x1.9ab42462033adp-4, 0x1.cf26e5c44bfc6p-1 },
	{ 0x1.b78c82bb0eda1p-4, 0x1.cbe6d9601cbe7p-1 },
	{ 0x1.d4313d66cb35dp-4, 0x1.c8b265afb8a42p-1 },
	{ 0x1.f0a30c01162a6p-4, 0x1.c5894d10d4986p-1 },
	{ 0x1.0671512ca596fp-3, 0x1.c26b5392ea01cp-1 },
	{ 0x1.14785846742adp-3, 0x1.bf583ee868d8bp-1 },
	{ 0x1.2266f190a5acbp-3, 0x1.bc4fd65883e7bp-1 },
	{ 0x1.303d718e47fd3p-3, 0x1.b951e2b18ff23p-1 },
	{ 0x1.3dfc2b0ecc62ap-3, 0x1.b65e2e3beee05p-1 },
	{ 0x1.4ba36f39a55e5p-3, 0x1.b37484ad806cep-1 },
	{ 0x1.59338d9982086p-3, 0x1.b094b31d922a4p-1 },
	{ 0x1.66acd4272ad51p-3, 0x1.adbe87f94905ep-1 },
	{ 0x1.740f8f54037a4p-3, 0x1.aaf1d2f87ebfdp-1 },
	{ 0x1.815c0a14357ebp-3, 0x1.a82e65130e159p-1 },
	{ 0x1.8e928de886d41p-3, 0x1.a574107688a4ap-1 },
	{ 0x1.9bb362e7dfb83p-3, 0x1.a2c2a87c51cap-1 },
	{ 0x1.a8becfc882f19p-3, 0x1.a01a01a01a01ap-1 },
	{ 0x1.b5b519e8fb5a4p-3, 0x1.9d79f176b682dp-1 },
	{ 0x1.c2968558c18cp-3, 0x1.9ae24ea5510dap-1 },
	{ 0x1.cf6354e09c5dcp-3, 0x1.9852f0d8ec0ffp-1 },
	{ 0x1.dc1bca0abec7ep-3, 0x1.95cbb0be377aep-1 },
	{ 0x1.e8c0252aa5a5fp-3, 0x1.934c67f9b2ce6p-1 },
	{ 0x1.f550a564b7b36p-3, 0x1.90d4f120190d5p-1 },
	{ 0x1.00e6c45ad501dp-2, 0x1.8e6527af1373fp-1 },
	{ 0x1.071b85fcd590cp-2, 0x1.8bfce8062ff3ap-1 },
	{ 0x1.0d46b579ab74cp-2, 0x1.899c0f601899cp-1 },
	{ 0x1.136870293a8bp-2, 0x1.87427bcc092b9p-1 },
	{ 0x1.1980d2dd4236fp-2, 0x1.84f00c2780614p-1 },
	{ 0x1.1f8ff9e48a2f3p-2, 0x1.82a4a0182a4ap-1 },
	{ 0x1.2596010df7639p-2, 0x1.8060180601806p-1 },
	{ 0x1.2b9303ab89d25p-2, 0x1.7e225515a4f1dp-1 },
	{ 0x1.31871c9544186p-2, 0x1.7beb3922e017cp-1 },
	{ 0x1.3772662bfd85bp-2, 0x1.79baa6bb6398bp-1 },
	{ 0x1.3d54fa5c1f71p-2, 0x1.77908119ac60dp-1 },
	{ 0x1.432ef2a04e813p-2, 0x1.756cac201756dp-1 },
	{ 0x1.49006804009d1p-2, 0x1.734f0c541fe8dp-1 },
	{ 0x1.4ec9732600269p-2, 0x1.713786d9c7c09p-1 },
	{ 0x1.548a2c3add262p-2, 0x1.6f26016f26017p-1 },
	{ 0x1.5a42ab0f4cfe1p-2, 0x1.6d1a62681c861p-1 },
	{ 0x1.5ff3070a793d5p-2, 0x1.6b1490aa31a3dp-1 },
	{ 0x1.659b57303e1f2p-2, 0x1.691473a88d0cp-1 },
	{ 0x1.6b3bb2235943cp-2, 0x1.6719f3601671ap-1 },
	{ 0x1.70d42e2789236p-2, 0x1.6524f853b4aa3p-1 },
	{ 0x1.7664e1239dbcfp-2, 0x1.63356b88ac0dep-1 },
	{ 0x1.7bede0a37afbfp-2, 0x1.614b36831ae94p-1 },
	{ 0x1.816f41da0d494p-2, 0x1.5f66434292dfcp-1 },
	{ 0x1.86e919a330bap-2, 0x1.5d867c3ece2a5p-1 },
	{ 0x1.8c5b7c858b48ap-2, 0x1.5babcc647fa91p-1 },
	{ 0x1.91c67eb45a83ep-2, 0x1.59d61f123ccaap-1 },
	{ 0x1.972a341135158p-2, 0x1.580560158056p-1 },
	{ 0x1.9c86b02dc0863p-2, 0x1.56397ba7c52e2p-1 },
	{ 0x1.a1dc064d5b994p-2, 0x1.54725e6bb82fep-1 },
	{ 0x1.a72a4966bd9eap-2, 0x1.52aff56a8054bp-1 },
	{ 0x1.ac718c258b0e4p-2, 0x1.50f22e111c4c5p-1 },
	{ 0x1.b1b1e0ebdfc5bp-2, 0x1.4f38f62dd4c9bp-1 },
	{ 0x1.b6eb59d3cf35dp-2, 0x1.4d843bedc2c4cp-1 },
	{ 0x1.bc1e08b0dad0ap-2, 0x1.4bd3edda68fe1p-1 },
	{ 0x1.c149ff115f027p-2, 0x1.4a27fad76014ap-1 },
	{ 0x1.c66f4e3ff6ff8p-2, 0x1.488052201488p-1 },
	{ 0x1.cb8e0744d7acap-2, 0x1.46dce34596066p-1 },
	{ 0x1.d0a63ae721e64p-2, 0x1.453d9e2c776cap-1 },
	{ 0x1.d5b7f9ae2c684p-2, 0x1.43a2730abee4dp-1 },
	{ 0x1.dac353e2c5954p-2, 0x1.420b5265e5951p-1 },
	{ 0x1.dfc859906d5b5p-2, 0x1.40782d10e6566p-1 },
	{ 0x1.e4c71a8687704p-2, 0x1.3ee8f42a5af07p-1 },
	{ 0x1.e9bfa659861f4p-2, 0x1.3d5d991aa75c6p-1 },
	{ 0x1.eeb20c640ddf4p-2, 0x1.3bd60d9232955p-1 },
	{ 0x1.f39e5bc811e5cp-2, 0x1.3a524387ac822p-1 },
	{ 0x1.f884a36fe9ec2p-2, 0x1.38d22d366088ep-1 },
	{ 0x1.fd64f20f61571p-2, 0x1.3755bd1c945eep-1 },
	{ 0x1.011fab125ff8ap-1, 0x1.35dce5f9f2af8p-1 },
	{ 0x1.0389eefce633bp-1, 0x1.34679ace01346p-1 },
	{ 0x1.05f14bd26459cp-1, 0x1.32f5ced6a1dfap-1 },
	{ 0x1.0855c884b450ep-1, 0x1.3187758e9ebb6p-1 },
	{ 0x1.0ab76bece14d2p-1, 0x1.301c82ac4026p-1 },
	{ 0x1.0d163ccb9d6b8p-1, 0x1.2eb4ea1fed14bp-1 },
	{ 0x1.0f7241c9b497dp-1, 0x1.2d50a012d50ap-1 },
	{ 0x1.11cb81787ccf8p-1, 0x1.2bef98e5a3711p-1 },
	{ 0x1.1422025243d45p-1, 0x1.2a91c92f3c105p-1 },
	{ 0x1.1675cababa60ep-1, 0x1.293725bb804a5p-1 },
	{ 0x1.18c6e0ff5cf06p-1, 0x1.27dfa38a1ce4dp-1 },
	{ 0x1.1b154b57da29fp-1, 0x1.268b37cd60127p-1 },
	{ 0x1.1d610fe677003p-1, 0x1.2539d7e9177b2p-1 },
	{ 0x1.1faa34b87094cp-1, 0x1.23eb79717605bp-1 },
	{ 0x1.21f0bfc65beecp-1, 0x1.22a0122a0122ap-1 },
	{ 0x1.2434b6f483934p-1, 0x1.21579804855e6p-1 },
	{ 0x1.26762013430ep-1, 0x1.2012012012012p-1 },
	{ 0x1.28b500df60783p-1, 0x1.1ecf43c7fb84cp-1 },
	{ 0x1.2af15f02640adp-1, 0x1.1d8f5672e4abdp-1 },
	{ 0x1.2d2b4012edc9ep-1, 0x1.1c522fc1ce059p-1 },
	{ 0x1.2f62a99509546p-1, 0x1.1b17c67f2bae3p-1 },
	{ 0x1.3197a0fa7fe6ap-1, 0x1.19e0119e0119ep-1 },
	{ 0x1.33ca2ba328995p-1, 0x1.18ab083902bdbp-1 },
	{ 0x1.35fa4edd36eap-1, 0x1.1778a191bd684p-1 },
	{ 0x1.38280fe58797ep-1, 0x1.1648d50fc3201p-1 },
	{ 0x1.3a5373e7ebdf9p-1, 0x1.151b9a3fdd5c9p-1 },
	{ 0x1.3c7c7fff73206p-1, 0x1.13f0e8d344724p-1 },
	{ 0x1.3ea33936b2f5bp-1, 0x1.12c8b89edc0acp-1 },
	{ 0x1.40c7a4880dce9p-1, 0x1.11a3019a74826p-1 },
	{ 0x1.42e9c6ddf80bfp-1, 0x1.107fbbe01108p-1 },
	{ 0x1.4509a5133bb0ap-1, 0x1.0f5edfab325a2p-1 },
	{ 0x1.472743f33aaadp-1, 0x1.0e40655826011p-1 },
	{ 0x1.4942a83a2fc07p-1, 0x1.0d24456359e3ap-1 },
	{ 0x1.4b5bd6956e273p-1, 0x1.0c0a7868b4171p-1 },
	{ 0x1.4d72d3a39fdp-1, 0x1.0af2f722eecb5p-1 },
	{ 0x1.4f87a3f5026e8p-1, 0x1.09ddba6af836p-1 },
	{ 0x1.519a4c0ba3446p-1, 0x1.08cabb37565e2p-1 },
	{ 0x1.53aad05b99b7cp-1, 0x1.07b9f29b8eae2p-1 },
	{ 0x1.55b9354b40bcdp-1, 0x1.06ab59c7912fbp-1 },
	{ 0x1.57c57f336f19p-1, 0x1.059eea0727586p-1 },
	{ 0x1.59cfb25fae87ep-1, 0x1.04949cc1664c5p-1 },
	{ 0x1.5bd7d30e71c73p-1, 0x1.038c6b78247fcp-1 },
	{ 0x1.5ddde57149923p-1, 0x1.02864fc7729e9p-1 },
	{ 0x1.5fe1edad18918p-1, 0x1.0182436517a37p-1 },
	{ 0x1.61e3efda46466p-1, 0x1.008040201008p-1 },
};

/* ln(x), x > 0 normal: table and 4-term series, absolute error < 1e-12.
 * Inline in the draw (ha_sampler_next); ha_ln is it for the tests. */
static inline double ln_inline(double x)
{
	uint64_t bits;
	memcpy(&bits, &x, sizeof bits);
	int e = (int)((bits >> 52) & 0x7ff) - 1023;
	unsigned k = (unsigned)(bits >> (52 - 7)) & (LN_BINS - 1);
	bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
	double m;
	memcpy(&m, &bits, sizeof m);          /* m in [1, 2), in bin k */
	double r = m * ln_tab[k].inv_c - 1;   /* |r| <= 1/257 */
	double l1r = r * (1 - r * (0.5 - r * (1.0 / 3 - r * 0.25)));
	return e * 0.69314718055994531 + (ln_tab[k].ln_c + l1r);
}

double ha_ln(double x)
{
	return ln_inline(x);
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
	if (ha_rate_records_all(r) || req == 0)
		return req;
	double x = (double)req / (double)r;
	return (uint64_t)((double)req / ha_sample_p(x) + 0.5);
}

void ha_sampler_unsample_pair(uint64_t c, uint64_t b, int64_t r, uint64_t out[2])
{
	if (!c || !b || ha_rate_records_all(r)) {
		out[0] = c;
		out[1] = b;
		return;
	}
	double scale = 1.0 / ha_sample_p((double)b / (double)c / (double)r);
	out[0] = (uint64_t)((double)c * scale);
	out[1] = (uint64_t)((double)b * scale);
}

int64_t ha_sampler_next(int64_t r)
{
	if (ha_rate_records_all(r))
		return 0;
	/* U in (0, 1]: 53 random bits, +1 so ln never sees 0 */
	double u = ((double)(rng_next() >> 11) + 1.0) * (1.0 / 9007199254740992.0);
	double d = -ln_inline(u) * (double)r;
	if (d > 4e18)
		d = 4e18;
	return d > 0 ? (int64_t)d : 0;   /* ln(1) may come out as -2e-13 */
}
