/* prof/environ.h — the one way the profiler extends the live environment
 * for the programs it execs (naming.c: HEAPPROFILE_USE_PID and
 * HEAPALLOC_PROFILE_ROOT; http_listen.c: HEAPALLOC_HTTP_ROOT).
 *
 * A new array in raw memory replaces environ: the old one's entries, less
 * those a caller drops (its own marker from an ancestor), then the added
 * ones.  A user's variable is never dropped nor changed.  Never
 * calls the public malloc and never frees (environ may be read at any
 * time: the old array and the new one are leaked on purpose).  The added
 * strings must outlive the process (static storage).  Header-only.
 */
#ifndef HA_PROF_ENVIRON_H
#define HA_PROF_ENVIRON_H

#include <string.h>

#include "prof/prof.h"

extern char **environ;

/* Append add[0..nadd) ("NAME=value" each) to environ, leaving out the
 * entries that start with drop (NULL: none).  Nothing when environ is NULL
 * or out of memory. */
static inline void ha_environ_put(char *const *add, size_t nadd, const char *drop)
{
	if (!environ)
		return;
	size_t n = 0;
	while (environ[n])
		n++;
	char **e = ha_raw_malloc((n + nadd + 1) * sizeof *e);
	if (!e)
		return;
	size_t k = 0, dl = drop ? strlen(drop) : 0;
	for (size_t i = 0; i < n; i++)
		if (!drop || strncmp(environ[i], drop, dl) != 0)
			e[k++] = environ[i];
	for (size_t j = 0; j < nadd; j++)
		e[k++] = add[j];
	e[k] = NULL;
	environ = e;
}

#endif
