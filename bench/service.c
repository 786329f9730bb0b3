/* service — three service-shaped programs: blocks allocated by one
 * thread and freed by another, the way a server or an async runtime does it.
 *
 *   service reqresp  [SCALE] [PAIRS]    acceptors -> workers -> acceptors
 *   service steal    [SCALE] [THREADS]  a work-stealing pool
 *   service pipeline [SCALE] [STAGES]   a chain of stages, each re-allocating
 *
 * reqresp: each of PAIRS (default 2) acceptor threads allocates requests of
 *   64 B–16 KiB (log-uniform) and queues them to its worker; the worker checks
 *   the request, allocates 2–4 temporaries of 32–512 B (filled, checked, freed
 *   at once) and a response of 64 B–4 KiB, frees the request and queues the
 *   response back; the acceptor checks and frees it.  At most WINDOW requests
 *   per pair are in flight.  Every request and response free is remote.
 * steal: an ingress thread and THREADS (default 2) workers, each with a deque
 *   (one lock each).  The ingress spawns root tasks into its own deque (at
 *   most 256 queued) and runs none; a worker runs its own newest task, else
 *   steals half of a random victim's oldest ones.  A task carries a payload
 *   (32 B–4 KiB) allocated by its spawner; running it checks and frees both
 *   (remote when stolen) and, for a root, spawns 0–4 child tasks into the
 *   runner's deque.  Prints "remote_share": the tasks freed by a thread other
 *   than their spawner.
 * pipeline: STAGES (default 4) threads; stage 0 allocates messages of
 *   32 B–8 KiB, each later stage takes one, allocates a new one of another
 *   size, copies the common prefix, frees the old one and passes the new one
 *   on; the last stage frees it.  Every free is remote.
 *
 * Every block (32 B at least) carries a header (tag, size, check word) and a
 * pattern: one 8-byte word per 64 B line and the last 8 bytes, each a function
 * of the tag and the offset (every line touched, as a real message would be,
 * at an eighth of the cost of filling it).  It is checked before every free; a
 * wrong byte in those words prints where and exits 1.  Queues are bounded
 * rings (mutex + condition variables), moved in batches, so memory stays
 * bounded and the locks stay off the profile.
 * Prints "allocator <file>", "peak_rss_kib <VmHWM>" and "ops_per_sec <messages
 * or tasks per second>".
 * SCALE: percent of the default work (sized for ~1-2 s under glibc, 2 cores).
 */
#include "bench.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#define STRIDE 64     /* one pattern word per cache line */
#define QCAP 1024     /* ring slots per queue (a power of two) */
#define MOVE 64       /* pointers moved per queue operation, at most */
#define WINDOW 512    /* reqresp: requests in flight per pair */
#define MAX_THREADS 64

/* ---- blocks: header + pattern, checked before every free ---- */

struct hdr {
	uint64_t tag;   /* unique per block (thread index << 40 | sequence) */
	uint64_t size;  /* bytes malloc'ed */
	uint64_t check; /* mix(tag ^ size): the header itself is intact */
};
#define HDR ((size_t)sizeof(struct hdr))

static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xBF58476D1CE4E5B9ULL;
	x ^= x >> 27;
	x *= 0x94D049BB133111EBULL;
	return x ^ (x >> 31);
}

static inline uint64_t pat(uint64_t tag, size_t off)
{
	return mix(tag * 0x9E3779B97F4A7C15ULL + off);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (!p) {
		fprintf(stderr, "service: malloc(%zu) returned NULL\n", n);
		exit(1);
	}
	return p;
}

static void put64(char *p, size_t off, uint64_t v) { memcpy(p + off, &v, 8); }
static uint64_t get64(const char *p, size_t off)
{
	uint64_t v;
	memcpy(&v, p + off, 8);
	return v;
}

/* Writes the header and the pattern words from offset `from` on (HDR: the
 * whole block).  Line words stop short of the last 8 bytes, which never
 * overlap one. */
