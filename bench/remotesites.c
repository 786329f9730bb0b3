/* bench/remotesites.c — a heap for bench/remote-dump: SITES call sites
 * (distinct stacks: a path of 14 calls through two functions, one bit of
 * the site number each) sharing TOTAL bytes in blocks of 64 KiB, then it
 * waits for stdin to close.  Blocks are not touched (the heap is address
 * space, not RSS).
 *   remotesites SITES TOTAL_MIB READY */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
void *kept[1 << 20];
size_t nkept;

NOINLINE void step(int d, unsigned path, size_t n);
NOINLINE void via_a(int d, unsigned path, size_t n) { step(d, path, n); __asm__ volatile(""); }
NOINLINE void via_b(int d, unsigned path, size_t n) { step(d, path, n); __asm__ volatile(""); }

NOINLINE void step(int d, unsigned path, size_t n)
{
	if (d == 0) {
		for (size_t i = 0; i < n && nkept < (1 << 20); i++)
			kept[nkept++] = malloc(65536);
		return;
	}
	if (path & 1)
		via_a(d - 1, path >> 1, n);
	else
		via_b(d - 1, path >> 1, n);
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	unsigned sites = (unsigned)atoi(argv[1]);
	size_t blocks = (size_t)atoi(argv[2]) * 16;     /* 64 KiB blocks */
	for (unsigned s = 0; s < sites; s++)
		step(14, s, blocks / sites + (s < blocks % sites));
	int fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || close(fd))
		return 99;
	char c;
	while (read(0, &c, 1) > 0)
		;
	return 0;
}
