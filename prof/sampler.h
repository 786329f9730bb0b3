/* prof/sampler.h — the chance that sampling at mean interval R picks an
 * allocation of x·R bytes: p = 1 − e^(−x).  sampler.c (unsampling a size,
 * and Go's scaleHeapSample of a count/bytes pair, which pprof.c and the
 * commands call) and calibrate.c (a site's relative standard error) divide
 * by it or use it, so they share this one.
 * A standalone interface (no other header of the library's): the commands
 * that unsample (heapalloc-symbolize, heapalloc-profile) link sampler.c
 * and include this alone; prof/prof.h includes it for the profiler.
 *
 * For small x, 1 − e^(−x) cancels: x = 1e-6 keeps only ~10 good digits.
 * Below 1e-3 the series x·(1 − x/2·(1 − x/3)) is used instead (its first
 * dropped term, x⁴/24, is under 5e-11 of p).  Worked numbers at R = 512 KiB:
 * a 4 KiB object (x = 1/128) has p = 0.00778, a 1 MiB one (x = 2) 0.865,
 * a 1 GiB one p = 1 to double precision.
 */
#ifndef HA_PROF_SAMPLER_H
#define HA_PROF_SAMPLER_H

#include <stdint.h>

double ha_exp_neg(double y);            /* e^y for y <= 0, no libm */
double ha_ln(double x);                 /* ln(x) for x > 0 normal, no libm */

/* Go's scaleHeapSample, what both pprofs apply to a heap_v2/R line: c
 * objects of b bytes sampled at r stand for out[0] objects of out[1]
 * bytes (truncated, as Go does; c, b themselves when every allocation is
 * recorded, r <= 1: ha_rate_records_all).  The one unsampling of a
 * count/bytes pair: pprof.c's encoder, heapalloc-profile unsample (the
 * Python readers of text profiles) and heapalloc-symbolize. */
void ha_sampler_unsample_pair(uint64_t c, uint64_t b, int64_t r, uint64_t out[2]);

static inline double ha_sample_p(double x)
{
	return x < 1e-3 ? x * (1 - x / 2 * (1 - x / 3)) : 1 - ha_exp_neg(-x);
}

#endif
