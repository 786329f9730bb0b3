/* tools/options.c — heapalloc-options, a private helper of the command:
 * `heapalloc run` asks it how the library reads each of its flags' values,
 * so that the command and the library read them with one grammar
 * (alloc/env.c), never two that drift.
 *
 *   heapalloc-options KIND VALUE...
 * prints one line per VALUE: the number the library reads it as (a size in
 * bytes, seconds, a signal's number, the format's bits...), or `-` when
 * the library would call it junk and use the default.  KIND is one of
 * tools/gen-options' names of the table's types (size seconds count bool
 * signal format fraction); exit status 2 for an unknown one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "alloc/env.h"

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: heapalloc-options KIND VALUE...\n");
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		int64_t v;
		int err = ha_env_parse(argv[1], argv[i], &v);
		if (err && err != EINVAL) {    /* ENOENT: an unknown kind */
			fprintf(stderr, "heapalloc-options: unknown kind %s\n", argv[1]);
			return 2;
		}
		if (err)
			puts("-");
		else
			printf("%" PRId64 "\n", v);
	}
	return fflush(stdout) ? 1 : 0;
}