static void fill_from(char *p, size_t n, uint64_t tag, size_t from)
{
	struct hdr h = { tag, n, mix(tag ^ n) };
	memcpy(p, &h, HDR);
	for (size_t off = (from + STRIDE - 1) / STRIDE * STRIDE; off + 16 <= n; off += STRIDE)
		if (off >= HDR)
			put64(p, off, pat(tag, off));
	put64(p, n - 8, pat(tag, n - 8));
}

static char *new_block(size_t n, uint64_t tag)
{
	char *p = xmalloc(n);
	fill_from(p, n, tag, HDR);
	return p;
}

static _Noreturn void corrupt(const char *what, const char *p, size_t off, uint64_t want)
{
	uint64_t got = get64(p, off);
	int b = 0;
	while (b < 7 && ((got >> (8 * b)) & 255) == ((want >> (8 * b)) & 255))
		b++;
	fprintf(stderr, "service: %s block %p: byte %zu is 0x%02x, expected 0x%02x\n",
		what, (const void *)p, off + b, (unsigned)((got >> (8 * b)) & 255),
		(unsigned)((want >> (8 * b)) & 255));
	exit(1);
}

/* Checks the header and the pattern; returns the block's size. */
static size_t check_block(const char *what, const char *p, size_t expect_size)
{
	struct hdr h;
	memcpy(&h, p, HDR);
	if (h.check != mix(h.tag ^ h.size) || (expect_size && h.size != expect_size)) {
		fprintf(stderr, "service: %s block %p: header corrupt (tag %llx size %llu)\n",
			what, (const void *)p, (unsigned long long)h.tag, (unsigned long long)h.size);
		exit(1);
	}
	size_t n = h.size;
	for (size_t off = STRIDE; off + 16 <= n; off += STRIDE)
		if (get64(p, off) != pat(h.tag, off))
			corrupt(what, p, off, pat(h.tag, off));
	if (get64(p, n - 8) != pat(h.tag, n - 8))
		corrupt(what, p, n - 8, pat(h.tag, n - 8));
	return n;
}

/* Log-uniform in [lo, hi] (lo, hi powers of two): an octave at random, then
 * a size at random within it; small blocks are as common per octave as big. */
static size_t log_size(uint64_t *s, int lo_log, int hi_log)
{
	uint64_t r = bench_rand(s);
	int e = lo_log + (int)(r % (uint64_t)(hi_log - lo_log));
	size_t base = (size_t)1 << e;
	return base + (size_t)((r >> 32) % base);
}

/* ---- bounded queue: a ring of pointers, moved in batches ---- */

struct queue {
	pthread_mutex_t lock;
	pthread_cond_t not_empty, not_full;
	unsigned head, tail;     /* tail - head = pointers queued */
	int closed;              /* no more pushes: pop returns 0 once empty */
	int wait_pop, wait_push; /* sleepers, so a push or pop signals only when needed */
	void *slot[QCAP];
};

static void q_init(struct queue *q)
{
	memset(q, 0, sizeof *q);
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->not_empty, NULL);
	pthread_cond_init(&q->not_full, NULL);
}

/* Pushes all n pointers, waiting for room as needed. */
static void q_push(struct queue *q, void **v, int n)
{
	pthread_mutex_lock(&q->lock);
	while (n > 0) {
		while (q->tail - q->head == QCAP) {
			q->wait_push++;
			pthread_cond_wait(&q->not_full, &q->lock);
			q->wait_push--;
		}
		while (n > 0 && q->tail - q->head < QCAP) {
			q->slot[q->tail++ % QCAP] = *v++;
			n--;
		}
		if (q->wait_pop)
			pthread_cond_signal(&q->not_empty);
	}
	pthread_mutex_unlock(&q->lock);
}

/* Pops up to max pointers; waits for one if `wait`.  0: empty (and, when
 * waiting, closed). */
