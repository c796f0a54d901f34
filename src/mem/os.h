/*
 * The mem layer's OS boundary: every mmap/madvise/mlock call and every read
 * of /proc or /sys made for host memory lives in os.c. Nothing above it
 * touches the platform. Functions return 0 or a negative errno and never
 * record a failure message: the caller knows what the call was for and
 * words the message.
 */
#ifndef HC_SRC_MEM_OS_H
#define HC_SRC_MEM_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum mem_os_thp {
	MEM_OS_THP_NEVER,
	MEM_OS_THP_MADVISE,
	MEM_OS_THP_ALWAYS,
};

/* The base page size (4096 on x86-64). */
size_t mem_os_page_size(void);

/* The CPUs this thread may run on (at least 1). */
unsigned mem_os_cpus(void);

/* Map len bytes of private anonymous memory at an address aligned to align.
 * pre: len > 0, a multiple of the base page size; align a power of two, at
 * least the base page size; len + align does not overflow. */
int mem_os_map(size_t len, size_t align, void **out);

/* Map len bytes of private anonymous hugetlb memory of huge-byte pages,
 * reserving the pages now. -ENOMEM: too few free pages; -EINVAL: the kernel
 * has no pool of that size.
 * pre: huge is 2 MiB or 1 GiB; len > 0, a multiple of huge. */
int mem_os_map_hugetlb(size_t len, size_t huge, void **out);

/* pre: addr and len are exactly what a mem_os_map* call returned/took. */
void mem_os_unmap(void *addr, size_t len);

/* Ask for transparent huge pages on the range (MADV_HUGEPAGE).
 * pre: addr, len page-aligned. */
int mem_os_advise_huge(void *addr, size_t len);

/* Make every page of the range resident and writable (MADV_POPULATE_WRITE,
 * or one write per page on kernels before 5.14). -ENOMEM when memory runs
 * out, -EFAULT when a hugetlb fault finds no page.
 * pre: addr, len multiples of page; page the mapping's page size; on the
 * touch fallback a hugetlb range must be reserved (mem_os_map_hugetlb
 * does), or a missing page would raise SIGBUS. */
int mem_os_populate(void *addr, size_t len, size_t page);

/* mlock the range. -EPERM or -ENOMEM as mlock(2) gives them. */
int mem_os_lock(void *addr, size_t len);

/* The soft RLIMIT_MEMLOCK in bytes (UINT64_MAX for unlimited). */
uint64_t mem_os_memlock_limit(void);

/* free_hugepages of the pool of huge-byte pages. -ENOENT: no such pool.
 * pre: huge is a power of two, at least 1 KiB. */
int mem_os_huge_free(size_t huge, uint64_t *out);

/* The kernel's transparent huge page mode; NEVER when it cannot be read. */
enum mem_os_thp mem_os_thp_mode(void);

/* The PMD size transparent huge pages use (2 MiB on x86-64). */
size_t mem_os_thp_size(void);

/* AnonHugePages of the VMA that contains addr, in bytes. -ENOENT: no VMA
 * contains addr. */
int mem_os_anon_huge_bytes(const void *addr, uint64_t *out);

/* A field of /proc/meminfo ("MemAvailable"), in bytes. -ENOENT: no such
 * field. */
int mem_os_meminfo(const char *field, uint64_t *out);

#endif
