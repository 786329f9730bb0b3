/* alloc/size_class.c — the size-class table and its lookup arrays.
 *
 * Classes are multiples of 16 up to 128 B (malloc's 16-byte alignment makes
 * finer steps useless), then eight classes per doubling up to 32 KiB, so
 * rounding wastes at most 1/9 (11.1%) of a block above 128 B:
 *
 *   16 32 48 64 80 96 112 128                          step 16
 *   144 160 ... 256       step 16    | 288 ... 512       step 32
 *   576 ... 1024          step 64    | 1152 ... 2048     step 128
 *   2304 ... 4096         step 256   | 4608 ... 8192     step 512
 *   9216 ... 16384        step 1024  | 18432 ... 32768   step 2048
 *   34816: only for a profiled block of up to 32 KiB plus its 16-byte
 *   header (HA_CLASS_HDR_MAX); the lookup arrays stop at 32 KiB
 *
 * Worst waste per row: 15/32 (request 17 in 32, bounded by 15 bytes), then
 * (step-1)/(lower+step): 15/144 = 10.4%, 31/288 = 10.8%, ... -> 11.1%.
 * Every power of two up to 4096 is a class and spans are page-aligned, so
 * such classes hand out blocks aligned to their size (memalign uses that).
 *
 * Span size: the smallest multiple of 4 KiB, at least 64 KiB and 8 objects,
 * whose tail waste is at most 1/32 of the span.  Batch: objects moved per
 * transfer between a thread cache and the central cache, 128 KiB worth,
 * clamped to [4, 32].
 * Never allocates; called once from ha_init_slow().  Debug builds check
 * the finished tables against these rules (check_tables).
 */
#include "alloc/internal.h"
#include "alloc/debug.h"

uint16_t ha_class_tab[HA_SMALL_MAX / 16 + 1];
static uint8_t class_lo[1024 / 8 + 1];     /* by (n + 7) / 8: ha_class_hdr_lo */
uint8_t ha_class_hdr_lo[HA_HDR_LO_MAX / 8 + 1];
uint32_t ha_class_size[HA_NCLASSES];
uint32_t ha_class_batch[HA_NCLASSES];
uint32_t ha_class_span_bytes[HA_NCLASSES];
uint64_t ha_class_magic[HA_NCLASSES];
uint64_t ha_class_inv[HA_NCLASSES];
uint32_t ha_class_ror[HA_NCLASSES];

static unsigned fill_sizes(void)
{
	unsigned c = 1;
	for (uint32_t s = 16; s <= 128; s += 16)
		ha_class_size[c++] = s;
	for (uint32_t lo = 128; lo < 32768; lo *= 2)
		for (uint32_t s = lo + lo / 8; s <= 2 * lo; s += lo / 8)
			ha_class_size[c++] = s;
	ha_class_size[c++] = 32768 + 2048;   /* HA_CLASS_HDR_MAX */
	return c;
}

static uint32_t pick_span(uint32_t size)
{
	uint32_t min = 65536;
	if (8 * size > min)
		min = 8 * size;
	min = (min + HA_PAGE_SIZE - 1) & ~(uint32_t)(HA_PAGE_SIZE - 1);
	for (uint32_t b = min; b <= 2 * min; b += HA_PAGE_SIZE)
		if ((b % size) * 32 <= b)
			return b;
	return min;
}

/* The tables against the rules above: sizes rise, every lookup gives the
 * smallest class that holds the request, spans are whole pages of >= 8
 * objects, and free's block-start check finds every object's index. */
static void check_tables(void)
{
	for (unsigned c = 2; c < HA_NCLASSES; c++)
		HA_ASSERT(ha_class_size[c] > ha_class_size[c - 1]);
	for (size_t n = 1; n <= 32768; n++) {
		unsigned c = ha_size_to_class(n);
		HA_ASSERT(c >= 1 && c < HA_CLASS_HDR_MAX);
		HA_ASSERT(ha_class_size[c] >= n && (c == 1 || ha_class_size[c - 1] < n));
	}
	for (size_t n = 0; n <= HA_HDR_LO_MAX; n++) {
		size_t need = (n ? n : 1) + 16;
		unsigned c = ha_class_hdr_lo[(n + 7) >> 3];
		HA_ASSERT(ha_class_size[c] >= need && ha_class_size[c - 1] < need);
	}
	for (unsigned c = 1; c < HA_NCLASSES; c++) {
		uint32_t s = ha_class_size[c], span = ha_class_span_bytes[c];
		HA_ASSERT(span % HA_PAGE_SIZE == 0 && span / s >= 8);
		HA_ASSERT(ha_class_batch[c] >= 4 && ha_class_batch[c] <= 32);
		for (uint64_t k = 0; k * s < span; k++) {
			uint64_t q = k * s * ha_class_inv[c];
			unsigned r = ha_class_ror[c];
			HA_ASSERT(((q >> r) | (q << (-r & 63))) == k);
		}
	}
}

void ha_size_class_init(void)
{
	unsigned n = fill_sizes();
	if (n != HA_NCLASSES)
		ha_fatal("size-class table has the wrong length", NULL);
	unsigned c = 1;
	for (unsigned i = 0; i <= 1024 / 8; i++) {
		uint32_t sz = i * 8;
		while (ha_class_size[c] < sz)
			c++;
		class_lo[i] = (uint8_t)c;
	}
	/* classes are multiples of 16, so a class holds n + 16 exactly when
	 * it holds n rounded up to 8, plus 16 */
	for (unsigned i = 0; i <= HA_HDR_LO_MAX / 8; i++)
		ha_class_hdr_lo[i] = class_lo[(i ? i * 8 + 16 : 17 + 7) >> 3];
	c = 1;
	for (unsigned i = 0; i <= HA_SMALL_MAX / 16; i++) {
		uint32_t sz = i * 16;
		while (ha_class_size[c] < sz)
			c++;
		ha_class_tab[i] = (uint16_t)(c << HA_TL_SHIFT);
	}
	for (c = 1; c < HA_NCLASSES; c++) {
		uint32_t s = ha_class_size[c];
		uint32_t b = 131072 / s;
		ha_class_batch[c] = b < 4 ? 4 : b > 32 ? 32 : b;
		ha_class_span_bytes[c] = pick_span(s);
		/* M = ceil(2^64 / s): for any 32-bit offset x, x / s is the
		 * high word of x * M and s divides x iff its low word is < M
		 * (Lemire, Kaser, Kurz, "Faster remainder by direct
		 * computation", 2019: exact for 64 >= 32 + log2 s) */
		ha_class_magic[c] = UINT64_MAX / s + 1;
		/* the odd part's inverse: Newton's x *= 2 - odd * x doubles
		 * the correct low bits, 3 (x = odd) -> 6 -> ... -> 96 */
		uint32_t r = (uint32_t)__builtin_ctz(s);
		uint64_t odd = s >> r, x = odd;
		for (int i = 0; i < 5; i++)
			x *= 2 - odd * x;
		ha_class_inv[c] = x;
		ha_class_ror[c] = r;
	}
	if (HA_DEBUG)
		check_tables();
}