static int q_pop(struct queue *q, void **v, int max, int wait)
{
	int n = 0;
	pthread_mutex_lock(&q->lock);
	while (wait && q->tail == q->head && !q->closed) {
		q->wait_pop++;
		pthread_cond_wait(&q->not_empty, &q->lock);
		q->wait_pop--;
	}
	while (n < max && q->head != q->tail)
		v[n++] = q->slot[q->head++ % QCAP];
	if (n && q->wait_push)
		pthread_cond_signal(&q->not_full);
	pthread_mutex_unlock(&q->lock);
	return n;
}

static void q_close(struct queue *q)
{
	pthread_mutex_lock(&q->lock);
	q->closed = 1;
	pthread_cond_broadcast(&q->not_empty);
	pthread_mutex_unlock(&q->lock);
}

static long per_thread; /* messages (or roots) each source thread makes */

/* ---- reqresp ---- */

struct pair {
	struct queue req, resp; /* acceptor -> worker, worker -> acceptor */
	int id;
	long done;              /* responses the acceptor freed */
};

static void *acceptor(void *arg)
{
	struct pair *pr = arg;
	uint64_t seed = mix(0xACCE + (uint64_t)pr->id), seq = 0;
	uint64_t tagbase = (uint64_t)(2 * pr->id) << 40;
	long sent = 0, got = 0, inflight = 0;
	void *v[MOVE];
	while (got < per_thread) {
		/* take back responses: wait only when the window is full or all sent */
		int must = inflight >= WINDOW || sent == per_thread;
		int n = q_pop(&pr->resp, v, MOVE, must);
		for (int i = 0; i < n; i++) {
			check_block("response", v[i], 0);
			free(v[i]);
		}
		got += n;
		inflight -= n;
		/* accept a batch of requests */
		int k = 0;
		while (k < MOVE && sent < per_thread && inflight < WINDOW) {
			v[k++] = new_block(log_size(&seed, 6, 14), tagbase | seq++);
			sent++;
			inflight++;
		}
		if (k)
			q_push(&pr->req, v, k);
	}
	q_close(&pr->req);
	pr->done = got;
	return NULL;
}

static void *worker(void *arg)
{
	struct pair *pr = arg;
	uint64_t seed = mix(0x3011 + (uint64_t)pr->id), seq = 0;
	uint64_t tagbase = (uint64_t)(2 * pr->id + 1) << 40;
	void *v[MOVE];
	int n;
	while ((n = q_pop(&pr->req, v, MOVE, 1)) > 0) {
		for (int i = 0; i < n; i++) {
			check_block("request", v[i], 0);
			/* temporaries: parse buffers, header maps; freed at once */
			char *tmp[4];
			int nt = 2 + (int)(bench_rand(&seed) % 3);
			for (int j = 0; j < nt; j++)
				tmp[j] = new_block(log_size(&seed, 5, 9), tagbase | seq++);
			for (int j = 0; j < nt; j++) {
				check_block("temporary", tmp[j], 0);
				free(tmp[j]);
			}
			char *r = new_block(log_size(&seed, 6, 12), tagbase | seq++);
			free(v[i]);
			v[i] = r;
		}
		q_push(&pr->resp, v, n);
	}
	return NULL;
}

static long run_reqresp(int pairs)
{
	struct pair *pr = xmalloc(sizeof *pr * (size_t)pairs);
	pthread_t *th = xmalloc(sizeof *th * 2 * (size_t)pairs);
	long total = 0;
	for (int i = 0; i < pairs; i++) {
		q_init(&pr[i].req);
		q_init(&pr[i].resp);
		pr[i].id = i;
		pr[i].done = 0;
	}
	for (int i = 0; i < pairs; i++) {
		pthread_create(&th[2 * i], NULL, worker, &pr[i]);
		pthread_create(&th[2 * i + 1], NULL, acceptor, &pr[i]);
	}
	for (int i = 0; i < 2 * pairs; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < pairs; i++)
		total += pr[i].done;
	free(th);
	free(pr);
	return total == per_thread * pairs ? total : -1;
}

