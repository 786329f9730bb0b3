/* tests/integration/names_deleted.h — names_served's wait (C and C++) for its running
 * copy to be deleted: until /proc/self/maps shows the mapping of its code
 * at `code` as " (deleted)"; 0, or -1 after 30 s.  The mapping, not
 * /proc/self/exe: qemu-user answers that with the path it started, deleted
 * or not, but shows the kernel's name of a mapping.  Never allocates (the
 * program records every allocation). */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int code_deleted(uintptr_t code)
{
	static char buf[1 << 20];
	size_t n = 0;
	ssize_t k;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	while (n < sizeof buf - 1 && (k = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
		n += (size_t)k;
	close(fd);
	buf[n] = 0;
	for (char *l = buf, *e; *l; l = *e ? e + 1 : e) {
		e = strchr(l, '\n');
		if (!e)
			e = l + strlen(l);
		char *p;
		uintptr_t lo = strtoul(l, &p, 16);
		uintptr_t hi = *p == '-' ? strtoul(p + 1, NULL, 16) : 0;
		if (code >= lo && code < hi)
			return e - l > 10 && memcmp(e - 10, " (deleted)", 10) == 0;
	}
	return 0;
}

static int wait_deleted(uintptr_t code)
{
	for (int t = 0; t < 3000; t++) {
		if (code_deleted(code))
			return 0;
		usleep(10000);
	}
	return -1;
}
