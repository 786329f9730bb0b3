/* tests/unit/prof_unit.c — unit tier for prof/: the sampler's distribution, the
 * option parsers and the stack table's size keys, compiled straight from
 * the sources (tests/integration/prof.am) with stand-ins for the allocator's raw memory,
 * plus the object map (probe runs, deletion, growth) against a reference,
 * so no allocator and no profiler state is involved.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "prof/prof.h"
#include "tests/lib/check.h"

/* stand-ins for alloc/ (this program is not linked with the library) */
void *ha_raw_malloc(size_t n) { return malloc(n); }
void *ha_raw_calloc(size_t n, size_t m) { return calloc(n, m); }
void ha_raw_free(void *p) { free(p); }
void *ha_dump_mem(size_t n) { return malloc(n); }
void ha_dump_mem_free(void *p) { free(p); }
HA_TLS unsigned ha_locks_held;
static uint32_t session_now = 7;
int ha_alloc_session_live(uint32_t session) { return session == session_now; }
/* and for prof/session/peak.c: no peak image here */
int ha_peak_inc;
void ha_peak_touch_slow(ha_bucket *b) { (void)b; }

static void sampler(void)
{
	const int64_t r = 524288;
	const int n = 400000;
	double sum = 0;
	int below4k = 0, below1m = 0;
	for (int i = 0; i < n; i++) {
		int64_t d = ha_sampler_next(r);
		CHECK_GE(d, 0);
		sum += (double)d;
		below4k += d < 4096;
		below1m += d < (1 << 20);
	}
	/* mean R: sigma of the mean is R/sqrt(n) = 0.16% of R */
	double mean = sum / n;
	CHECK(fabs(mean - r) < 0.01 * r);
	/* P(d < S) = 1 - exp(-S/R): 0.78% for 4 KiB, 86.5% for 1 MiB */
	double p4k = (double)below4k / n, p1m = (double)below1m / n;
	CHECK(fabs(p4k - (1 - exp(-4096.0 / r))) < 0.001);
	CHECK(fabs(p1m - (1 - exp(-2.0))) < 0.005);
	CHECK_EQ(ha_sampler_next(1), 0);
	CHECK_EQ(ha_sampler_next(0), 0);
	/* the unsampling weight's e^y against libm, over every magnitude it
	 * meets (y = -req/R): relative error < 1e-9, 0 past -700 */
	for (double y = -0.0; y > -745; y = y * 1.37 - 1e-7) {
		double want = exp(y), got = ha_exp_neg(y);
		if (y < -700)
			CHECK(got == 0);
		else
			CHECK(fabs(got - want) <= 1e-9 * want);
	}
	CHECK(ha_exp_neg(0) == 1);
	/* the draw's ln against libm: every bin of the table, both ends of
	 * the uniform's range (2^-53 .. 1) and values around 1 */
	for (double x = 0x1p-53; x <= 4; x *= 1.0009765625 + 1e-9) {
		double want = log(x), got = ha_ln(x);
		if (!(fabs(got - want) <= 1e-12 + 1e-15 * fabs(want))) {
			CHECK(!"ha_ln matches log");
			fprintf(stderr, "ha_ln(%.17g) = %.17g, log %.17g\n", x, got, want);
			break;
		}
	}
	CHECK(fabs(ha_ln(1.0)) < 1e-12);
	/* pprof's scale 1/(1 - e^-x): a 4 KiB object at 512 KiB stands for
	 * 128.5 objects; 4R-sized ones for themselves and ~1.9% more */
	CHECK_EQ(ha_sampler_unsample(4096, r), (uint64_t)(4096 / (1 - exp(-4096.0 / r)) + 0.5));
	CHECK_EQ(ha_sampler_unsample(4 * r, r), (uint64_t)(4.0 * r / (1 - exp(-4.0)) + 0.5));
	CHECK_EQ(ha_sampler_unsample(1, r), (uint64_t)(1 / (1 - exp(-1.0 / r)) + 0.5));
	CHECK_EQ(ha_sampler_unsample(777, 1), 777);
}