/* ---- steal ---- */

#define DEQ 4096      /* tasks per worker deque, at most */
#define INGRESS 256   /* the ingress deque's bound: it waits when full */
#define MAX_DEPTH 1   /* roots spawn 0-4 leaves: ~3 tasks per root */

struct task {
	struct hdr h;  /* the task block's own header, checked when it runs */
	char *payload; /* allocated by the spawner, freed by the runner */
	int depth;
	int spawner;   /* thread index, to count remote frees */
};

/* One per thread, index 0 the ingress's; the lock guards the ring, `room`
 * wakes the ingress when a thief has made space in its deque. */
struct deque {
	pthread_mutex_t lock;
	pthread_cond_t room;
	int waiting;           /* the ingress sleeps on room */
	unsigned top, bottom;  /* owner pushes and pops at bottom, thieves take from top */
	struct task *t[DEQ];
	char pad[64];
};

static struct deque *deq;
static int nthreads;           /* ingress + workers */
static atomic_long pending;    /* tasks spawned and not yet run */
static atomic_int roots_done;  /* the ingress has spawned all its roots */

struct stealer {
	int id;
	long ran, remote, steals;
	uint64_t seed, seq;
};

static struct task *spawn(struct stealer *me, int depth)
{
	uint64_t base = (uint64_t)me->id << 40;
	size_t n = sizeof(struct task);
	struct task *t = xmalloc(n);
	fill_from((char *)t, n, base | me->seq++, HDR);
	t->payload = new_block(log_size(&me->seed, 5, 12), base | me->seq++);
	t->depth = depth;
	t->spawner = me->id;
	atomic_fetch_add_explicit(&pending, 1, memory_order_relaxed);
	return t;
}

/* Pushes at the owner's end; 0 when full (the caller runs the task inline). */
static int push_own(struct deque *d, struct task *t)
{
	int ok = 0;
	pthread_mutex_lock(&d->lock);
	if (d->bottom - d->top < DEQ) {
		d->t[d->bottom++ % DEQ] = t;
		ok = 1;
	}
	pthread_mutex_unlock(&d->lock);
	return ok;
}

static void run_task(struct stealer *me, struct task *t)
{
	struct hdr h;
	memcpy(&h, t, HDR);
	if (h.check != mix(h.tag ^ h.size) || h.size != sizeof *t) {
		fprintf(stderr, "service: task block %p: header corrupt\n", (void *)t);
		exit(1);
	}
	check_block("payload", t->payload, 0);
	int kids = t->depth < MAX_DEPTH ? (int)(bench_rand(&me->seed) % 5) : 0;
	for (int i = 0; i < kids; i++) {
		struct task *c = spawn(me, t->depth + 1);
		if (!push_own(&deq[me->id], c))
			run_task(me, c);
	}
	me->remote += t->spawner != me->id;
	me->ran++;
	free(t->payload);
	free(t);
	atomic_fetch_sub_explicit(&pending, 1, memory_order_release);
}

static struct task *pop_own(struct deque *d)
{
	struct task *t = NULL;
	pthread_mutex_lock(&d->lock);
	if (d->bottom != d->top)
		t = d->t[--d->bottom % DEQ];
	pthread_mutex_unlock(&d->lock);
	return t;
}

/* Takes half (at least one) of the victim's oldest tasks into our deque;
 * returns one of them to run, or NULL. */
static struct task *steal_from(struct stealer *me, int victim)
{
	static _Thread_local struct task *got[DEQ / 2];
	int n = 0;
	struct deque *d = &deq[victim];
	pthread_mutex_lock(&d->lock);
	unsigned have = d->bottom - d->top;
	unsigned take = have ? (have + 1) / 2 : 0;
	while ((unsigned)n < take)
		got[n++] = d->t[d->top++ % DEQ];
	if (n && d->waiting)
		pthread_cond_signal(&d->room);
	pthread_mutex_unlock(&d->lock);
	if (!n)
		return NULL;
	me->steals++;
	for (int i = 1; i < n; i++)
		if (!push_own(&deq[me->id], got[i]))
			run_task(me, got[i]);
	return got[0];
}

