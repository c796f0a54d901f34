/*
 * Linux implementation of the mem layer's OS boundary (see os.h).
 *
 * Mappings are MAP_PRIVATE | MAP_ANONYMOUS:
 *  - private, not shared: anonymous shared memory is shmem, whose huge pages
 *    follow shmem_enabled rather than the anonymous THP setting that
 *    MADV_HUGEPAGE opts into, and whose THP use smaps does not report as
 *    AnonHugePages. A pool is never shared with another process.
 *  - no MAP_NORESERVE: the region is pre-faulted right away, so reserving
 *    commit charge costs nothing, and the charge is what turns an impossible
 *    size into ENOMEM at mmap time instead of the OOM killer during
 *    population. For hugetlb it matters more: without the reservation a
 *    missing huge page is found only at fault time, as SIGBUS on a write.
 */
#define _GNU_SOURCE
#include "mem/os.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif

#define OS_SMALL_FILE 4096

/* Read a small text file whole into buf (NUL-terminated). */
static int read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t used = 0;
	while (used + 1 < cap) {
		ssize_t n = read(fd, buf + used, cap - 1 - used);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int rc = -errno;
			close(fd);
			return rc;
		}
		if (n == 0)
			break;
		used += (size_t)n;
	}
	buf[used] = '\0';
	close(fd);
	return 0;
}

size_t mem_os_page_size(void)
{
	long page = sysconf(_SC_PAGESIZE);
	return page > 0 ? (size_t)page : 4096;
}

unsigned mem_os_cpus(void)
{
	/* The affinity mask, not the online count: in a cpuset-limited container
	 * threads beyond the mask would only take turns on the same CPUs. */
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0) {
		int n = CPU_COUNT(&set);
		if (n > 0)
			return (unsigned)n;
	}
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	return online > 0 ? (unsigned)online : 1;
}

int mem_os_map(size_t len, size_t align, void **out)
{
	size_t page = mem_os_page_size();
	/* mmap only promises base-page alignment: map the slack too and trim it.
	 * Trimming shrinks the one VMA, so it cannot fail for want of VMAs. */
	size_t slack = align > page ? align - page : 0;
	void *p = mmap(NULL, len + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		       0);
	if (p == MAP_FAILED)
		return -errno;
	uintptr_t start = (uintptr_t)p;
	uintptr_t aligned = (start + align - 1) & ~((uintptr_t)align - 1);
	size_t head = aligned - start;
	size_t tail = slack - head;
	if (head)
		munmap(p, head);
	if (tail)
		munmap((void *)(aligned + len), tail);
	*out = (void *)aligned;
	return 0;
}

int mem_os_map_hugetlb(size_t len, size_t huge, void **out)
{
	int shift = __builtin_ctzll((unsigned long long)huge);
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | (shift << MAP_HUGE_SHIFT);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	*out = p;
	return 0;
}

void mem_os_unmap(void *addr, size_t len)
{
	munmap(addr, len);
}

int mem_os_advise_huge(void *addr, size_t len)
{
	return madvise(addr, len, MADV_HUGEPAGE) ? -errno : 0;
}

int mem_os_populate(void *addr, size_t len, size_t page)
{
	for (;;) {
		if (madvise(addr, len, MADV_POPULATE_WRITE) == 0)
			return 0;
		/* EINTR comes only with a fatal signal pending; the retry ends with
		 * the process. */
		if (errno == EINTR)
			continue;
		/* EINVAL on an aligned private anonymous range means the kernel
		 * predates MADV_POPULATE_WRITE. Anything else is a real failure. */
		if (errno != EINVAL)
			return -errno;
		break;
	}
	/* One write per page. An atomic add of zero is a single write fault and
	 * keeps whatever the page holds. Out of memory here is the OOM killer's
	 * business, not an error code: old kernels offer nothing better. */
	char *p = addr;
	char *end = p + len;
	for (; p < end; p += page)
		__atomic_fetch_add(p, 0, __ATOMIC_RELAXED);
	return 0;
}

