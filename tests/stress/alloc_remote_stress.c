/* tests/stress/alloc_remote_stress.c — tests/integration/alloc_remote ten
 * times longer. */
#define MESSAGES 400000
#define ROUNDS 6
#include "tests/integration/alloc_remote.c"
