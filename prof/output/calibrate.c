/* prof/output/calibrate.c — a sampled profile's values, scaled to the exact books.
 *
 * The lines of a sampled profile are estimates: pprof unsamples a line of
 * c objects and b bytes by 1 / p, p = 1 - e^(-(b/c)/R) (Go's
 * scaleHeapSample), and the sum of those estimates misses the true total by
 * about sqrt(R / bytes) (docs/heap-profile-spec.md §4).  The allocator's
 * books know the totals of the same allocations exactly, in the unit the
 * lines count (class bytes; requested bytes in compatibility mode), so
 * each line's estimate is multiplied by  exact total / sum of estimates,
 * one factor per value type, and rounded by largest remainder so that the
 * lines add up to the exact total to the byte:
 *   alloc_space   the books' bytes allocated since the session started:
 *                 exact (every allocation charges the countdown);
 *   inuse_space   the books' in use now less in use at the start, the
 *                 figure every dump prints: the session's blocks still
 *                 live, exactly, while no block older than the session has
 *                 been freed (true of a HEAPPROFILE session, but for the
 *                 few blocks made before our constructor).  When the
 *                 estimate exceeds it by more than 4 standard errors, older
 *                 blocks were freed: the session's in use then lies between
 *                 that figure and min(allocated since the start, in use
 *                 now), the estimate is kept within those bounds and the
 *                 profile says so in its comments;
 *   *_objects     the books count bytes, not objects: a line's objects are
 *                 scaled by its bytes' factor (an estimate, rounded the same
 *                 way to the scaled total).
 * The two factors differ, so a line all in use may show a little more in
 * use than allocated (within its sampling error).  Holding such lines at
 * their allocated moves the difference into the lines with frees, and
 * measured worse (bench/calib over 30 seeds: cal_row's in-use RMS error
 * 28% -> 63%), so each line keeps its own type's factor.
 * A site's own error is what calibration cannot remove: with c samples of
 * objects sampled with probability p, its relative standard error is
 * sqrt((1 - p) / c)  (c = 100 small objects: 10%; objects of 4R: p = 0.98,
 * 1.4% at c = 100).  Recording every allocation (R = 1) is exact: nothing
 * is scaled.  HEAP_PROFILE_CALIBRATE=0 writes pprof's estimates as they are.
 *
 * Working memory is ha_dump_mem (never the public malloc); no lock taken;
 * called by the writers under ha_prof_dump_lock.
 */
#include <string.h>

#include "prof/prof.h"
#include "prof/sampler.h"

/* The totals the dump being written prints (ha_calib_hold), else read when
 * a profile is made (heapalloc_profile_pprof, GetHeapProfile, HTTP). */
static struct { int set; uint64_t t[2]; } held;

void ha_calib_hold(const uint64_t t[2])
{
	held.set = t != NULL;
	if (t) {
		held.t[0] = t[0];
		held.t[1] = t[1];
	}
}

static double sqrt_pos(double x)
{
	if (x <= 0)
		return 0;
	double y = x > 1 ? x : 1;          /* Newton from above: no libm */
	for (int i = 0; i < 200; i++) {
		double z = 0.5 * (y + x / y);
		if (z >= y)
			break;
		y = z;
	}
	return y;
}

/* p for objects of avg bytes at mean interval r. */
static double p_of(double avg, int64_t r)
{
	return ha_sample_p(avg / (double)r);
}

double ha_calib_rse(uint64_t c, uint64_t b, int64_t r)
{
	if (ha_rate_records_all(r) || !c || !b)
		return 0;
	double p = p_of((double)b / (double)c, r);
	return sqrt_pos((1 - p) / (double)c);
}

/* x[i * 4 + k], i < n, rounded to out[] so that they add up to total: the
 * floors, then one more for the largest fractions (found by a histogram of
 * 4096 bins; ties within a bin go to the earlier line).  x must add up to
 * total up to rounding. */
