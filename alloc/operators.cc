/* alloc/operators.cc — the C++ operator new/delete forms but the hot ones.
 *
 * Throwing forms loop: allocate, else call the installed new_handler, else
 * throw std::bad_alloc.  nothrow forms return nullptr when no handler is
 * installed, else hand over to the C++ runtime's own nothrow new, which calls
 * our throwing form inside try/catch (cxx_runtime.c).  The runtime's pieces
 * are looked up on failure only (alloc/cxx_runtime.c): this file has no try,
 * catch or throw, so the library links no libstdc++ and a C program maps
 * none.  Aligned forms take std::align_val_t.  Sized deletes ignore the
 * size: free() finds it in O(1) anyway.  Plain and array new and the deletes
 * without an alignment are entry.c's, which inlines malloc's and free's fast
 * paths (C only, see HA_SEG); a new that fails there comes back here through
 * ha_cxx_new_failed.
 */
#include <new>
#include <cstddef>
extern "C" {
#include "alloc/internal.h"
/* C never throws: noexcept callers need no terminate handler, so no
 * personality routine (libstdc++'s) is referred to */
__attribute__((nothrow)) void *ha_alloc(size_t n);
__attribute__((nothrow)) void *ha_alloc_aligned(size_t align, size_t n);
__attribute__((nothrow)) void ha_free(void *p);
typedef void (*ha_new_handler)(void);
ha_new_handler ha_cxx_new_handler(void);
__attribute__((noreturn)) void ha_cxx_throw_bad_alloc(void);
void *ha_cxx_nothrow_failed(size_t n, size_t align, int form) noexcept;
void *ha_cxx_new_failed(size_t n);
}

/* entry.c refers to this, so a static link that takes malloc from
 * libheapalloc.a takes the operators too (else libstdc++ would find another
 * allocator's operator new, e.g. Debian's libmimalloc.so). */
extern "C" { HA_HIDDEN extern const char ha_operators_anchor; const char ha_operators_anchor = 0; }

namespace {

enum form { PLAIN, ARRAY, ALIGNED, ALIGNED_ARRAY };   /* cxx_runtime.c's */

inline void *try_alloc(std::size_t n, std::size_t align)
{
	return align <= HA_MIN_ALIGN ? ha_alloc(n) : ha_alloc_aligned(align, n);
}

__attribute__((noinline)) void *new_failed(std::size_t n, std::size_t align)
{
	for (;;) {
		ha_new_handler h = ha_cxx_new_handler();
		if (!h)
			ha_cxx_throw_bad_alloc();
		h();   /* may throw; its exception passes through */
		if (void *p = try_alloc(n, align))
			return p;
	}
}

inline void *alloc_or_throw(std::size_t n, std::size_t align)
{
	void *p = try_alloc(n, align);
	return HA_LIKELY(p != nullptr) ? p : new_failed(n, align);
}

inline void *alloc_nothrow(std::size_t n, std::size_t align, form f) noexcept
{
	void *p = try_alloc(n, align);
	return HA_LIKELY(p != nullptr) ? p : ha_cxx_nothrow_failed(n, align, f);
}

} // namespace

/* entry.c's operator new and new[] when malloc's path gave NULL: the
 * new_handler loop, or std::bad_alloc */
extern "C" void *ha_cxx_new_failed(size_t n)
{
	return new_failed(n, 0);
}

#define NEW_ATTR HA_EXPORT
using std::align_val_t;
using std::nothrow_t;
using std::size_t;

NEW_ATTR void *operator new(size_t n, const nothrow_t &) noexcept { return alloc_nothrow(n, 0, PLAIN); }
NEW_ATTR void *operator new[](size_t n, const nothrow_t &) noexcept { return alloc_nothrow(n, 0, ARRAY); }
NEW_ATTR void *operator new(size_t n, align_val_t a) { return alloc_or_throw(n, (size_t)a); }
NEW_ATTR void *operator new[](size_t n, align_val_t a) { return alloc_or_throw(n, (size_t)a); }
NEW_ATTR void *operator new(size_t n, align_val_t a, const nothrow_t &) noexcept
{
	return alloc_nothrow(n, (size_t)a, ALIGNED);
}
NEW_ATTR void *operator new[](size_t n, align_val_t a, const nothrow_t &) noexcept
{
	return alloc_nothrow(n, (size_t)a, ALIGNED_ARRAY);
}

NEW_ATTR void operator delete(void *p, const nothrow_t &) noexcept { ha_free(p); }
NEW_ATTR void operator delete[](void *p, const nothrow_t &) noexcept { ha_free(p); }
NEW_ATTR void operator delete(void *p, align_val_t) noexcept { ha_free(p); }
NEW_ATTR void operator delete[](void *p, align_val_t) noexcept { ha_free(p); }
NEW_ATTR void operator delete(void *p, align_val_t, const nothrow_t &) noexcept { ha_free(p); }
NEW_ATTR void operator delete[](void *p, align_val_t, const nothrow_t &) noexcept { ha_free(p); }
NEW_ATTR void operator delete(void *p, size_t, align_val_t) noexcept { ha_free(p); }
NEW_ATTR void operator delete[](void *p, size_t, align_val_t) noexcept { ha_free(p); }
