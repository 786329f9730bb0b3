#!/bin/sh
# layering.sh — the layers include/ <- alloc/ <- prof/ <- tools/ hold: the
# allocator includes nothing of prof/ or tools/; the profiler includes of
# alloc/ only the interface (hooks.h) and the shared helpers (base.h,
# lock.h, log.h, sys.h) and never sym/, which it reaches only by dlopen;
# sym/ (the symboliser plugin) includes of the library only the plugin
# interface prof/sym_abi.h; tools/ includes neither's internals.  (That the
# allocator also links without the profiler is tests/unit/alloc_units.)
# Env: top_srcdir.
top=${top_srcdir:-..}
status=0
bad() { echo "FAIL: $1"; status=1; }
for f in "$top"/alloc/*.[ch] "$top"/alloc/*.cc; do
	grep -Hn '#include "\(prof\|tools\)/' "$f" && bad "$f includes the profiler or tools"
done
for f in "$top"/prof/*.[ch]; do
	grep -Hn '#include "alloc/' "$f" | grep -v '"alloc/\(hooks\|base\|lock\|log\|sys\)\.h"' &&
		bad "$f includes allocator internals"
done
for f in "$top"/prof/*.[ch]; do
	grep -Hn '#include "sym/' "$f" && bad "$f includes the plugin (dlopen it)"
done
for f in "$top"/sym/*.[ch]; do
	grep -Hn '#include "\(alloc\|prof\|tools\)/' "$f" | grep -v '"prof/sym_abi\.h"' &&
		bad "$f includes library internals"
done
for f in "$top"/tools/*.c; do
	grep -Hn '#include "\(alloc\|prof\)/' "$f" | grep -v '"prof/pb\.h"' &&
		bad "$f includes library internals"
done
n=$(ls "$top"/alloc/*.c "$top"/prof/*.c | wc -l)
[ "$n" -gt 20 ] || bad "found only $n sources under $top (wrong top_srcdir?)"
[ $status = 0 ] && echo "ok: $n sources keep their layer"
exit $status
