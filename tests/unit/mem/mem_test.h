/* Helpers shared by the mem layer's unit tests: what the kernel says about
 * our mappings, read without allocating (a malloc under ASan may map memory
 * right where a region was just unmapped). */
#ifndef HC_TEST_MEM_H
#define HC_TEST_MEM_H

#define _GNU_SOURCE
#include <hicache/common.h>
#include <hicache/mem.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MB ((size_t)1 << 20)
#define GB ((size_t)1 << 30)

static char mt_buf[1 << 20];

/* Read a /proc or /sys file into mt_buf; its length, or -1. */
static inline ssize_t mt_read(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t used = 0;
	ssize_t n;
	while (used + 1 < sizeof(mt_buf) &&
	       (n = read(fd, mt_buf + used, sizeof(mt_buf) - 1 - used)) > 0)
		used += (size_t)n;
	close(fd);
	mt_buf[used] = '\0';
	return (ssize_t)used;
}

/* Whether any VMA overlaps [addr, addr + len). */
static inline bool mt_mapped(const void *addr, size_t len)
{
	if (mt_read("/proc/self/maps") < 0)
		return true;
	uintptr_t a = (uintptr_t)addr, b = a + len;
	for (char *line = mt_buf; *line;) {
		char *next = strchr(line, '\n');
		unsigned long long s, e;
		if (sscanf(line, "%llx-%llx", &s, &e) == 2 && s < b && a < e)
			return true;
		if (!next)
			break;
		line = next + 1;
	}
	return false;
}

/* A "Name:   N kB" field of /proc/self/status, in kB; -1 if missing. */
static inline long long mt_status_kb(const char *field)
{
	if (mt_read("/proc/self/status") < 0)
		return -1;
	char *p = strstr(mt_buf, field);
	long long v;
	if (!p || sscanf(p + strlen(field), ": %lld", &v) != 1)
		return -1;
	return v;
}

static inline int mt_fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* Pages of [addr, addr + len) that are not resident. */
static inline size_t mt_not_resident(void *addr, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t n = (len + page - 1) / page;
	unsigned char *vec = calloc(n, 1);
	if (!vec || mincore(addr, len, vec)) {
		free(vec);
		return n;
	}
	size_t missing = 0;
	for (size_t i = 0; i < n; i++)
		missing += !(vec[i] & 1);
	free(vec);
	return missing;
}

static inline bool mt_all_zero(const void *addr, size_t len)
{
	const uint64_t *p = addr;
	for (size_t i = 0; i < len / 8; i++)
		if (p[i])
			return false;
	return true;
}

/* Fill with a pattern that differs per 8-byte word, then check it. */
static inline void mt_fill(void *addr, size_t len)
{
	uint64_t *p = addr;
	for (size_t i = 0; i < len / 8; i++)
		p[i] = i * 0x9e3779b97f4a7c15ull + 1;
}

static inline bool mt_check(const void *addr, size_t len)
{
	const uint64_t *p = addr;
	for (size_t i = 0; i < len / 8; i++)
		if (p[i] != i * 0x9e3779b97f4a7c15ull + 1)
			return false;
	return true;
}

/* The bracketed word of /sys/kernel/mm/transparent_hugepage/enabled. */
static inline const char *mt_thp_mode(void)
{
	if (mt_read("/sys/kernel/mm/transparent_hugepage/enabled") < 0)
		return "never";
	if (strstr(mt_buf, "[always]"))
		return "always";
	if (strstr(mt_buf, "[madvise]"))
		return "madvise";
	return "never";
}

static inline struct hc_mem_opts mt_opts(void)
{
	struct hc_mem_opts o;
	hc_mem_opts_init(&o, sizeof(o));
	return o;
}

#endif
