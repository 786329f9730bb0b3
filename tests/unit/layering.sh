#!/bin/sh
# layering.sh — the layers include/ <- alloc/ <- prof/ <- tools/ hold: the
# allocator includes nothing of prof/ or tools/; the profiler includes of
# alloc/ only the interface (hooks.h) and the shared helpers (base.h,
# debug.h, env.h, lock.h, log.h, sys.h) and never sym/, which it reaches only by dlopen;
# sym/ (the symboliser plugin) includes of the library only the plugin
# interface prof/sym_abi.h; tools/ includes neither's internals but the
# standalone interfaces it shares (prof/pb.h, prof/leakscan.h, prof/sampler.h,
# alloc/env.h),
# and tools/profile.c, which links prof/'s writers and answers the calls they
# make, their headers (prof/prof.h, pprof.h, root.h).  (That the
# allocator links without the profiler is tests/unit/alloc_units; that the
# profiler links over alloc/hooks.h alone is tests/unit/prof_alone; an
# undeclared call fails the build: -Werror=implicit-function-declaration.)
# Env: top_srcdir.
top=${top_srcdir:-..}
status=0
bad() { echo "FAIL: $1"; status=1; }
for f in "$top"/alloc/*.[ch] "$top"/alloc/*.cc; do
	grep -Hn '#include "\(prof\|tools\)/' "$f" && bad "$f includes the profiler or tools"
done
for f in "$top"/prof/*.[ch] "$top"/prof/*/*.[ch]; do
	grep -Hn '#include "alloc/' "$f" | grep -v '"alloc/\(hooks\|base\|debug\|env\|lock\|log\|sys\)\.h"' &&
		bad "$f includes allocator internals"
done
for f in "$top"/prof/*.[ch] "$top"/prof/*/*.[ch]; do
	grep -Hn '#include "sym/' "$f" && bad "$f includes the plugin (dlopen it)"
done
for f in "$top"/sym/*.[ch]; do
	grep -Hn '#include "\(alloc\|prof\|tools\)/' "$f" | grep -v '"prof/sym_abi\.h"' &&
		bad "$f includes library internals"
done
for f in "$top"/tools/*.c; do
	writers='"prof/\(pb\|leakscan\|sampler\)\.h"'
	[ "$(basename "$f")" = profile.c ] && writers='"prof/\(pb\|leakscan\|sampler\|prof\|output/pprof\|root\)\.h"'
	grep -Hn '#include "\(alloc\|prof\)/' "$f" | grep -v "$writers" |
		grep -v '"alloc/env\.h"' &&
		bad "$f includes library internals"
done
# prof/session/session.h names the files that may include it; alloc/hooks.h's
# summary names every call it declares
allowed=$(sed -n '1,/\*\//p' "$top/prof/session/session.h" | grep -o '[a-z_]*\.c' | sort -u)
for f in $(grep -l '#include "prof/session/session.h"' "$top"/prof/*/*.c); do
	echo "$allowed" | grep -qx "$(basename "$f")" ||
		bad "$f includes prof/session/session.h, whose header does not name it"
done
summary=$(sed -n '1,/\*\//p' "$top/alloc/hooks.h")
for fn in $(sed -n 's/^[a-z].*[ *]\(ha_[a-z_]*\)(.*/\1/p' "$top/alloc/hooks.h"); do
	echo "$summary" | grep -qw "$fn" || bad "alloc/hooks.h declares $fn but its summary does not name it"
done
n=$(ls "$top"/alloc/*.c "$top"/prof/*/*.c | wc -l)
[ "$n" -gt 20 ] || bad "found only $n sources under $top (wrong top_srcdir?)"
[ $status = 0 ] && echo "ok: $n sources keep their layer"
exit $status
