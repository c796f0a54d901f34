/*
 * Work areas: the scratch of one chunk on its way (names, iovecs, trailer
 * blocks, bounce slots), cached by the store across calls, and the bounce
 * slots reserved at registration.
 */
#define _GNU_SOURCE
#include "store/store_work.h"
#include "util/util.h"

#include <hicache/mem.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* A chunk's bounce room: */
#define CHUNK_BOUNCE_BYTES (64u << 20)
#define CHUNK_MIN_OBJS 32                    /* the default io_depth's worth ... */
#define CHUNK_BOUNCE_MAX ((size_t)512 << 20) /* ... unless pages are huge */

void work_free(struct work *w)
{
	if (!w)
		return;
	free(w->trailers);
	free(w->discard);
	hc_mem_free(w->bounce_mem);
	free(w);
}

struct work *work_get(struct hc_store *st)
{
	pthread_mutex_lock(&st->work_lock);
	struct work *w = st->free_work;
	if (w)
		st->free_work = w->next;
	pthread_mutex_unlock(&st->work_lock);
	if (w)
		return w;
	w = util_fault_calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	if (posix_memalign((void **)&w->trailers, FORMAT_BLOCK_MAX,
			   (size_t)CHUNK_OBJS * FORMAT_BLOCK_MAX) ||
	    posix_memalign((void **)&w->discard, FORMAT_BLOCK_MAX, FORMAT_BLOCK_MAX)) {
		work_free(w);
		return NULL;
	}
	return w;
}

void work_put(struct hc_store *st, struct work *w)
{
	pthread_mutex_lock(&st->work_lock);
	w->next = st->free_work;
	st->free_work = w;
	pthread_mutex_unlock(&st->work_lock);
}

int work_bounce(struct hc_store *st, struct work *w, size_t bytes)
{
	if (bytes <= w->bounce_cap)
		return 0;
	atomic_fetch_sub_explicit(&st->stats.v[STAT(bounce_bytes)], w->bounce_cap,
				  memory_order_relaxed);
	hc_mem_free(w->bounce_mem);
	w->bounce_mem = NULL;
	w->bounce = NULL;
	w->bounce_cap = 0;
	/* On transparent huge pages, as the pools are by default: O_DIRECT
	 * from 4 KiB pages pays per page (docs/PERFORMANCE-HISTORY.md).
	 * Pre-faulted here, which registration does for the first call
	 * (bounce_reserve). */
	int rc = hc_mem_alloc(bytes, &st->bounce_mem, &w->bounce_mem);
	if (rc) {
		char why[256]; /* hc_last_error() is the buffer util_fail writes */
		snprintf(why, sizeof(why), "%s", hc_last_error());
		return util_fail(rc, "store: %zu bytes of bounce slots: %s", bytes, why);
	}
	w->bounce = hc_mem_addr(w->bounce_mem);
	w->bounce_cap = bytes;
	atomic_fetch_add_explicit(&st->stats.v[STAT(bounce_bytes)], bytes, memory_order_relaxed);
	return 0;
}

/* Give the store's first works the bounce slots of a full chunk of c's
 * pages each, so that no transfer faults them in (a THP fault may compact
 * memory, which the first transfer of a run would pay for). */
int bounce_reserve(struct hc_store *st, struct store_ctx *c)
{
	struct entry e[CHUNK_OBJS];
	for (size_t i = 0; i < CHUNK_OBJS; i++)
		e[i] = (struct entry){.ctx = c};
	size_t bytes;
	store_chunk_end(e, 0, CHUNK_OBJS, &bytes);
	struct work *w[BOUNCE_RESERVED_WORKS];
	int rc = 0, n = 0;
	while (n < BOUNCE_RESERVED_WORKS && !rc) {
		if (!(w[n] = work_get(st)))
			rc = util_fail(-ENOMEM, "store: no memory for a transfer");
		else
			rc = work_bounce(st, w[n++], bytes);
	}
	while (n-- > 0)
		work_put(st, w[n]);
	return rc;
}

/* How many entries from `from` fit one chunk (objects and bounce bytes). */
size_t store_chunk_end(const struct entry *e, size_t from, size_t n, size_t *bounce_bytes)
{
	size_t objs = 0, bytes = 0, i = from;
	for (; i < n; i++) {
		size_t o = e[i].ctx->nobj, b = e[i].ctx->slot_bytes;
		/* Never cut a chunk below CHUNK_MIN_OBJS objects for want of bounce
		 * room: that would split one io_depth batch into two submissions
		 * (2 MiB pages: 31 + 1) with a full wait between them. */
		bool room = bytes + b <= CHUNK_BOUNCE_BYTES ||
			    (objs < CHUNK_MIN_OBJS && bytes + b <= CHUNK_BOUNCE_MAX);
		if (i > from && (objs + o > CHUNK_OBJS || !room))
			break;
		objs += o;
		bytes += b;
	}
	*bounce_bytes = bytes;
	return i;
}