/* The ingress: new requests arrive here as root tasks, pushed into its own
 * deque (at most INGRESS queued); it runs none, so every root is run, and
 * its blocks freed, by a worker that stole it. */
static void *ingress_main(void *arg)
{
	struct stealer *me = arg;
	struct deque *d = &deq[0];
	for (long roots = 0; roots < per_thread; roots++) {
		struct task *r = spawn(me, 0);
		pthread_mutex_lock(&d->lock);
		while (d->bottom - d->top >= INGRESS) {
			d->waiting = 1;
			pthread_cond_wait(&d->room, &d->lock);
			d->waiting = 0;
		}
		d->t[d->bottom++ % DEQ] = r;
		pthread_mutex_unlock(&d->lock);
	}
	atomic_store(&roots_done, 1);
	return NULL;
}

/* A worker: its own tasks newest first, else steal from a random victim
 * (the ingress or another worker), else yield until all is done. */
static void *worker_main(void *arg)
{
	struct stealer *me = arg;
	for (;;) {
		struct task *t = pop_own(&deq[me->id]);
		int v0 = (int)(bench_rand(&me->seed) % (uint64_t)nthreads);
		for (int k = 0; !t && k < nthreads; k++) {
			int v = (v0 + k) % nthreads;
			if (v != me->id)
				t = steal_from(me, v);
		}
		if (t) {
			run_task(me, t);
			continue;
		}
		if (atomic_load(&roots_done) && atomic_load_explicit(&pending, memory_order_acquire) == 0)
			break;
		sched_yield();
	}
	return NULL;
}

static long run_steal(int workers, double *remote_share)
{
	int threads = workers + 1;
	nthreads = threads;
	deq = xmalloc(sizeof *deq * (size_t)threads);
	struct stealer *st = xmalloc(sizeof *st * (size_t)threads);
	pthread_t *th = xmalloc(sizeof *th * (size_t)threads);
	for (int i = 0; i < threads; i++) {
		pthread_mutex_init(&deq[i].lock, NULL);
		pthread_cond_init(&deq[i].room, NULL);
		deq[i].waiting = 0;
		deq[i].top = deq[i].bottom = 0;
		st[i] = (struct stealer){ .id = i, .seed = mix(0x57EA1 + (uint64_t)i) };
	}
	for (int i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, i ? worker_main : ingress_main, &st[i]);
	long ran = 0, remote = 0, steals = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(th[i], NULL);
		ran += st[i].ran;
		remote += st[i].remote;
		steals += st[i].steals;
	}
	printf("steals %ld\n", steals);
	*remote_share = ran ? (double)remote / (double)ran : 0;
	free(th);
	free(st);
	free(deq);
	return ran;
}

/* ---- pipeline ---- */

struct stage {
	struct queue *in, *out; /* NULL in: the source; NULL out: the sink */
	int id;
	long done;
};

