/* alloc/cxx_runtime.c — the C++ runtime's pieces that operator new needs
 * only when an allocation fails: the installed new_handler, a throw of
 * std::bad_alloc, and the runtime's own nothrow new (which catches for us).
 * They are found then, never linked, so a C program that links or preloads
 * heapalloc maps no libstdc++ (nor the libm and libgcc_s it drags in).
 *
 * Where from, first hit wins: a weak reference (the runtime loaded with the
 * program, or linked into it statically); else the runtime by name, already
 * loaded (RTLD_NOLOAD) — also one a C program dlopened later, RTLD_LOCAL, as
 * Python loads a C++ extension: libstdc++, then LLVM's libc++.  Names are the
 * Itanium C++ ABI's, the same in both runtimes except the throw helper.
 * Called with no allocator lock held (dlopen's error message may malloc).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

#include "alloc/internal.h"
#include "alloc/log.h"

typedef void (*ha_new_handler)(void);
typedef ha_new_handler (*get_handler_fn)(void);
typedef void (*throw_fn)(void);

/* std::get_new_handler() and std::__throw_bad_alloc() (libstdc++) */
extern ha_new_handler ha_weak_get_new_handler(void)
	__asm__("_ZSt15get_new_handlerv") __attribute__((weak, visibility("default")));
extern void ha_weak_throw_bad_alloc(void)
	__asm__("_ZSt17__throw_bad_allocv") __attribute__((weak, noreturn, visibility("default")));

static const char *const runtimes[] = { "libstdc++.so.6", "libc++.so.1", "libc++abi.so.1" };

/* name in the first runtime that has it; NULL when none is loaded */
static void *runtime_sym(const char *name)
{
	for (size_t i = 0; i < sizeof runtimes / sizeof runtimes[0]; i++) {
		void *h = dlopen(runtimes[i], RTLD_LAZY | RTLD_NOLOAD);
		if (!h)
			continue;
		void *s = dlsym(h, name);
		dlclose(h);   /* NOLOAD took a reference: give it back */
		if (s)
			return s;
	}
	return NULL;
}

ha_new_handler ha_cxx_new_handler(void)
{
	static get_handler_fn get;   /* found once, kept: a runtime stays loaded */
	get_handler_fn g = __atomic_load_n(&get, __ATOMIC_ACQUIRE);
	if (!g) {
		g = ha_weak_get_new_handler ? ha_weak_get_new_handler
					    : (get_handler_fn)runtime_sym("_ZSt15get_new_handlerv");
		if (!g)
			return NULL;   /* no C++ runtime: none can be installed */
		__atomic_store_n(&get, g, __ATOMIC_RELEASE);
	}
	return g();
}

void ha_cxx_throw_bad_alloc(void)
{
	throw_fn t = ha_weak_throw_bad_alloc ? ha_weak_throw_bad_alloc
					     : (throw_fn)runtime_sym("_ZSt17__throw_bad_allocv");
	if (!t)
		t = (throw_fn)runtime_sym("_ZNSt3__117__throw_bad_allocEv");   /* libc++ */
	if (t)
		t();
	ha_log("heapalloc: operator new: out of memory and no C++ runtime loaded to throw "
	       "std::bad_alloc; aborting\n");
	abort();
}

/* A nothrow operator new of form (0 plain, 1 array, 2 aligned, 3 aligned
 * array) whose allocation failed.  No handler: NULL.  Else the runtime's own
 * nothrow new of that form, which calls the throwing one (ours) inside
 * try/catch: handlers run, bad_alloc becomes NULL.  No runtime's to be found
 * (one linked statically has none: ours replaced it) runs the loop here, and
 * a handler's exception passes through. */
void *ha_cxx_nothrow_failed(size_t n, size_t align, int form)
{
	static const char *const names[4] = {
		"_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
		"_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
	};
	static const char tag;   /* the std::nothrow_t argument: never read */
	ha_new_handler h = ha_cxx_new_handler();
	if (!h)
		return NULL;
	void *rt = form >= 0 && form < 4 ? runtime_sym(names[form]) : NULL;
	if (rt && form < 2)
		return ((void *(*)(size_t, const void *))rt)(n, &tag);
	if (rt)   /* std::align_val_t is a size_t */
		return ((void *(*)(size_t, size_t, const void *))rt)(n, align, &tag);
	for (; h; h = ha_cxx_new_handler()) {
		h();
		void *p = align <= HA_MIN_ALIGN ? ha_alloc(n) : ha_alloc_aligned(align, n);
		if (p)
			return p;
	}
	return NULL;
}
