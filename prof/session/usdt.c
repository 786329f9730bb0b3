/* prof/session/usdt.c — the OpenTelemetry memory probes, otel_memory:alloc and
 * otel_memory:free, and the sampling they switch on.
 *
 * The contract (the OpenTelemetry eBPF profiler's memory-profiling design):
 *   otel_memory:alloc(ptr, size, weighted_bytes)  a sampled allocation:
 *       ptr the block, size the bytes requested, weighted_bytes the bytes
 *       it stands for, S / (1 - e^(-S/R)) for a sample charged S bytes at
 *       mean interval R (S itself when everything is recorded, R = 1);
 *   otel_memory:free(ptr)  the free of a block reported at alloc.
 * Both fire behind the profiler's own sampling decision, never per
 * allocation.  Each has a USDT semaphore (.probes section): a tracer that
 * attaches with the semaphore's offset (the kernel's uprobe ref_ctr, as
 * bpftrace and cilium/ebpf do) makes it nonzero, and a probe fires only
 * then; with nothing attached the sampled path reads one halfword.
 *
 * Attaching turns sampling on.  With no session running, the allocator
 * polls us (ha_prof_poll) each time a thread's off-profiling countdown
 * runs out, every 16 MiB of its allocation; if otel_memory:alloc's
 * semaphore is set we switch sampling on at the configured mean interval
 * (HEAP_PROFILE_SAMPLE_INTERVAL, default 2 MiB) with no table, no files
 * and no helper thread: a sample only fires the probes.  Each thread's
 * threshold budget (ha_prof_check) is then 16 MiB, at which it looks at
 * the semaphore again and switches sampling off once nothing is attached.
 * A session (HEAPPROFILE, the API) takes over from probe-only sampling;
 * its recorded samples fire the probes with the profile's own weights.
 *
 * Never allocates, takes only ha_prof_dump_lock (trylock: a start, stop or
 * dump in progress means we look again at the next poll).  Without
 * <sys/sdt.h> (HA_USDT 0) the semaphores exist but stay 0 and no probe
 * is emitted.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "prof/session/session.h"

#if HA_USDT
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#endif

/* The names sys/sdt.h writes into each probe's note (provider_name_semaphore).
 * Local to this file: the notes carry their addresses, and a static link
 * that brings another otel_memory provider keeps both (a global name,
 * even hidden, would clash in libheapalloc.a).  volatile: only the kernel
 * writes them. */
static volatile unsigned short otel_memory_alloc_semaphore __attribute__((section(".probes"), used));
static volatile unsigned short otel_memory_free_semaphore __attribute__((section(".probes"), used));

/* Read through these (prof.h), inline on the sampled paths: a pointer
 * under our own name, so the semaphores keep theirs local. */
volatile unsigned short *const ha_usdt_sem[2] = { &otel_memory_alloc_semaphore,
						  &otel_memory_free_semaphore };

/* A kept record (ha_prof_sampled_kept) for a probe-only sample: nonzero so
 * the allocator reports its free; the table's last index, so that it can
 * never name a bucket of a session that began since (a fresh table). */
#define USDT_REC ((uint32_t)1 << 20)

static struct {
	int on;                   /* sampling runs for the probes alone */
	uint64_t samples;         /* allocations it sampled */
} usdt;

int ha_usdt_sampling(void)
{
	return __atomic_load_n(&usdt.on, __ATOMIC_ACQUIRE);
}

uint64_t ha_usdt_samples(void)
{
	return __atomic_load_n(&usdt.samples, __ATOMIC_RELAXED);
}

/* The probe sites: the arguments pinned to the first three argument
 * registers, which the OTel profiler's first version reads straight from
 * pt_regs; the notes' descriptors say the same to every other tracer. */
HA_NOINLINE void ha_usdt_fire_alloc(void *p, size_t req, uint64_t weighted)
{
#if HA_USDT && defined(__x86_64__)
	register uintptr_t a1 __asm__("rdi") = (uintptr_t)p;
	register uint64_t a2 __asm__("rsi") = req;
	register uint64_t a3 __asm__("rdx") = weighted;
	STAP_PROBE3(otel_memory, alloc, a1, a2, a3);
#elif HA_USDT && defined(__aarch64__)
	register uintptr_t a1 __asm__("x0") = (uintptr_t)p;
	register uint64_t a2 __asm__("x1") = req;
	register uint64_t a3 __asm__("x2") = weighted;
	STAP_PROBE3(otel_memory, alloc, a1, a2, a3);
#elif HA_USDT
	STAP_PROBE3(otel_memory, alloc, (uintptr_t)p, (uint64_t)req, weighted);
#endif
}

HA_NOINLINE void ha_usdt_fire_free(void *p)
{
#if HA_USDT && defined(__x86_64__)
	register uintptr_t a1 __asm__("rdi") = (uintptr_t)p;
	STAP_PROBE1(otel_memory, free, a1);
#elif HA_USDT && defined(__aarch64__)
	register uintptr_t a1 __asm__("x0") = (uintptr_t)p;
	STAP_PROBE1(otel_memory, free, a1);
#elif HA_USDT
	STAP_PROBE1(otel_memory, free, (uintptr_t)p);
#endif
}

void ha_usdt_alloc(void *p, size_t req, size_t size, int64_t r)
{
	/* everything recorded: each block stands for itself */
	ha_usdt_fire_alloc(p, req, ha_rate_records_all(r) ? size : ha_sampler_unsample(size, r));
}

int ha_usdt_sampled(void *p, size_t req, size_t size, uint32_t *kept)
{
	if (!__atomic_load_n(&usdt.on, __ATOMIC_ACQUIRE))
		return 0;         /* switched off since this thread's countdown was armed */
	int64_t r = ha_prof_rate();   /* written before on, read after it */
	__atomic_fetch_add(&usdt.samples, 1, __ATOMIC_RELAXED);
	if (!ha_usdt_alloc_on())
		return 0;         /* detached: no alloc fired, so no free either */
	ha_usdt_alloc(p, req, ha_rate_records_all(r) ? req : size, r);
	if (kept)
		*kept = USDT_REC;
	return 1;
}

/* Switch probe-only sampling on or off; the caller has seen the semaphore. */
static void usdt_switch(int on)
{
	if (ha_prof_busy || ha_prof_fork_window)
		return;
	if (!ha_trylock(&ha_prof_dump_lock))
		return;           /* a start, stop or dump: look again at the next poll */
	ha_prof_busy = 1;
	if (!ha_session.running && usdt.on != on) {
		if (on) {
			if (!ha_prof_opt_loaded)
				ha_options_load();
			__atomic_store_n(&ha_prof_r, ha_prof_opt.sample_interval,
					 __ATOMIC_RELAXED);
		}
		__atomic_store_n(&usdt.on, on, __ATOMIC_RELEASE);
		ha_alloc_profiling(on ? HA_PROF_ON : HA_PROF_OFF, 0);
	}
	ha_prof_busy = 0;
	ha_unlock(&ha_prof_dump_lock);
}

void ha_prof_poll(void)
{
	if (HA_UNLIKELY(ha_usdt_alloc_on()))
		usdt_switch(1);
}

int ha_usdt_check(int64_t budget[2])
{
	if (!__atomic_load_n(&usdt.on, __ATOMIC_RELAXED))
		return 0;
	if (!ha_usdt_alloc_on())
		usdt_switch(0);
	budget[0] = HA_USDT_CHECK;
	return 1;
}

void ha_usdt_session_start(void)
{
	__atomic_store_n(&usdt.on, 0, __ATOMIC_RELEASE);
}