static void *stage_main(void *arg)
{
	struct stage *sg = arg;
	uint64_t seed = mix(0x919E + (uint64_t)sg->id);
	void *v[MOVE];
	long done = 0;
	if (!sg->in) {
		/* the source: new messages */
		uint64_t seq = 0;
		while (done < per_thread) {
			int k = 0;
			while (k < MOVE && done < per_thread) {
				v[k++] = new_block(log_size(&seed, 5, 13), seq++);
				done++;
			}
			q_push(sg->out, v, k);
		}
		q_close(sg->out);
		sg->done = done;
		return NULL;
	}
	int n;
	while ((n = q_pop(sg->in, v, MOVE, 1)) > 0) {
		for (int i = 0; i < n; i++) {
			size_t old = check_block("message", v[i], 0);
			if (sg->out) {
				/* re-encode: a new block of another size, the common prefix copied */
				size_t sz = log_size(&seed, 5, 13);
				uint64_t tag;
				memcpy(&tag, v[i], 8);
				char *p = xmalloc(sz);
				size_t keep = old < sz ? old : sz;
				memcpy(p, v[i], keep);
				fill_from(p, sz, tag, keep > 16 ? keep - 16 : 0);
				free(v[i]);
				v[i] = p;
			} else {
				free(v[i]);
			}
		}
		done += n;
		if (sg->out)
			q_push(sg->out, v, n);
	}
	if (sg->out)
		q_close(sg->out);
	sg->done = done;
	return NULL;
}

static long run_pipeline(int stages)
{
	struct stage *sg = xmalloc(sizeof *sg * (size_t)stages);
	struct queue *q = xmalloc(sizeof *q * (size_t)(stages - 1));
	pthread_t *th = xmalloc(sizeof *th * (size_t)stages);
	for (int i = 0; i < stages - 1; i++)
		q_init(&q[i]);
	for (int i = 0; i < stages; i++) {
		sg[i].id = i;
		sg[i].in = i ? &q[i - 1] : NULL;
		sg[i].out = i < stages - 1 ? &q[i] : NULL;
		sg[i].done = 0;
	}
	for (int i = 0; i < stages; i++)
		pthread_create(&th[i], NULL, stage_main, &sg[i]);
	for (int i = 0; i < stages; i++)
		pthread_join(th[i], NULL);
	long total = sg[stages - 1].done;
	for (int i = 0; i < stages; i++)
		if (sg[i].done != per_thread)
			total = -1;
	free(th);
	free(q);
	free(sg);
	return total;
}

/* Peak RSS of this process image, in KiB: VmHWM, which (unlike the parent's
 * wait4) does not count the memory of the runner that forked us. */
static long peak_rss_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "VmHWM:", 6)) {
			kib = atol(line + 6);
			break;
		}
	fclose(f);
	return kib;
}

int main(int argc, char **argv)
{
	const char *shape = argc > 1 ? argv[1] : "";
	double scale = bench_scale(argc - 1, argv + 1);
	int threads = argc > 3 ? atoi(argv[3]) : 0;
	long total;
	double t0, share = -1;
	if (!strcmp(shape, "reqresp")) {
		if (threads < 1 || threads > MAX_THREADS / 2)
			threads = 2;
		per_thread = (long)(3000000 * scale / threads);
	} else if (!strcmp(shape, "steal")) {
		if (threads < 1 || threads > MAX_THREADS)
			threads = 2;
		per_thread = (long)(1200000 * scale); /* roots, ~3 tasks each; THREADS: workers */
	} else if (!strcmp(shape, "pipeline")) {
		if (threads < 2 || threads > MAX_THREADS)
			threads = 4;
		per_thread = (long)(1500000 * scale);
	} else {
		fprintf(stderr, "usage: service reqresp|steal|pipeline [SCALE%%] [THREADS]\n");
		return 2;
	}
	if (per_thread < 1)
		per_thread = 1;
	bench_print_allocator();
	printf("shape %s\nthreads %d\n", shape, threads);
	t0 = bench_now();
	if (shape[0] == 'r')
		total = run_reqresp(threads);
	else if (shape[0] == 's')
		total = run_steal(threads, &share);
	else
		total = run_pipeline(threads);
	double t = bench_now() - t0;
	if (total < 0) {
		fprintf(stderr, "service: %s: a thread did not finish its share of the work\n", shape);
		return 1;
	}
	if (share >= 0)
		printf("remote_share %.3f\n", share);
	printf("ops %ld\nseconds %.3f\npeak_rss_kib %ld\nops_per_sec %.0f\n", total, t,
	       peak_rss_kib(), (double)total / t);
	return 0;
}
