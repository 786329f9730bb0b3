/* usdt_sem.h — find an otel_memory probe's semaphore in the loaded
 * libheapalloc, for tests and benchmarks that stand in for a tracer
 * without BPF: a tracer attaching with the semaphore's offset makes the
 * kernel add 1 to it, detaching subtracts 1; writing it does the same.
 *
 * Reads the library's .note.stapsdt from its file (the path the loader
 * reports) and adds the load bias.  Header-only: include once per program,
 * which defines _GNU_SOURCE before its first include (dl_iterate_phdr).
 */
#ifndef HA_USDT_SEM_H
#define HA_USDT_SEM_H
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct usdt_sem_find {
	const char *path;
	uintptr_t bias;
};

static int usdt_sem_lib(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct usdt_sem_find *f = arg;
	if (info->dlpi_name && strstr(info->dlpi_name, "libheapalloc")) {
		f->path = info->dlpi_name;
		f->bias = info->dlpi_addr;
		return 1;
	}
	return 0;
}

/* The semaphore of otel_memory:<probe> in this process, or NULL (no
 * libheapalloc loaded, or one without probes). */
static unsigned short *usdt_semaphore(const char *probe)
{
	struct usdt_sem_find f = { NULL, 0 };
	dl_iterate_phdr(usdt_sem_lib, &f);
	if (!f.path)
		return NULL;
	int fd = open(f.path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0)
		return NULL;
	unsigned char *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return NULL;
	unsigned short *sem = NULL;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)m;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(m + eh->e_shoff);
	const char *names = (const char *)m + sh[eh->e_shstrndx].sh_offset;
	for (int i = 0; i < eh->e_shnum && !sem; i++) {
		if (strcmp(names + sh[i].sh_name, ".note.stapsdt") != 0)
			continue;
		size_t off = sh[i].sh_offset, end = off + sh[i].sh_size;
		while (off + sizeof(Elf64_Nhdr) <= end && !sem) {
			const Elf64_Nhdr *nh = (const Elf64_Nhdr *)(m + off);
			size_t name_at = off + sizeof *nh;
			size_t desc_at = name_at + ((nh->n_namesz + 3) & ~3u);
			off = desc_at + ((nh->n_descsz + 3) & ~3u);
			if (nh->n_type != 3 || strcmp((const char *)m + name_at, "stapsdt") != 0)
				continue;
			const unsigned char *d = m + desc_at;
			uint64_t addr;
			memcpy(&addr, d + 16, 8);   /* pc, base, semaphore */
			const char *prov = (const char *)d + 24;
			const char *name = prov + strlen(prov) + 1;
			if (strcmp(prov, "otel_memory") == 0 && strcmp(name, probe) == 0 && addr)
				sem = (unsigned short *)(f.bias + addr);
		}
	}
	munmap(m, (size_t)st.st_size);
	return sem;
}

#endif