static void options(void)
{
	int64_t v;
	CHECK_EQ(ha_env_parse_size("524288", &v), 0);
	CHECK_EQ(v, 524288);
	CHECK_EQ(ha_env_parse_size("64M", &v), 0);
	CHECK_EQ(v, 64 << 20);
	CHECK_EQ(ha_env_parse_size("1g", &v), 0);
	CHECK_EQ(v, 1 << 30);
	CHECK_EQ(ha_env_parse_size("512KiB", &v), 0);
	CHECK_EQ(v, 512 << 10);
	CHECK_EQ(ha_env_parse_size("0", &v), 0);
	CHECK_EQ(v, 0);
	const char *junk[] = { "", "abc", "-1", "12abc", "0x10", " 12", "1.5", "8E",
			       "18446744073709551616", "18446744073709551617",
			       "9223372036854775808", "16777216T" };
	for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++)
		CHECK_EQ(ha_env_parse_size(junk[i], &v), EINVAL);
	CHECK_EQ(ha_env_parse_size("9223372036854775807", &v), 0);
	CHECK_EQ(v, INT64_MAX);

	const char *yes[] = { "", "t", "T", "y", "Y", "1", "true", "yes" };
	const char *no[] = { "f", "F", "n", "N", "0", "false", "no" };
	for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
		CHECK_EQ(ha_env_parse_bool(yes[i], &v), 0);
		CHECK_EQ(v, 1);
	}
	for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
		CHECK_EQ(ha_env_parse_bool(no[i], &v), 0);
		CHECK_EQ(v, 0);
	}
	CHECK_EQ(ha_env_parse_bool("12abc", &v), EINVAL);
	CHECK_EQ(ha_env_parse_bool("2", &v), EINVAL);

	CHECK_EQ(ha_env_parse_signal("SIGUSR2", &v), 0);
	CHECK_EQ(v, SIGUSR2);
	CHECK_EQ(ha_env_parse_signal("usr1", &v), 0);
	CHECK_EQ(v, SIGUSR1);
	CHECK_EQ(ha_env_parse_signal("12", &v), 0);
	CHECK_EQ(v, 12);
	CHECK_EQ(ha_env_parse_signal("RTMIN+1", &v), 0);
	CHECK_EQ(v, SIGRTMIN + 1);
	const char *badsig[] = { "", "0", "9", "SIGKILL", "SIGSTOP", "99", "NOSUCHSIG", "12abc", "1k" };
	for (size_t i = 0; i < sizeof badsig / sizeof badsig[0]; i++)
		CHECK_EQ(ha_env_parse_signal(badsig[i], &v), EINVAL);

	/* fractions in parts per million */
	const struct { const char *s; int64_t v; } frac[] = {
		{ "0.9", 900000 }, { ".9", 900000 }, { "90%", 900000 }, { "92.5%", 925000 },
		{ "1", 1000000 }, { "100%", 1000000 }, { "0", 0 }, { "0%", 0 },
		{ "0.1234567", 123456 }, { "1.0", 1000000 }, { "5%", 50000 },
	};
	for (size_t i = 0; i < sizeof frac / sizeof frac[0]; i++) {
		v = -1;
		CHECK_EQ(ha_env_parse_fraction(frac[i].s, &v), 0);
		CHECK_EQ(v, frac[i].v);
	}
	const char *badfrac[] = { "", "90", "1.01", "101%", "0.9x", "%", ".", "-0.5", "0.9%%",
				  "99999999999999999999" };
	for (size_t i = 0; i < sizeof badfrac / sizeof badfrac[0]; i++)
		CHECK_EQ(ha_env_parse_fraction(badfrac[i], &v), EINVAL);
}

static void size_keys(void)
{
	/* one key per size below 16; above, sizes within 1/8 share a key */
	for (size_t s = 0; s < 16; s++)
		CHECK_EQ(ha_table_size_key(s), s);
	CHECK_EQ(ha_table_size_key(1000), ha_table_size_key(1023));
	CHECK_NE(ha_table_size_key(1023), ha_table_size_key(1024));
	CHECK_NE(ha_table_size_key(4096), ha_table_size_key(65536));
	uint32_t prev = 0;
	for (size_t s = 1; s < (1u << 24); s += s / 7 + 1) {
		uint32_t k = ha_table_size_key(s);
		CHECK_GE(k, prev);              /* monotonic */
		prev = k;
	}
	/* every key spans sizes within 1/8 of each other */
	for (size_t s = 16; s < (1u << 20); s = s * 9 / 8 + 1) {
		size_t lo = s, hi = s;
		while (lo > 16 && ha_table_size_key(lo - 1) == ha_table_size_key(s))
			lo--;
		while (ha_table_size_key(hi + 1) == ha_table_size_key(s))
			hi++;
		CHECK_LE((hi - lo + 1) * 8, lo + 8);
	}
}

