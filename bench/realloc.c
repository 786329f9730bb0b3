/* realloc — growth by realloc: vectors doubling, strings appended.
 *
 * Vectors: 64 live vectors of 8-byte elements; each push that fills one
 * doubles it with realloc; a vector that reaches its random cap
 * (512 B … 1 MiB) is freed and started again at 32 B.
 * Strings: 256 live strings; each append adds 1–40 bytes with a realloc to the
 * exact new length (as naive code does); past a random cap (256 B … 16 KiB)
 * the string is freed and started again.
 * Contents are checked, so a realloc that loses bytes fails the run.
 * Prints "reallocs_per_sec <realloc calls per second>".
 * argv[1]: scale in percent.
 */
#include "bench.h"

#define NVEC 64
#define NSTR 256

struct vec { uint64_t *v; size_t n, cap, max; };
struct str { char *s; size_t len, max; };

int main(int argc, char **argv)
{
	double scale = bench_scale(argc, argv);
	long pushes = (long)(10000000 * scale), appends = (long)(1000000 * scale);
	uint64_t seed = 42;
	long reallocs = 0, bad = 0;
	static struct vec vec[NVEC];
	static struct str str[NSTR];

	bench_print_allocator();
	double t0 = bench_now();
	for (long k = 0; k < pushes; k++) {
		struct vec *v = &vec[bench_rand(&seed) % NVEC];
		if (v->n == v->cap) {
			if (v->cap && v->cap == v->max) {
				bad += v->v[v->n - 1] != v->n - 1 || v->v[0] != 0;
				free(v->v);
				v->v = NULL;
				v->n = v->cap = 0;
			}
			if (!v->cap)
				v->max = (size_t)64 << bench_range(&seed, 0, 11);
			v->cap = v->cap ? v->cap * 2 : 4;
			v->v = realloc(v->v, v->cap * sizeof *v->v);
			reallocs++;
		}
		v->v[v->n] = v->n;
		v->n++;
	}
	for (long k = 0; k < appends; k++) {
		struct str *s = &str[bench_rand(&seed) % NSTR];
		size_t add = bench_range(&seed, 1, 40);
		if (s->len + add > s->max && s->s) {
			bad += s->s[0] != 'a' || s->s[s->len - 1] != (char)('a' + (s->len - 1) % 26);
			free(s->s);
			s->s = NULL;
			s->len = 0;
		}
		if (!s->s)
			s->max = bench_range(&seed, 256, 16384);
		s->s = realloc(s->s, s->len + add + 1);
		reallocs++;
		for (size_t j = 0; j < add; j++, s->len++)
			s->s[s->len] = (char)('a' + s->len % 26);
		s->s[s->len] = 0;
	}
	double t = bench_now() - t0;
	for (int i = 0; i < NVEC; i++)
		free(vec[i].v);
	for (int i = 0; i < NSTR; i++)
		free(str[i].s);
	if (bad) {
		fprintf(stderr, "realloc: %ld blocks lost their contents\n", bad);
		return 1;
	}
	printf("reallocs_per_sec %.0f\n", (double)reallocs / t);
	return 0;
}