#define BINS 4096
static void round_to(const double *x, size_t n, int k, uint64_t total, uint64_t *out)
{
	uint64_t sum = 0;
	static uint32_t hist[BINS];        /* under ha_prof_dump_lock */
	memset(hist, 0, sizeof hist);
	size_t big = 0;
	for (size_t i = 0; i < n; i++) {
		double v = x[4 * i + k];
		uint64_t f = v > 0 ? (uint64_t)v : 0;
		out[4 * i + k] = f;
		sum += f;
		double fr = v - (double)f;
		int bin = fr > 0 ? (int)(fr * BINS) : 0;
		hist[bin < BINS ? bin : BINS - 1]++;
		if (out[4 * i + k] > out[4 * big + k])
			big = i;
	}
	if (!n)
		return;
	if (sum > total) {                 /* floating-point slack only */
		uint64_t d = sum - total;
		out[4 * big + k] -= d < out[4 * big + k] ? d : out[4 * big + k];
		return;
	}
	uint64_t d = total - sum;
	if (d > n) {                       /* likewise */
		out[4 * big + k] += d - n;
		d = n;
	}
	int cut = BINS - 1;
	uint64_t above = 0;                /* lines in bins past cut */
	while (cut > 0 && above + hist[cut] < d)
		above += hist[cut--];
	uint64_t at_cut = d - above;       /* lines of bin cut that get one */
	for (size_t i = 0; i < n && d; i++) {
		double v = x[4 * i + k];
		double fr = v - (double)(v > 0 ? (uint64_t)v : 0);
		int bin = fr > 0 ? (int)(fr * BINS) : 0;
		bin = bin < BINS ? bin : BINS - 1;
		if (bin > cut || (bin == cut && at_cut)) {
			if (bin == cut)
				at_cut--;
			out[4 * i + k]++;
			d--;
		}
	}
}

/* Lines the writers write. */
static int written(const ha_line *l)
{
	return l->alloc_count && l->b->depth;
}

uint64_t *ha_calib_values(const ha_line *lines, size_t n, int64_t r, const ha_lineset *set,
			  ha_calib *c)
{
	memset(c, 0, sizeof *c);
	c->r = r;
	if (ha_rate_records_all(r) || (set && !set->books_set) || !ha_prof_opt.calibrate || !n)
		return NULL;
	uint64_t t[2];
	if (set) {
		t[0] = set->books[0];
		t[1] = set->books[1];
	} else if (held.set) {
		t[0] = held.t[0];
		t[1] = held.t[1];
	} else {
		ha_prof_totals(t);
	}
	c->books[0] = t[0];
	c->books[1] = t[0] > t[1] ? t[0] - t[1] : 0;
	/* the bound on the session's in use: what was allocated since, and
	 * what the whole heap holds now (a saved set: allocated only) */
	uint64_t b[2], q[2];
	ha_books(b, q);
	uint64_t heap = ha_prof_compat() ? (q[0] > q[1] ? q[0] - q[1] : 0) : b[1];
	if (set)
		heap = t[0];
	c->bound = heap < t[0] ? heap : t[0];
	if (c->bound < c->books[1])
		c->bound = c->books[1];

	double *x = ha_dump_mem(n * 4 * sizeof *x);
	uint64_t *v = ha_dump_mem(n * 4 * sizeof *v);
	if (!x || !v) {
		if (x)
			ha_dump_mem_free(x);
		if (v)
			ha_dump_mem_free(v);
		return NULL;
	}
	double var[2] = { 0, 0 };
	for (size_t i = 0; i < n; i++) {
		const ha_line *l = &lines[i];
		uint64_t cc[2] = { l->alloc_count, l->alloc_count - l->free_count };
		uint64_t bb[2] = { l->alloc_bytes, l->alloc_bytes - l->free_bytes };
		for (int j = 0; j < 2; j++) {
			double *o = &x[4 * i + 2 * j];
			o[0] = o[1] = 0;
			if (!written(l) || !cc[j] || !bb[j])
				continue;
			double avg = (double)bb[j] / (double)cc[j], p = p_of(avg, r);
			o[0] = (double)cc[j] / p;
			o[1] = (double)bb[j] / p;
			c->est[2 * j] += o[0];
			c->est[2 * j + 1] += o[1];
			/* Var(c / p) = N (1 - p) / p, N ~ c / p; in bytes times avg^2 */
			var[j] += (double)cc[j] * (1 - p) / (p * p) * avg * avg;
		}
	}
	c->rse[0] = c->est[1] > 0 ? sqrt_pos(var[0]) / c->est[1] : 0;
	c->rse[1] = c->est[3] > 0 ? sqrt_pos(var[1]) / c->est[3] : 0;

	/* in use: the books' figure, unless older blocks were freed */
	double want_in = (double)c->books[1];
	c->inuse = HA_CALIB_EXACT;
	if (c->est[3] > want_in + 4 * sqrt_pos(var[1]) + 0.5) {
		c->inuse = HA_CALIB_BOUNDED;
		want_in = c->est[3] < (double)c->bound ? c->est[3] : (double)c->bound;
	}
	uint64_t want[4];
	want[1] = c->books[0];
	want[3] = (uint64_t)(want_in + 0.5);
	if (c->est[3] <= 0 && want[3]) {
		/* bytes in use, but no sampled block among them (a program
		 * that freed nearly everything): no site to give them to, the
		 * allocated side is still scaled */
		c->inuse = HA_CALIB_UNSAMPLED;
		want[3] = 0;
	}
	if (c->est[1] <= 0) {
		/* nothing sampled to scale */
		ha_dump_mem_free(x);
		ha_dump_mem_free(v);
		return NULL;
	}
	for (int j = 0; j < 2; j++) {
		double f = c->est[2 * j + 1] > 0 ? (double)want[2 * j + 1] / c->est[2 * j + 1] : 0;
		c->factor[j] = f;
		want[2 * j] = (uint64_t)(c->est[2 * j] * f + 0.5);
		for (size_t i = 0; i < n; i++) {
			x[4 * i + 2 * j] *= f;
			x[4 * i + 2 * j + 1] *= f;
		}
	}
	for (int k = 0; k < 4; k++)
		round_to(x, n, k, want[k], v);
	/* a line never shows bytes without an object (Go rejects the file) */
	for (size_t i = 0; i < n; i++)
		for (int j = 0; j < 2; j++)
			if (v[4 * i + 2 * j + 1] && !v[4 * i + 2 * j])
				v[4 * i + 2 * j] = 1;
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < 4; k++)
			c->total[k] += v[4 * i + k];
	ha_dump_mem_free(x);
	c->scaled = 1;
	return v;
}