/* The object map against a reference: random inserts and removes of
 * clustered addresses (long probe runs, wrap-around, growth), every bucket's
 * freed counts equal to what was removed, the table's snapshot consistent. */
/* A stop's teardown (session.c): the table and the map, under every lock. */
static void destroy_both(void)
{
	ha_table_lock();
	ha_objmap_lock_all();
	ha_objmap_destroy();
	ha_table_destroy();
	ha_objmap_unlock_all();
	ha_table_unlock();
}

static void objmap_and_table(void)
{
	REQUIRE(ha_table_init() == 0);
	REQUIRE(ha_objmap_init() == 0);
	enum { NB = 8, NA = 20000 };
	ha_bucket *b[NB];
	uintptr_t pcs[3] = { 0x1000, 0x2000, 0x3000 };
	ha_table_lock();
	for (int i = 0; i < NB; i++) {
		pcs[0] = 0x1000 + (uintptr_t)i;
		b[i] = ha_table_record(pcs, 3, 100);
		REQUIRE(b[i] != NULL);
	}
	/* same stack and size key: the same bucket; another size: another */
	pcs[0] = 0x1000;
	CHECK(ha_table_record(pcs, 3, 101) == b[0]);
	CHECK(ha_table_record(pcs, 3, 100000) != b[0]);
	ha_table_unlock();

	static int live[NA];            /* bucket index + 1, or 0 */
	uint64_t removed[NB] = { 0 }, inserted[NB] = { 0 };
	uint64_t x = 88172645463325252ull;
	for (int step = 0; step < 400000; step++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		int a = (int)(x % NA);
		uintptr_t addr = 0x7f0000000000ull + (uintptr_t)a * 16;
		if (live[a]) {
			CHECK_EQ(ha_objmap_remove(addr), 1);
			removed[live[a] - 1]++;
			live[a] = 0;
		} else {
			int k = (int)((x >> 32) % NB);
			CHECK_EQ(ha_objmap_insert(addr, b[k], 1, 0), 0);
			inserted[k]++;
			live[a] = k + 1;
		}
		if (step % 50000 == 0)      /* an address never inserted */
			CHECK_EQ(ha_objmap_remove(0x100000000ull + (uintptr_t)step * 16), 0);
	}
	uint64_t objs, mem, nlive = 0;
	for (int a = 0; a < NA; a++)
		nlive += live[a] != 0;
	ha_objmap_stats(&objs, &mem);
	CHECK_EQ(objs, nlive);
	for (int k = 0; k < NB; k++) {
		CHECK_EQ(b[k]->free_count, removed[k]);
		CHECK_EQ(b[k]->free_bytes, removed[k]);
	}
	for (int a = 0; a < NA; a++)    /* every live one is still found */
		if (live[a])
			CHECK_EQ(ha_objmap_remove(0x7f0000000000ull + (uintptr_t)a * 16), 1);
	ha_objmap_stats(&objs, &mem);
	CHECK_EQ(objs, 0);
	/* a record kept by the allocator: counted in its bucket, remembered
	 * in the map for its time alone, its free counted back (with its
	 * lifetime) only while its session lives */
	uint32_t idx = 99;
	pcs[0] = 0x1000 + 3;
	uint64_t a0 = b[3]->alloc_count, f0 = b[3]->free_count, fb0 = b[3]->free_bytes;
	uint64_t h = 0, t0 = ha_age_now();
	const uintptr_t K1 = 0x7e0000000000ull, K2 = K1 + 16, K3 = K1 + 32;
	CHECK_EQ(ha_objmap_count(K1, 0, &h, pcs, 3, 100, 100, t0, &idx), 1);
	CHECK_EQ(idx, b[3]->idx);
	CHECK_EQ(h, ha_table_hash(pcs, 3, 100));
	CHECK_EQ(b[3]->alloc_count, a0 + 1);
	ha_objmap_stats(&objs, &mem);
	CHECK_EQ(objs, 1);
	uintptr_t nope[3] = { 0x9000, 0x2000, 0x3000 };
	CHECK_EQ(ha_objmap_count(K2, 0, &h, nope, 3, 100, 100, t0, &idx), -1);
	CHECK_EQ(h, ha_table_hash(nope, 3, 100));
	/* a hint: its bucket when the stack is that bucket's, the hash's when
	 * not (another stack, another size key, no such bucket) */
	h = 0;
	CHECK_EQ(ha_objmap_count(K2, b[3]->idx + 1, &h, pcs, 3, 100, 100, t0 - 5000000000ull, &idx), 1);
	CHECK_EQ(idx, b[3]->idx);
	CHECK_EQ(h, 0);                   /* found at the hint: not hashed */
	CHECK_EQ(b[3]->alloc_count, a0 + 2);
	pcs[0] = 0x1000 + 4;
	CHECK_EQ(ha_objmap_count(K3, b[3]->idx + 1, &h, pcs, 3, 100, 100, t0, &idx), 1);
	CHECK_EQ(idx, b[4]->idx);
	CHECK_EQ(b[3]->alloc_count, a0 + 2);
	CHECK_EQ(ha_objmap_count(K3, b[4]->idx + 1, &h, pcs, 3, 100000, 100000, t0, &idx), -1);
	CHECK_EQ(ha_objmap_count(K3, NB + 50, &h, nope, 3, 100, 100, t0, &idx), -1);
	ha_objmap_stats(&objs, &mem);
	CHECK_EQ(objs, 3);
	/* the dump's copy: by bucket, oldest first, with the times given */
	ha_ages ag;
	REQUIRE(ha_ages_take(&ag) == 0);
	CHECK_EQ(ag.n, 3);
	size_t first = 99;
	CHECK_EQ(ha_ages_of(&ag, b[3]->idx, &first), 2);
	CHECK_EQ(ag.v[first].t, t0 - 5000000000ull);
	CHECK_EQ(ag.v[first + 1].t, t0);
	CHECK_EQ(ag.v[first].req, 100);
	CHECK_EQ(ha_age_seconds(ag.now, ag.v[first].t), 5);   /* this test runs in < 1 s */
	CHECK_EQ(ha_ages_of(&ag, b[4]->idx, &first), 1);
	CHECK_EQ(ha_ages_of(&ag, b[5]->idx, &first), 0);
	ha_ages_free(&ag);
	pcs[0] = 0x1000 + 3;
	uint64_t l0[HA_LIFE_BINS];
	memcpy(l0, b[3]->life, sizeof l0);
	ha_objmap_free_kept(K1, b[3]->idx, 112, session_now);
	CHECK_EQ(b[3]->free_count, f0 + 1);
	CHECK_EQ(b[3]->free_bytes, fb0 + 112);
	ha_objmap_free_kept(K2, b[3]->idx, 112, session_now - 1);   /* ended */
	ha_objmap_free_kept(K2, NB + 5, 112, session_now);          /* no bucket */
	CHECK_EQ(b[3]->free_count, f0 + 1);
	ha_objmap_free_kept(K2, b[3]->idx, 112, session_now);
	ha_objmap_free_kept(K3, b[4]->idx, 112, session_now);
	CHECK_EQ(b[3]->free_count, f0 + 2);
	/* K1 lived under a second (bins 0..6), K2 5 s (bin 7: 1 s-10 s) */
	CHECK_EQ(b[3]->life[7], l0[7] + 112);
	uint64_t under = 0;
	for (int i = 0; i < 7; i++)
		under += b[3]->life[i] - l0[i];
	CHECK_EQ(under, 112);
	ha_objmap_stats(&objs, &mem);
	CHECK_EQ(objs, 0);
	size_t n = 0;
	ha_table_lock();
	ha_line *lines = ha_table_snapshot(&n);
	ha_table_unlock();
	CHECK_EQ(n, NB + 1);
	free(lines);
	(void)inserted;
	destroy_both();
	/* after a stop the table is gone: nothing to count, nothing touched */
	ha_objmap_free_kept(0x7e0000000000ull, 0, 112, session_now);
}

