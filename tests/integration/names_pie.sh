#!/bin/sh
# C ground truth as a PIE (the Debian default) with its own shared library.
PIEFLAGS=-pie
. "$top_srcdir/tests/integration/names_c_body.sh"
