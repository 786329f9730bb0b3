/* tests/stress/alloc_fork_quiet_stress.c — tests/integration/alloc_fork_quiet
 * with 200 runs (the integration tier runs 5). */
#define RUNS 200
#include "tests/integration/alloc_fork_quiet.c"
