/* prof/sampler.h — the chance that sampling at mean interval R picks an
 * allocation of x·R bytes: p = 1 − e^(−x).  sampler.c (unsampling a size,
 * and Go's scaleHeapSample of a count/bytes pair, which pprof.c and the
 * commands call) and calibrate.c (a site's relative standard error) divide
 * by it or use it, so they share this one.
 * (Header-only until prof.h's sampler.c group can take it.)
 *
 * For small x, 1 − e^(−x) cancels: x = 1e-6 keeps only ~10 good digits.
 * Below 1e-3 the series x·(1 − x/2·(1 − x/3)) is used instead (its first
 * dropped term, x⁴/24, is under 5e-11 of p).  Worked numbers at R = 512 KiB:
 * a 4 KiB object (x = 1/128) has p = 0.00778, a 1 MiB one (x = 2) 0.865,
 * a 1 GiB one p = 1 to double precision.
 */
#ifndef HA_PROF_SAMPLER_H
#define HA_PROF_SAMPLER_H

#include "prof/prof.h"

static inline double ha_sample_p(double x)
{
	return x < 1e-3 ? x * (1 - x / 2 * (1 - x / 3)) : 1 - ha_exp_neg(-x);
}

#endif