/* The chain heads start at 1 Ki (8 KiB) and double as buckets come: a few
 * stacks hold a few pages, and every bucket is still found after each
 * doubling. */
static void table_grows(void)
{
	enum { NS = 5000 };
	static ha_bucket *b[NS];
	uint64_t buckets, mem, drops;
	REQUIRE(ha_table_init() == 0);
	ha_table_lock();
	uintptr_t pcs[2] = { 0, 0x5000 };
	for (int i = 0; i < 10; i++) {
		pcs[0] = 0x10000 + (uintptr_t)i * 64;
		b[i] = ha_table_record(pcs, 2, 64);
	}
	ha_table_unlock();
	ha_table_stats(&buckets, &mem, &drops);
	CHECK_EQ(buckets, 10);
	CHECK_LE(mem, 64 * 1024 + 8192 + 4096);   /* a chunk, the first heads, the index */
	ha_table_lock();
	for (int i = 10; i < NS; i++) {
		pcs[0] = 0x10000 + (uintptr_t)i * 64;
		b[i] = ha_table_record(pcs, 2, 64);
		REQUIRE(b[i] != NULL);
	}
	int found = 0;
	for (int i = 0; i < NS; i++) {
		pcs[0] = 0x10000 + (uintptr_t)i * 64;
		found += ha_table_find(ha_table_hash(pcs, 2, 64), pcs, 2, 64) == b[i];
		found += ha_table_record(pcs, 2, 64) == b[i];   /* counted again, no new bucket */
	}
	ha_table_unlock();
	CHECK_EQ(found, 2 * NS);
	ha_table_stats(&buckets, &mem, &drops);
	CHECK_EQ(buckets, NS);
	/* heads of 1, 2, 4 and 8 Ki (5000 buckets) = 120 KiB, all counted */
	CHECK_GE(mem, (uint64_t)(8 + 16 + 32 + 64) * 1024);
	CHECK_EQ(b[7]->alloc_count, 2);
	destroy_both();
}

