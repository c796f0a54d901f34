/*
 * Parallel pre-fault. Faulting a page costs mostly the zeroing of it, so a
 * large region fills faster when several CPUs zero at once. The region is
 * cut into one contiguous range per worker, on granule boundaries so no
 * huge page is shared by two workers:
 *
 *   addr                                                   addr + len
 *   |--- range 0 (caller) ---|--- range 1 ---| ... |--- range n-1 ---|
 *
 * The calling thread takes range 0 and n - 1 helpers take the rest; each
 * range is one mem_os_populate() call, so the kernel sees n long calls
 * rather than many small ones.
 */
#define _GNU_SOURCE
#include "mem/mem_internal.h"
#include "mem/os.h"
#include "util/thread.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct prefault_range {
	char *addr;
	size_t len;
	size_t page;
	int rc;
	pthread_t thread;
	bool started;
};

static void *prefault_worker(void *arg)
{
	struct prefault_range *r = arg;
	r->rc = mem_os_populate(r->addr, r->len, r->page);
	return NULL;
}

unsigned mem_prefault_threads(size_t len, unsigned requested)
{
	if (requested)
		return requested > MEM_PREFAULT_MAX_THREADS ? MEM_PREFAULT_MAX_THREADS : requested;
	size_t by_size = len / MEM_PREFAULT_AUTO_BYTES;
	unsigned cpus = mem_os_cpus();
	unsigned n = by_size < cpus ? (unsigned)by_size : cpus;
	if (n > MEM_PREFAULT_MAX_THREADS)
		n = MEM_PREFAULT_MAX_THREADS;
	return n ? n : 1;
}

int mem_prefault(void *addr, size_t len, size_t page, size_t granule, unsigned threads)
{
	size_t units = len / granule;
	size_t n = threads ? threads : 1;
	if (n > units)
		n = units;
	if (n <= 1)
		return mem_os_populate(addr, len, page);

	struct prefault_range *r = calloc(n, sizeof(*r));
	if (!r)
		return mem_os_populate(addr, len, page);
	size_t base = units / n, extra = units % n;
	char *p = addr;
	for (size_t i = 0; i < n; i++) {
		size_t u = base + (i < extra);
		r[i] = (struct prefault_range){.addr = p, .len = u * granule, .page = page};
		p += r[i].len;
	}
	/* The last range also takes a tail shorter than a granule. */
	r[n - 1].len += len - (size_t)(p - (char *)addr);

	/* Helpers start with every signal blocked (util/thread.h). */
	for (size_t i = 1; i < n; i++)
		r[i].started = !util_thread_start(&r[i].thread, prefault_worker, &r[i]);

	prefault_worker(&r[0]);
	int rc = r[0].rc;
	for (size_t i = 1; i < n; i++) {
		/* A helper that could not start leaves its range to us. */
		if (r[i].started)
			pthread_join(r[i].thread, NULL);
		else
			prefault_worker(&r[i]);
		if (!rc)
			rc = r[i].rc;
	}
	free(r);
	return rc;
}
