/* Internal interfaces of the mem layer. */
#ifndef HC_SRC_MEM_INTERNAL_H
#define HC_SRC_MEM_INTERNAL_H

#include <stddef.h>

/* Automatic pre-fault gives each thread at least this much. Starting a
 * thread costs tens of microseconds while faulting 1 GiB of base pages
 * takes a tenth of a second or more, so at this size the extra threads
 * cost nothing measurable; below it the whole job is short enough that
 * splitting it saves little, and a pool allocated next to others should not
 * grab every CPU for that. */
#define MEM_PREFAULT_AUTO_BYTES ((size_t)1 << 30)
/* Cap on an explicit prefault_threads: past the CPU count extra threads
 * only queue, and a typo must not spawn thousands of them. */
#define MEM_PREFAULT_MAX_THREADS 256u

/* Threads to pre-fault len bytes with: requested (capped), or for 0 one per
 * usable CPU but no more than one per MEM_PREFAULT_AUTO_BYTES. At least 1. */
unsigned mem_prefault_threads(size_t len, unsigned requested);

/* Populate [addr, addr + len) with up to threads threads, each on one
 * contiguous range whose bounds are multiples of granule. Returns 0 or the
 * first failure of mem_os_populate() (-ENOMEM, -EFAULT, ...).
 * pre: addr and len are multiples of granule; granule a multiple of page;
 * page the mapping's page size. */
int mem_prefault(void *addr, size_t len, size_t page, size_t granule, unsigned threads);

#endif
