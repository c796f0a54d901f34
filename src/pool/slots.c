/*
 * Slot allocator: a stack of free page indices plus one bit per page that
 * says whether it is handed out. Alloc pops, free validates every index
 * against the bits before pushing any, so a bad free changes nothing.
 * One mutex: alloc/free are a few instructions per page, far below the
 * cost of the copies they gate, so finer locking would buy nothing.
 */
#define _GNU_SOURCE
#include "util/util.h"

#include <hicache/pool.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct hc_slots {
	pthread_mutex_t lock;
	uint64_t count;
	uint64_t top; /* free entries in stack[0..top) */
	uint64_t *stack;
	uint64_t *used; /* bitmap */
};

static bool bit_get(const uint64_t *map, uint64_t i)
{
	return map[i >> 6] >> (i & 63) & 1;
}

static void bit_flip(uint64_t *map, uint64_t i)
{
	map[i >> 6] ^= (uint64_t)1 << (i & 63);
}

int hc_slots_create(uint64_t count, struct hc_slots **out)
{
	if (!out)
		return util_fail(-EINVAL, "hc_slots_create: out is NULL");
	*out = NULL;
	if (count == 0)
		return util_fail(-EINVAL, "slot allocator: count must be > 0");
	if (count > SIZE_MAX / sizeof(uint64_t) / 2)
		return util_fail(-EINVAL, "slot allocator: %llu slots is too many",
				 (unsigned long long)count);
	struct hc_slots *s = util_fault_calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->stack = util_fault_malloc(count * sizeof(*s->stack));
	s->used = util_fault_calloc((count + 63) / 64, sizeof(*s->used));
	if (!s->stack || !s->used) {
		free(s->stack);
		free(s->used);
		free(s);
		return util_fail(-ENOMEM, "slot allocator: no memory for %llu slots",
				 (unsigned long long)count);
	}
	pthread_mutex_init(&s->lock, NULL);
	s->count = count;
	/* Lowest index on top, so a fresh pool hands out 0, 1, 2, ... */
	for (uint64_t i = 0; i < count; i++)
		s->stack[i] = count - 1 - i;
	s->top = count;
	*out = s;
	return 0;
}

void hc_slots_destroy(struct hc_slots *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s->stack);
	free(s->used);
	free(s);
}

int hc_slots_alloc(struct hc_slots *s, size_t n, uint64_t *out)
{
	if (!s || (!out && n))
		return util_fail(-EINVAL, "hc_slots_alloc: NULL argument");
	pthread_mutex_lock(&s->lock);
	if (n > s->top) {
		uint64_t avail = s->top;
		pthread_mutex_unlock(&s->lock);
		/* Expected when a tier is full: callers evict and retry. */
		return fail_limited(HC_LOG_INFO, -ENOSPC,
				    "slot allocator: %zu slots asked, %llu free", n,
				    (unsigned long long)avail);
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t page = s->stack[--s->top];
		bit_flip(s->used, page);
		out[i] = page;
	}
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int hc_slots_free(struct hc_slots *s, size_t n, const uint64_t *pages)
{
	if (!s || (!pages && n))
		return util_fail(-EINVAL, "hc_slots_free: NULL argument");
	pthread_mutex_lock(&s->lock);
	/* Clear bits as we check, so a repeat within the list is caught too;
	 * on failure set back the ones already cleared. */
	size_t i;
	int rc = 0;
	for (i = 0; i < n; i++) {
		if (pages[i] >= s->count || !bit_get(s->used, pages[i])) {
			rc = -EINVAL;
			break;
		}
		bit_flip(s->used, pages[i]);
	}
	if (rc) {
		uint64_t bad = pages[i];
		bool out_of_range = bad >= s->count;
		while (i-- > 0)
			bit_flip(s->used, pages[i]);
		pthread_mutex_unlock(&s->lock);
		return util_fail(rc, "slot allocator: slot %llu %s; nothing freed",
				 (unsigned long long)bad,
				 out_of_range ? "is out of range" : "is not allocated");
	}
	for (i = 0; i < n; i++)
		s->stack[s->top++] = pages[i];
	pthread_mutex_unlock(&s->lock);
	return 0;
}

uint64_t hc_slots_available(const struct hc_slots *s)
{
	if (!s)
		return 0;
	pthread_mutex_lock((pthread_mutex_t *)&s->lock);
	uint64_t top = s->top;
	pthread_mutex_unlock((pthread_mutex_t *)&s->lock);
	return top;
}

uint64_t hc_slots_count(const struct hc_slots *s)
{
	return s ? s->count : 0;
}

bool hc_slots_is_allocated(const struct hc_slots *s, uint64_t page)
{
	if (!s || page >= s->count)
		return false;
	pthread_mutex_lock((pthread_mutex_t *)&s->lock);
	bool used = bit_get(s->used, page);
	pthread_mutex_unlock((pthread_mutex_t *)&s->lock);
	return used;
}
