#!/bin/sh
# prof_sym_needed.sh — libdw stays out of libheapalloc.so: its NEEDED
# entries name no libdw, libelf or libiberty, which only the symboliser
# plugin libheapalloc-sym.so (dlopened for named profiles) may need; and
# the plugin, when built, exports its entry point and nothing else.
# Env: HA_LIB.
lib=${HA_LIB:-}
[ -n "$lib" ] && [ -f "$lib" ] || { echo "HARD ERROR: HA_LIB='$lib' is not a file"; exit 99; }
command -v readelf >/dev/null 2>&1 && command -v nm >/dev/null 2>&1 ||
	{ echo "SKIP: readelf or nm not installed"; exit 77; }
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ -n "$needed" ] || { echo "HARD ERROR: readelf listed no NEEDED entries of $lib"; exit 99; }
status=0
bad=$(echo "$needed" | grep -E '^lib(dw|elf|iberty)[.-]')
[ -z "$bad" ] || { echo "FAIL: $lib needs $bad"; status=1; }
plugin=$(dirname "$lib")/libheapalloc-sym.so
if [ -f "$plugin" ]; then
	pn=$(readelf -d "$plugin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
	echo "$pn" | grep -q '^libdw\.' || { echo "FAIL: $plugin does not need libdw: $pn"; status=1; }
	syms=$(nm -D --defined-only "$plugin" | awk 'NF >= 3 { print $3 }')
	[ "$syms" = heapalloc_sym_ops ] ||
		{ echo "FAIL: $plugin exports more than heapalloc_sym_ops: $(echo $syms | head -c 300)"; status=1; }
else
	echo "no $plugin (--disable-symbolize): its checks skipped"
fi
[ $status = 0 ] && echo "PASS: $lib needs $(echo $needed)"
exit $status
