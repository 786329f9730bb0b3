/* prof/output/mappings.c — the executable mappings a pprof profile names: the
 * lines of /proc/self/maps (or a process's read from outside) parsed, each file's GNU build ID read from its
 * loaded image's PT_NOTE in memory, and the mapping of an address.
 *
 * Never uses dl_iterate_phdr (the loader lock; the caller may hold
 * ha_prof_dump_lock): the memory map comes from /proc/self/maps, and ELF
 * headers and notes are copied by process_vm_readv, so a library unloaded
 * meanwhile costs its build ID, never a fault.  Never calls the public
 * malloc (ha_dump_mem memory).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "prof/output/pprof.h"

static uint64_t parse_hex(const char **s, const char *end)
{
	uint64_t v = 0;
	const char *p = *s;
	for (; p < end; p++) {
		char c = *p;
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			break;
		v = v << 4 | (uint64_t)d;
	}
	*s = p;
	return v;
}

static const char *skip_field(const char *p, const char *end)
{
	while (p < end && *p != ' ')
		p++;
	while (p < end && *p == ' ')
		p++;
	return p;
}

/* Parse one /proc/self/maps line: start-end perms offset dev inode path. */
static int parse_line(const char *p, const char *end, ha_pmap *m)
{
	memset(m, 0, sizeof *m);
	m->start = parse_hex(&p, end);
	if (p >= end || *p != '-')
		return -1;
	p++;
	m->limit = parse_hex(&p, end);
	if (p + 5 > end || *p != ' ')
		return -1;
	m->perm_r = p[1];
	m->perm_x = p[3];
	p = skip_field(p + 1, end);
	m->offset = parse_hex(&p, end);
	p = skip_field(p, end);      /* to dev */
	p = skip_field(p, end);      /* to inode */
	p = skip_field(p, end);      /* to path */
	m->path = p;
	m->path_len = (size_t)(end - p);
	return 0;
}

static int same_path(const ha_pmap *a, const ha_pmap *b)
{
	return a->path_len && a->path_len == b->path_len &&
	       memcmp(a->path, b->path, a->path_len) == 0;
}

/* Copy n bytes at address a of the mapped process (ha_maps_pid: this one,
 * or the one a reader outside names) into dst, or fail: a library unloaded
 * since its maps were read must not fault the dump, so the kernel does the
 * reading (process_vm_readv: EFAULT, never SIGSEGV).  0 ok, -1 not
 * readable or the call is not allowed. */
static int peek(void *dst, uintptr_t a, size_t n)
{
	struct iovec l = { dst, n }, r = { (void *)a, n };
	int e = errno;
	pid_t pid = ha_maps_pid > 0 ? ha_maps_pid : getpid();
	ssize_t got = process_vm_readv(pid, &l, 1, &r, 1, 0);
	if (got < 0 && (errno == ENOSYS || errno == EPERM)) {
		/* no process_vm_readv (qemu-user has none; seccomp profiles may
		 * deny it): /proc/PID/mem fails as safely, EIO for a hole */
		char path[32] = "/proc/self/mem";
		if (ha_maps_pid > 0)
			ha_snprintf(path, sizeof path, "/proc/%d/mem", ha_maps_pid);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		got = fd < 0 ? -1 : pread(fd, dst, n, (off_t)a);
		if (fd >= 0)
			close(fd);
	}
	errno = e;
	return got == (ssize_t)n ? 0 : -1;
}

/* The GNU build ID of m's file, from its loaded ELF header and PT_NOTE
 * segments in memory.  The file's first mapping (offset 0) holds the ELF
 * header; its load bias is that mapping's start minus the page of the
 * first PT_LOAD's p_vaddr. */
void ha_mappings_build_id(const ha_pmap *maps, size_t nm, ha_pmap *m)
{
	const ha_pmap *head = NULL;
	for (size_t i = 0; i < nm; i++)
		if (maps[i].offset == 0 && maps[i].perm_r == 'r' && same_path(&maps[i], m)) {
			head = &maps[i];
			break;
		}
	Elf64_Ehdr eh;
	if (!head || peek(&eh, head->start, sizeof eh) != 0)
		return;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 64)
		return;
	Elf64_Phdr ph[64];
	if (peek(ph, head->start + eh.e_phoff, (size_t)eh.e_phnum * sizeof *ph) != 0)
		return;
	uintptr_t first = UINTPTR_MAX;
	for (int i = 0; i < eh.e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < first)
			first = ph[i].p_vaddr;
	if (first == UINTPTR_MAX)
		return;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t bias = head->start - (first & ~(page - 1));
	for (int i = 0; i < eh.e_phnum; i++) {
		unsigned char note[1024];
		if (ph[i].p_type != PT_NOTE)
			continue;
		size_t len = ph[i].p_memsz < sizeof note ? ph[i].p_memsz : sizeof note;
		if (peek(note, bias + ph[i].p_vaddr, len) != 0)
			continue;
		for (size_t at = 0; at + sizeof(Elf64_Nhdr) <= len;) {
			Elf64_Nhdr nh;
			memcpy(&nh, note + at, sizeof nh);
			size_t name = at + sizeof nh;
			size_t desc = name + ((nh.n_namesz + 3) & ~3u);
			size_t next = desc + ((nh.n_descsz + 3) & ~3u);
			if (next > len || next <= at)
				break;
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    memcmp(note + name, "GNU", 4) == 0 && nh.n_descsz &&
			    nh.n_descsz <= HA_BUILD_ID_MAX) {
				memcpy(m->bid, note + desc, nh.n_descsz);
				m->bid_len = nh.n_descsz;
				return;
			}
			at = next;
		}
	}
}

int ha_mappings_read(ha_out *mo, ha_pmap **maps, size_t *nm)
{
	*maps = NULL;
	*nm = 0;
	ha_writer_maps(mo);
	size_t nlines = 0;
	for (size_t i = 0; i < mo->len; i++)
		nlines += mo->buf[i] == '\n';
	if (nlines && !(*maps = ha_dump_mem(nlines * sizeof **maps)))
		return ENOMEM;
	for (size_t i = 0, s = 0; i < mo->len; i++) {
		if (mo->buf[i] != '\n')
			continue;
		if (parse_line(mo->buf + s, mo->buf + i, &(*maps)[*nm]) == 0)
			(*nm)++;
		s = i + 1;
	}
	return 0;
}

/* Exec mappings are few and sorted: a scan is enough. */
size_t ha_mappings_find(const ha_pmap *maps, size_t nm, uintptr_t a)
{
	for (size_t i = 0; i < nm; i++)
		if (maps[i].id && a >= maps[i].start && a < maps[i].limit)
			return i + 1;
	return 0;
}
