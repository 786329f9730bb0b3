/* alloc/operators.cc — every C++ operator new/delete form.
 *
 * Throwing forms loop: allocate, else call the installed new_handler, else
 * throw std::bad_alloc.  nothrow forms run the same loop and turn a
 * bad_alloc into nullptr.  Aligned forms take std::align_val_t.  Sized
 * deletes ignore the size: free() finds it in O(1) anyway.
 */
#include <new>
#include <cstddef>
extern "C" {
#include "alloc/internal.h"
}

/* entry.c refers to this, so a static link that takes malloc from
 * libheapalloc.a takes the operators too (else libstdc++ would find another
 * allocator's operator new, e.g. Debian's libmimalloc.so). */
extern "C" { HA_HIDDEN extern const char ha_operators_anchor; const char ha_operators_anchor = 0; }

namespace {

void *alloc_or_throw(std::size_t n, std::size_t align)
{
	for (;;) {
		void *p = align <= HA_MIN_ALIGN ? ha_alloc(n) : ha_alloc_aligned(align, n);
		if (HA_LIKELY(p != nullptr))
			return p;
		std::new_handler h = std::get_new_handler();
		if (!h)
			throw std::bad_alloc();
		h();
	}
}

void *alloc_nothrow(std::size_t n, std::size_t align) noexcept
{
	try {
		return alloc_or_throw(n, align);
	} catch (...) {
		return nullptr;
	}
}

} // namespace

#define NEW_ATTR HA_EXPORT
using std::align_val_t;
using std::nothrow_t;
using std::size_t;

NEW_ATTR void *operator new(size_t n) { return alloc_or_throw(n, 0); }
NEW_ATTR void *operator new[](size_t n) { return alloc_or_throw(n, 0); }
NEW_ATTR void *operator new(size_t n, const nothrow_t &) noexcept { return alloc_nothrow(n, 0); }
NEW_ATTR void *operator new[](size_t n, const nothrow_t &) noexcept { return alloc_nothrow(n, 0); }
NEW_ATTR void *operator new(size_t n, align_val_t a) { return alloc_or_throw(n, (size_t)a); }
NEW_ATTR void *operator new[](size_t n, align_val_t a) { return alloc_or_throw(n, (size_t)a); }
NEW_ATTR void *operator new(size_t n, align_val_t a, const nothrow_t &) noexcept
{
	return alloc_nothrow(n, (size_t)a);
}
NEW_ATTR void *operator new[](size_t n, align_val_t a, const nothrow_t &) noexcept
{
	return alloc_nothrow(n, (size_t)a);
}

NEW_ATTR void operator delete(void *p) noexcept { ha_free(p); }
NEW_ATTR void operator delete[](void *p) noexcept { ha_free(p); }
NEW_ATTR void operator delete(void *p, const nothrow_t &) noexcept { ha_free(p); }
NEW_ATTR void operator delete[](void *p, const nothrow_t &) noexcept { ha_free(p); }
NEW_ATTR void operator delete(void *p, size_t) noexcept { ha_free(p); }
NEW_ATTR void operator delete[](void *p, size_t) noexcept { ha_free(p); }
NEW_ATTR void operator delete(void *p, align_val_t) noexcept { ha_free(p); }
NEW_ATTR void operator delete[](void *p, align_val_t) noexcept { ha_free(p); }
NEW_ATTR void operator delete(void *p, align_val_t, const nothrow_t &) noexcept { ha_free(p); }
NEW_ATTR void operator delete[](void *p, align_val_t, const nothrow_t &) noexcept { ha_free(p); }
NEW_ATTR void operator delete(void *p, size_t, align_val_t) noexcept { ha_free(p); }
NEW_ATTR void operator delete[](void *p, size_t, align_val_t) noexcept { ha_free(p); }