/* "12.3%" of a ratio into buf. */
static void pct(char *buf, size_t cap, double ratio)
{
	int neg = ratio < 0;
	uint64_t pm = (uint64_t)((neg ? -ratio : ratio) * 1000 + 0.5);
	ha_snprintf(buf, cap, "%s%llu.%llu%%", neg ? "-" : "", (unsigned long long)(pm / 10),
		    (unsigned long long)(pm % 10));
}

/* "1.0234" of a factor into buf. */
static void factor(char *buf, size_t cap, double f)
{
	uint64_t m = (uint64_t)(f * 10000 + 0.5);
	ha_snprintf(buf, cap, "%llu.%04llu", (unsigned long long)(m / 10000),
		    (unsigned long long)(m % 10000));
}

int ha_calib_comment(const ha_calib *c, int i, char *buf, size_t cap)
{
	char a[32], b[32], e[32];
	if (ha_rate_records_all(c->r)) {
		if (i == 0)
			return ha_snprintf(buf, cap, "heapalloc: every allocation recorded; values are "
					   "exact, in requested bytes, and add up to the totals "
					   "the dump prints");
		return -1;
	}
	if (!c->scaled) {
		if (i == 0)
			return ha_snprintf(buf, cap, "heapalloc: sampled every %lld bytes on average; "
					   "values are pprof's unsampled estimates (not calibrated)",
					   (long long)c->r);
		return -1;
	}
	switch (i) {
	case 0:
		return ha_snprintf(buf, cap, "heapalloc: sampled every %lld bytes on average; "
				   "estimates calibrated to the allocator's exact totals "
				   "(HEAP_PROFILE_CALIBRATE=0: pprof's estimates as they are)",
				   (long long)c->r);
	case 1:
		factor(a, sizeof a, c->factor[0]);
		pct(b, sizeof b, c->books[0] ? c->est[1] / (double)c->books[0] - 1 : 0);
		pct(e, sizeof e, c->rse[0]);
		return ha_snprintf(buf, cap, "alloc_space: %llu bytes allocated since the start "
				   "(exact); the estimates summed to %llu (%s, standard "
				   "error %s), scaled by %s", (unsigned long long)c->books[0],
				   (unsigned long long)(c->est[1] + 0.5), b, e, a);
	case 2:
		factor(a, sizeof a, c->factor[1]);
		pct(b, sizeof b, c->books[1] ? c->est[3] / (double)c->books[1] - 1 : 0);
		pct(e, sizeof e, c->rse[1]);
		if (c->inuse == HA_CALIB_UNSAMPLED)
			return ha_snprintf(buf, cap, "inuse_space: %llu bytes in use (exact), none "
					   "of them in a sampled block, so no site shows them",
					   (unsigned long long)c->books[1]);
		if (c->inuse == HA_CALIB_BOUNDED)
			return ha_snprintf(buf, cap, "inuse_space: %llu bytes, the estimate kept "
					   "between %llu (in use now less in use at the start) "
					   "and %llu: blocks older than the session were freed, so "
					   "the books cannot give its in use exactly",
					   (unsigned long long)c->total[3],
					   (unsigned long long)c->books[1],
					   (unsigned long long)c->bound);
		return ha_snprintf(buf, cap, "inuse_space: %llu bytes in use (exact: in use now "
				   "less in use at the start); the estimates summed to %llu "
				   "(%s, standard error %s), scaled by %s",
				   (unsigned long long)c->books[1],
				   (unsigned long long)(c->est[3] + 0.5), b, e, a);
	case 3:
		return ha_snprintf(buf, cap, "bytes: %s; objects scaled with their bytes; label "
				   "sampling_error: a site's own relative standard error, "
				   "sqrt((1 - p) / samples), in 0.1%% units",
				   ha_prof_compat() ? "requested" :
				   "size-class (requested above 32 KiB)");
	}
	return -1;
}
