/* prof/pb.h — the few protobuf wire-format encoders profile.proto needs.
 *
 * Header-only, shared by the in-process writer (prof/output/pprof.c) and the
 * offline symboliser (tools/symbolize.c).  Each encoder appends to a
 * caller-owned fixed buffer and never allocates; a message that does not
 * fit sets pb_buf.over and the caller drops it.  Wire types used: 0 varint
 * (ints, bools, ids), 2 length-delimited (strings, packed ints, messages).
 */
#ifndef HA_PROF_PB_H
#define HA_PROF_PB_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct pb_buf {
	unsigned char *p;
	size_t len, cap;
	int over;                 /* something did not fit */
} pb_buf;

static inline void pb_raw(pb_buf *b, const void *s, size_t n)
{
	if (b->len + n > b->cap) {
		b->over = 1;
		return;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static inline void pb_varint(pb_buf *b, uint64_t v)
{
	unsigned char t[10];
	size_t n = 0;
	do {
		t[n] = (unsigned char)(v & 0x7f);
		v >>= 7;
		if (v)
			t[n] |= 0x80;
		n++;
	} while (v);
	pb_raw(b, t, n);
}

static inline void pb_key(pb_buf *b, unsigned field, unsigned wire)
{
	pb_varint(b, ((uint64_t)field << 3) | wire);
}

/* A varint field; proto3 leaves zero values out. */
static inline void pb_int(pb_buf *b, unsigned field, uint64_t v)
{
	if (!v)
		return;
	pb_key(b, field, 0);
	pb_varint(b, v);
}

/* A length-delimited field: string, bytes or an encoded message. */
static inline void pb_bytes(pb_buf *b, unsigned field, const void *s, size_t n)
{
	pb_key(b, field, 2);
	pb_varint(b, n);
	pb_raw(b, s, n);
}

/* A packed repeated varint field. */
static inline void pb_packed(pb_buf *b, unsigned field, const uint64_t *v, size_t n)
{
	unsigned char tmp[10 * 64];
	pb_buf in = { tmp, 0, sizeof tmp, 0 };
	for (size_t i = 0; i < n; i++)
		pb_varint(&in, v[i]);
	if (in.over) {
		b->over = 1;
		return;
	}
	pb_bytes(b, field, tmp, in.len);
}

/* profile.proto field numbers (github.com/google/pprof/proto/profile.proto) */
enum {
	PB_PROFILE_SAMPLE_TYPE = 1, PB_PROFILE_SAMPLE = 2, PB_PROFILE_MAPPING = 3,
	PB_PROFILE_LOCATION = 4, PB_PROFILE_FUNCTION = 5, PB_PROFILE_STRING = 6,
	PB_PROFILE_TIME_NANOS = 9, PB_PROFILE_PERIOD_TYPE = 11,
	PB_PROFILE_PERIOD = 12, PB_PROFILE_COMMENT = 13, PB_PROFILE_DEFAULT_SAMPLE_TYPE = 14,
	PB_VALUETYPE_TYPE = 1, PB_VALUETYPE_UNIT = 2,
	PB_SAMPLE_LOCATION_ID = 1, PB_SAMPLE_VALUE = 2, PB_SAMPLE_LABEL = 3,
	PB_LABEL_KEY = 1, PB_LABEL_STR = 2, PB_LABEL_NUM = 3, PB_LABEL_NUM_UNIT = 4,
	PB_MAPPING_ID = 1, PB_MAPPING_START = 2, PB_MAPPING_LIMIT = 3,
	PB_MAPPING_OFFSET = 4, PB_MAPPING_FILENAME = 5, PB_MAPPING_BUILD_ID = 6,
	PB_MAPPING_HAS_FUNCTIONS = 7, PB_MAPPING_HAS_FILENAMES = 8,
	PB_MAPPING_HAS_LINE_NUMBERS = 9, PB_MAPPING_HAS_INLINE_FRAMES = 10,
	PB_LOCATION_ID = 1, PB_LOCATION_MAPPING_ID = 2, PB_LOCATION_ADDRESS = 3,
	PB_LOCATION_LINE = 4,
	PB_LINE_FUNCTION_ID = 1, PB_LINE_LINE = 2,
	PB_FUNCTION_ID = 1, PB_FUNCTION_NAME = 2, PB_FUNCTION_SYSTEM_NAME = 3,
	PB_FUNCTION_FILENAME = 4, PB_FUNCTION_START_LINE = 5,
};

#endif