int mem_os_lock(void *addr, size_t len)
{
	/* The system call itself: sanitizer runtimes replace mlock() with a
	 * no-op that returns 0, which would make hc_mem_locked() a lie in the
	 * very builds the tests run. */
	return syscall(SYS_mlock, addr, len) ? -errno : 0;
}

uint64_t mem_os_memlock_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return UINT64_MAX;
	return (uint64_t)rl.rlim_cur;
}

/* Parse a decimal count that fills the text up to optional trailing
 * whitespace. */
static int parse_count(const char *text, uint64_t *out)
{
	if (*text < '0' || *text > '9')
		return -EINVAL;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(text, &end, 10);
	if (errno)
		return -EINVAL;
	while (*end == ' ' || *end == '\n' || *end == '\t')
		end++;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

int mem_os_huge_free(size_t huge, uint64_t *out)
{
	char path[96], buf[64];
	snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/hugepages-%zukB/free_hugepages",
		 huge >> 10);
	int rc = read_small(path, buf, sizeof(buf));
	if (rc)
		return rc;
	return parse_count(buf, out);
}

enum mem_os_thp mem_os_thp_mode(void)
{
	char buf[128];
	if (read_small("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof(buf)))
		return MEM_OS_THP_NEVER;
	if (strstr(buf, "[always]"))
		return MEM_OS_THP_ALWAYS;
	if (strstr(buf, "[madvise]"))
		return MEM_OS_THP_MADVISE;
	return MEM_OS_THP_NEVER;
}

size_t mem_os_thp_size(void)
{
	char buf[64];
	uint64_t v;
	if (read_small("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", buf, sizeof(buf)) ||
	    parse_count(buf, &v) || v < 4096 || (v & (v - 1)))
		return (size_t)2 << 20;
	return (size_t)v;
}

/* A VMA header line of smaps: "start-end perms offset dev inode [path]".
 * Field lines ("Size:   4 kB") have a colon before the first space. */
static bool smaps_header(const char *line, uintptr_t *start, uintptr_t *end)
{
	const char *space = strchr(line, ' ');
	const char *colon = strchr(line, ':');
	if (!space || (colon && colon < space))
		return false;
	char *next;
	unsigned long long s = strtoull(line, &next, 16);
	if (*next != '-')
		return false;
	unsigned long long e = strtoull(next + 1, &next, 16);
	if (next != space)
		return false;
	*start = (uintptr_t)s;
	*end = (uintptr_t)e;
	return true;
}

int mem_os_anon_huge_bytes(const void *addr, uint64_t *out)
{
	/* smaps, not smaps_rollup: only this VMA's counters are wanted. The
	 * kernel walks each VMA as its entry is read, so stopping after ours
	 * spares the walk of everything mapped above it. */
	FILE *f = fopen("/proc/self/smaps", "re");
	if (!f)
		return -errno;
	char *line = NULL;
	size_t cap = 0;
	bool inside = false;
	int rc = -ENOENT;
	uintptr_t a = (uintptr_t)addr;
	while (getline(&line, &cap, f) > 0) {
		uintptr_t start, end;
		if (smaps_header(line, &start, &end)) {
			if (inside)
				break; /* our VMA had no AnonHugePages line */
			inside = start <= a && a < end;
			continue;
		}
		unsigned long long kb;
		if (inside && sscanf(line, "AnonHugePages: %llu kB", &kb) == 1) {
			*out = (uint64_t)kb << 10;
			rc = 0;
			break;
		}
	}
	free(line);
	fclose(f);
	return rc;
}

int mem_os_meminfo(const char *field, uint64_t *out)
{
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return -errno;
	char *line = NULL;
	size_t cap = 0;
	size_t flen = strlen(field);
	int rc = -ENOENT;
	while (getline(&line, &cap, f) > 0) {
		unsigned long long kb;
		if (strncmp(line, field, flen) || line[flen] != ':')
			continue;
		if (sscanf(line + flen + 1, " %llu kB", &kb) == 1 && kb <= UINT64_MAX >> 10) {
			*out = (uint64_t)kb << 10;
			rc = 0;
		} else {
			rc = -EINVAL;
		}
		break;
	}
	free(line);
	fclose(f);
	return rc;
}
