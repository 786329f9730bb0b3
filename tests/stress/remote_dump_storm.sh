#!/bin/sh
# remote_dump_storm.sh — the stress tier's remote_dump.sh: 200 dumps in a
# row of the 4-thread churn instead of 40 (the rest as there).
REMOTE_DUMPS=200
export REMOTE_DUMPS
exec sh "$top_srcdir/tests/integration/remote_dump.sh"
