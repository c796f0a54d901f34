/* A set of 64-bit page keys in LRU order, with the instance that wrote
 * each: the fleet replay's shared L3 in --no-data mode, the routers' view
 * of each instance, and the record of who wrote which L3 page. */
#define _GNU_SOURCE
#include "replay.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX

struct lru_node {
	uint64_t key;
	uint32_t prev, next; /* toward older / newer */
	uint32_t writer;
};

struct lruset {
	uint64_t cap; /* 0: unlimited */
	struct lru_node *nodes;
	size_t n, ncap;
	uint32_t *table; /* node index or NIL; linear probing */
	size_t tmask;
	uint32_t oldest, newest;
};

static size_t slot_of(uint64_t key, size_t mask)
{
	return (size_t)splitmix64(key) & mask;
}

/* The table slot holding key, or the empty slot where it would go. */
static size_t find(const struct lruset *l, uint64_t key)
{
	size_t i = slot_of(key, l->tmask);
	while (l->table[i] != NIL && l->nodes[l->table[i]].key != key)
		i = (i + 1) & l->tmask;
	return i;
}

static int rehash(struct lruset *l, size_t tsize)
{
	uint32_t *t = malloc(tsize * sizeof(*t));
	if (!t)
		return -ENOMEM;
	memset(t, 0xff, tsize * sizeof(*t));
	free(l->table);
	l->table = t;
	l->tmask = tsize - 1;
	for (size_t k = 0; k < l->n; k++)
		l->table[find(l, l->nodes[k].key)] = (uint32_t)k;
	return 0;
}

int lru_create(uint64_t cap, struct lruset **out)
{
	struct lruset *l = calloc(1, sizeof(*l));
	*out = NULL;
	if (!l || cap >= NIL)
		goto nomem;
	l->cap = cap;
	l->ncap = cap && cap < 4096 ? (size_t)cap : 4096;
	l->nodes = malloc(l->ncap * sizeof(*l->nodes));
	l->oldest = l->newest = NIL;
	size_t tsize = 1;
	while (tsize < 2 * l->ncap)
		tsize *= 2;
	if (!l->nodes || rehash(l, tsize))
		goto nomem;
	*out = l;
	return 0;
nomem:
	if (l) {
		free(l->nodes);
		free(l->table);
	}
	free(l);
	return -ENOMEM;
}

void lru_destroy(struct lruset *l)
{
	if (!l)
		return;
	free(l->nodes);
	free(l->table);
	free(l);
}

size_t lru_prefix(const struct lruset *l, const uint64_t *keys, size_t n)
{
	size_t k = 0;
	while (k < n && l->table[find(l, keys[k])] != NIL)
		k++;
	return k;
}

static void unlink_node(struct lruset *l, uint32_t x)
{
	struct lru_node *e = &l->nodes[x];
	if (e->prev != NIL)
		l->nodes[e->prev].next = e->next;
	else
		l->oldest = e->next;
	if (e->next != NIL)
		l->nodes[e->next].prev = e->prev;
	else
		l->newest = e->prev;
}

static void link_newest(struct lruset *l, uint32_t x)
{
	struct lru_node *e = &l->nodes[x];
	e->prev = l->newest;
	e->next = NIL;
	if (l->newest != NIL)
		l->nodes[l->newest].next = x;
	else
		l->oldest = x;
	l->newest = x;
}

int64_t lru_get(struct lruset *l, uint64_t key)
{
	uint32_t x = l->table[find(l, key)];
	if (x == NIL)
		return -1;
	unlink_node(l, x);
	link_newest(l, x);
	return l->nodes[x].writer;
}

/* Remove table slot i, shifting the probe chain after it back (linear
 * probing without tombstones). */
static void table_remove(struct lruset *l, size_t i)
{
	size_t j = i;
	l->table[i] = NIL;
	for (;;) {
		j = (j + 1) & l->tmask;
		if (l->table[j] == NIL)
			return;
		size_t home = slot_of(l->nodes[l->table[j]].key, l->tmask);
		/* Entry j may fill the hole at i unless its home lies in (i, j]. */
		if (((j - home) & l->tmask) >= ((j - i) & l->tmask)) {
			l->table[i] = l->table[j];
			l->table[j] = NIL;
			i = j;
		}
	}
}

int lru_put(struct lruset *l, uint64_t key, uint32_t writer)
{
	size_t i = find(l, key);
	uint32_t x = l->table[i];
	if (x != NIL) {
		unlink_node(l, x);
		link_newest(l, x);
		return 0;
	}
	if (l->cap && l->n == l->cap) {
		/* Full: the oldest node takes the new key. */
		x = l->oldest;
		unlink_node(l, x);
		table_remove(l, find(l, l->nodes[x].key));
		i = find(l, key);
	} else {
		if (l->n == l->ncap) {
			size_t ncap = l->ncap * 2;
			if (l->cap && ncap > l->cap)
				ncap = (size_t)l->cap;
			struct lru_node *p = realloc(l->nodes, ncap * sizeof(*p));
			if (!p)
				return -ENOMEM;
			l->nodes = p;
			l->ncap = ncap;
		}
		if (2 * (l->n + 1) > l->tmask + 1) {
			if (rehash(l, 2 * (l->tmask + 1)))
				return -ENOMEM;
			i = find(l, key);
		}
		x = (uint32_t)l->n++;
	}
	l->nodes[x].key = key;
	l->nodes[x].writer = writer;
	l->table[i] = x;
	link_newest(l, x);
	return 0;
}