/* Four threads count the same 10,000 stacks, each new to the table when
 * the first thread meets it, as the sampling hook does (the lock-free find
 * under a stripe lock, else the table lock): the heads double four times
 * under finders, and still every stack gets one bucket, counted 4 times. */
enum { NT = 4, PER = 2500 };

static void *counter(void *arg)
{
	uintptr_t me = (uintptr_t)arg;
	for (uintptr_t i = 0; i < PER; i++)
		for (uintptr_t k = 0; k < NT; k++) {
			uintptr_t t = (me + k) % NT;      /* its own first, then the others' */
			uintptr_t pcs[2] = { 0x100000 + (t * PER + i) * 16, 0x7000 };
			uint64_t h;
			uint32_t idx;
			if (ha_objmap_count(0x7d0000000000ull + i * 16, 0, &h, pcs, 2, 64, 64, 0, &idx) < 0) {
				ha_table_lock();
				ha_table_record_hashed(h, pcs, 2, 64);
				ha_table_unlock();
			}
		}
	return NULL;
}

static void table_grows_threads(void)
{
	REQUIRE(ha_table_init() == 0);
	REQUIRE(ha_objmap_init() == 0);
	pthread_t th[NT];
	for (uintptr_t t = 0; t < NT; t++)
		REQUIRE(pthread_create(&th[t], NULL, counter, (void *)t) == 0);
	for (int t = 0; t < NT; t++)
		pthread_join(th[t], NULL);
	size_t n = 0;
	ha_table_lock();
	ha_line *lines = ha_table_snapshot(&n);
	ha_table_unlock();
	CHECK_EQ(n, (size_t)NT * PER);
	size_t counted = 0;
	for (size_t i = 0; lines && i < n; i++)
		counted += lines[i].alloc_count == NT;
	CHECK_EQ(counted, (size_t)NT * PER);
	free(lines);
	destroy_both();
}

/* The pieces an age or lifetime label is made of (ages.c): parts that add
 * up to the whole, bins that split at decades, ages exact to the second
 * below 4096 s. */
