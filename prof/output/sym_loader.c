/* prof/output/sym_loader.c — the symboliser plugin: finding and loading
 * libheapalloc-sym.so (prof/sym_abi.h), and the lock its calls run under.
 *
 * libdw is the plugin's dependency, never libheapalloc's: the plugin is
 * dlopened the first time a profile with names is asked for (the HTTP
 * endpoint, heapalloc_profile_pprof), on that thread, with no allocator or
 * profiler lock held and the thread's profiling suppressed, so neither the
 * loader's allocations nor libdw's show in a profile.  It is looked for
 * beside the file holding this code (libheapalloc.so, installed or in a
 * build tree's .libs), then by the loader's search path (a static link).
 * A plugin that cannot be loaded is one stderr line for the process's
 * lifetime; profiles then carry addresses and build IDs only.  One that
 * failed for want of a descriptor (EMFILE) is looked for again at the next
 * profile: a moment of it must not cost the process its names for good.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "prof/prof.h"
#include "prof/sym_abi.h"

static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static int names_busy;            /* a thread holds names_lock (for fork) */
static int tried;                 /* the plugin was looked for */
static int said_short;            /* the stderr line of a failure for want of a descriptor */
static const ha_sym_ops *ops;

void ha_names_lock(void)
{
	pthread_mutex_lock(&names_lock);
	names_busy = 1;
}

void ha_names_unlock(void)
{
	names_busy = 0;
	pthread_mutex_unlock(&names_lock);
}

void ha_names_postfork_child(void)
{
	/* a thread of the parent was inside the plugin: its state may be
	 * half-updated, so the child starts afresh (leaking the old one) */
	if (names_busy && ops)
		ops->forget();
	names_busy = 0;
	pthread_mutex_init(&names_lock, NULL);
}

/* The directory of the file mapped at address a, from /proc/self/maps
 * (absolute, unlike dladdr's name for a library preloaded by a relative
 * path), into dir; 0, or -1 when a is in no file mapping. */
static int dir_of(uintptr_t a, char *dir, size_t cap)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[8192];
	size_t len = 0;
	int found = -1;
	for (;;) {
		ssize_t r = read(fd, buf + len, sizeof buf - 1 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
		buf[len] = 0;
		char *ln = buf, *nl;
		while ((nl = memchr(ln, '\n', (size_t)(buf + len - ln)))) {
			*nl = 0;
			char *p = ln;
			uintptr_t lo = 0, hi = 0;
			for (; *p && *p != '-'; p++)
				lo = lo << 4 | (uintptr_t)(*p <= '9' ? *p - '0' : *p - 'a' + 10);
			for (p += *p == '-'; *p && *p != ' '; p++)
				hi = hi << 4 | (uintptr_t)(*p <= '9' ? *p - '0' : *p - 'a' + 10);
			char *path = strchr(ln, '/');
			if (a >= lo && a < hi && path) {
				char *slash = strrchr(path, '/');
				size_t n = (size_t)(slash - path);
				if (n + 1 < cap) {
					memcpy(dir, path, n);
					dir[n] = 0;
					found = 0;
				}
				goto out;
			}
			ln = nl + 1;
		}
		len = (size_t)(buf + len - ln);
		memmove(buf, ln, len);
		if (len == sizeof buf - 1)
			len = 0;          /* a line longer than the buffer: skip it */
	}
out:
	close(fd);
	return found;
}

const ha_sym_ops *ha_names_ops(void)
{
	if (tried)
		return ops;
	tried = 1;
	char path[PATH_MAX + 64];
	void *h = NULL;
	const char *why = NULL;
	/* installed: in heapalloc/ beside the library (pkglibdir); in a
	 * build tree: beside it */
	static const char *const where[] = { "/heapalloc/" HA_SYM_PLUGIN, "/" HA_SYM_PLUGIN };
	if (dir_of((uintptr_t)ha_names_ops, path, PATH_MAX) == 0) {
		size_t n = strlen(path);
		for (int i = 0; i < 2 && !h && !why; i++) {
			strcpy(path + n, where[i]);
			if (access(path, F_OK) == 0) {
				h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
				why = h ? NULL : dlerror();
			}
		}
	}
#ifdef HA_PKGLIBDIR
	/* a static link: where it was installed to */
	if (!h && !why && access(HA_PKGLIBDIR "/" HA_SYM_PLUGIN, F_OK) == 0) {
		h = dlopen(HA_PKGLIBDIR "/" HA_SYM_PLUGIN, RTLD_NOW | RTLD_LOCAL);
		why = h ? NULL : dlerror();
	}
#endif
	if (!h && !why) {
		h = dlopen(HA_SYM_PLUGIN, RTLD_NOW | RTLD_LOCAL);
		why = h ? NULL : dlerror();
	}
	ha_sym_entry_fn entry = h ? (ha_sym_entry_fn)dlsym(h, HA_SYM_ENTRY) : NULL;
	const ha_sym_ops *o = entry ? entry() : NULL;
	if (o && o->abi == HA_SYM_ABI) {
		ops = o;
		return ops;
	}
	if (!h && ha_fds_short()) {
		if (!said_short)
			ha_log("heapalloc: cannot load the symboliser " HA_SYM_PLUGIN " now (%s); profiles "
			       "carry addresses until a descriptor is free\n", why ? why : "no descriptor");
		said_short = 1;
		tried = 0;
		return NULL;
	}
	ha_log("heapalloc: cannot load the symboliser " HA_SYM_PLUGIN " (%s); profiles carry addresses only\n",
	       why ? why : "not a heapalloc plugin of this version");
	if (h)
		dlclose(h);
	return NULL;
}
