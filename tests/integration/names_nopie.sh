#!/bin/sh
# C ground truth as a non-PIE binary (fixed addresses, ET_EXEC).
PIEFLAGS="-no-pie -fno-pie"
. "$top_srcdir/tests/integration/names_c_body.sh"