static void ages_parts(void)
{
	uint64_t w[5] = { 3, 0, 7, 1, 1 }, sum = 12, cum = 0, got = 0;
	for (int k = 0; k < 5; k++) {
		uint64_t p = ha_split_part(1000003, cum, w[k], sum);
		if (k == 1)
			CHECK_EQ(p, 0);
		if (k == 2)
			CHECK(p == 583335 || p == 583334);   /* 1000003 * 7 / 12 */
		got += p;
		cum += w[k];
	}
	CHECK_EQ(got, 1000003);
	CHECK_EQ(ha_split_part(UINT64_MAX / 2, 1, 1, 2), UINT64_MAX / 2 - UINT64_MAX / 4);
	CHECK_EQ(ha_split_part(5, 0, 0, 0), 0);
	CHECK_EQ(ha_life_label(0), 999);
	CHECK_EQ(ha_life_label(3), 999999);              /* 100 us - 1 ms */
	CHECK_EQ(ha_life_label(HA_LIFE_BINS - 1), 100000000000000ull);
	CHECK(strcmp(ha_life_range(3), "100us-1ms") == 0);
	/* the bin by bit length and one compare equals counting decades, at
	 * every decade boundary, either side of it and every power of two */
	int wrong = 0;
	for (int k = 0; k < 64; k++) {
		uint64_t vs[3] = { (uint64_t)1 << k, ((uint64_t)1 << k) - 1, ((uint64_t)1 << k) + 1 };
		for (int j = 0; j < 3; j++) {
			unsigned want = 0;
			for (uint64_t d = 1000; want < HA_LIFE_BINS - 1 && vs[j] >= d; d *= 10)
				want++;
			wrong += ha_life_bin(vs[j]) != want;
		}
	}
	for (uint64_t d = 1000, want = 1; d <= 100000000000000ull; d *= 10, want++) {
		wrong += ha_life_bin(d - 1) != want - 1;
		wrong += ha_life_bin(d) != (want < HA_LIFE_BINS ? want : HA_LIFE_BINS - 1);
	}
	CHECK_EQ(wrong, 0);
	CHECK_EQ(ha_life_bin(0), 0);
	CHECK_EQ(ha_life_bin(UINT64_MAX), HA_LIFE_BINS - 1);
	uint64_t now = (uint64_t)1 << 50, s = 1000000000ull;
	CHECK_EQ(ha_age_seconds(now, now - 3600 * s - s / 2), 3600);
	CHECK_EQ(ha_age_seconds(now, now - 4095 * s), 4095);
	CHECK_EQ(ha_age_seconds(now, now - 4097 * s), 4096);
	CHECK_EQ(ha_age_seconds(now, now - 86400 * s), 86400 & ~31);
	CHECK_EQ(ha_age_seconds(now, now + s), 0);       /* sampled after the dump's clock */
}

/* One default: HEAP_PROFILE_SAMPLE_INTERVAL unset gives the always-on
 * sampling and a session the same 2 MiB; 0 switches the always-on sampling
 * off and leaves a session the default; a size applies to both. */
static void one_default(void)
{
	char *unset[] = { "PATH=/bin", NULL };
	ha_options_load_from(unset);
	CHECK_EQ(ha_prof_opt.sample_interval, 2097152);
	CHECK_EQ(ha_prof_opt.always_on, 2097152);
	char *off[] = { "HEAP_PROFILE_SAMPLE_INTERVAL=0", NULL };
	ha_options_load_from(off);
	CHECK_EQ(ha_prof_opt.sample_interval, 2097152);
	CHECK_EQ(ha_prof_opt.always_on, 0);
	char *set[] = { "HEAP_PROFILE_SAMPLE_INTERVAL=64k", NULL };
	ha_options_load_from(set);
	CHECK_EQ(ha_prof_opt.sample_interval, 65536);
	CHECK_EQ(ha_prof_opt.always_on, 65536);
	/* the grammar by kind name, as heapalloc-options asks it */
	int64_t v;
	CHECK_EQ(ha_env_parse("size", "2M", &v), 0);
	CHECK_EQ(v, 2097152);
	CHECK_EQ(ha_env_parse("seconds", "2M", &v), EINVAL);
	CHECK_EQ(ha_env_parse("bool", "on", &v), 0);
	CHECK_EQ(v, 1);
	CHECK_EQ(ha_env_parse("nosuchkind", "1", &v), ENOENT);
}

int main(void)
{
	sampler();
	options();
	one_default();
	size_keys();
	objmap_and_table();
	table_grows();
	table_grows_threads();
	ages_parts();
	return CHECK_DONE();
}
