/* alloc/env.h — the grammar of heapalloc's variables (alloc/env.c), shared
 * by the allocator, the profiler's option table (prof/session/options.c) and the
 * command's check of `heapalloc run`'s flags (tools/heapalloc-options).
 * Never allocates, never logs.  Each parser returns 0, or EINVAL for junk. */
#ifndef HA_ALLOC_ENV_H
#define HA_ALLOC_ENV_H
#include <stdint.h>

/* NAME's value in env (or environ), NULL when unset; never getenv. */
const char *ha_env_lookup(char *const *env, const char *name);
const char *ha_env_get(const char *name);

/* Decimal with an optional binary suffix (64M, 512KiB, 1g); no sign. */
int ha_env_parse_size(const char *s, int64_t *out);
/* Decimal, no suffix (seconds, counts). */
int ha_env_parse_count(const char *s, int64_t *out);
/* gperftools' booleans (t T y Y 1 and ""), and true/yes/on; f F n N 0
 * false/no/off. */
int ha_env_parse_bool(const char *s, int64_t *out);
/* 1..NSIG-1, a name with or without SIG, RTMIN+n, RTMAX-n; not KILL, STOP. */
int ha_env_parse_signal(const char *s, int64_t *out);
#define HA_ENV_FORMAT_TEXT 1
#define HA_ENV_FORMAT_PPROF 2
/* text | pprof | both -> HA_ENV_FORMAT_* bits. */
int ha_env_parse_format(const char *s, int64_t *out);
/* 0.9, .9, 90% or 90.5% -> parts per million (0..1000000). */
int ha_env_parse_fraction(const char *s, int64_t *out);
/* The parser of a kind by its name (size seconds count bool signal format
 * fraction, tools/gen-options' names); ENOENT for an unknown kind. */
int ha_env_parse(const char *kind, const char *s, int64_t *out);

#endif
