#!/bin/sh
# The README's table of profiler variables matches the ONE options table in
# prof/session/options.c: same names, same order, same defaults.
set -u
src="$top_srcdir/prof/session/options.c"
readme="$top_srcdir/README.md"
[ -f "$src" ] && [ -f "$readme" ] || { echo "missing $src or $readme"; exit 99; }
# rows of the C table: { "NAME", OPT_TYPE, DEFAULT,
code=$(sed -n 's/^[[:space:]]*{ "\([A-Z_]*\)", OPT_\([A-Z]*\), \([0-9A-Z_]*\),.*/\1 \2 \3/p' "$src" |
	awk '{ d = $3; if ($2 == "STR" || ($2 == "SIGNAL" && d == 0)) d = "unset";
		else if ($2 == "FORMAT") d = (d == "HA_FORMAT_TEXT" ? "text" : d);
		else if ($2 == "FRACTION") d = d / 1000000;
		else if ($2 == "BOOL") d = (d == 1 ? "true" : "false"); print $1 " " d }')
doc=$(sed -n 's/^| `\([A-Z_]*\)` | \([^ |]*\) |.*/\1 \2/p' "$readme")
[ -n "$code" ] || { echo "no rows parsed from $src"; exit 99; }
if [ "$code" != "$doc" ]; then
	echo "FAIL: README.md variable table differs from prof/session/options.c"
	echo "--- options.c"; echo "$code"
	echo "--- README.md"; echo "$doc"
	exit 1
fi
echo "PASS: $(echo "$code" | wc -l) variables agree"
