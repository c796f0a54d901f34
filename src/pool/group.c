/* Pool group: named pools with one anchor; owns its pools. Small (a
 * handful of pools), so a growable array and linear lookups. */
#define _GNU_SOURCE
#include "pool/pool_internal.h"
#include "util/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

struct group_entry {
	char name[HC_POOL_NAME_MAX + 1];
	struct hc_pool *pool;
};

struct hc_pool_group {
	struct group_entry *entries;
	size_t count, cap;
	ssize_t anchor; /* index, -1 = none */
};

int hc_pool_group_create(struct hc_pool_group **out)
{
	if (!out)
		return util_fail(-EINVAL, "hc_pool_group_create: out is NULL");
	*out = util_fault_calloc(1, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	(*out)->anchor = -1;
	return 0;
}

void hc_pool_group_destroy(struct hc_pool_group *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->count; i++)
		hc_pool_destroy(g->entries[i].pool);
	free(g->entries);
	free(g);
}

int hc_pool_group_add(struct hc_pool_group *g, const char *name, struct hc_pool *pool, bool anchor)
{
	if (!g || !name || !pool)
		return util_fail(-EINVAL, "hc_pool_group_add: NULL argument");
	if (!hc_key_pool_name_ok(name))
		return util_fail(-EINVAL, "pool group: name '%s' is not [a-z0-9_]{1,%d}", name,
				 HC_POOL_NAME_MAX);
	for (size_t i = 0; i < g->count; i++) {
		if (!strcmp(g->entries[i].name, name))
			return util_fail(-EEXIST, "pool group: name '%s' is taken", name);
		if (g->entries[i].pool == pool)
			return util_fail(-EEXIST,
					 "pool group: pool is already in the group as '%s'",
					 g->entries[i].name);
	}
	if (anchor && pool->kind != HC_POOL_KV && pool->kind != HC_POOL_ANCHOR &&
	    pool->kind != HC_POOL_SEGMENTS)
		return util_fail(-EINVAL,
				 "pool group: anchor '%s' must be a kv or anchor pool (or "
				 "segments), not %s",
				 name, hc_pool_kind_name(pool->kind));
	if (anchor && g->anchor >= 0)
		return util_fail(-EEXIST, "pool group: '%s' is already the anchor",
				 g->entries[g->anchor].name);
	if (g->count == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 4;
		struct group_entry *grown = util_fault_realloc(g->entries, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		g->entries = grown;
		g->cap = cap;
	}
	struct group_entry *e = &g->entries[g->count];
	memset(e, 0, sizeof(*e));
	memcpy(e->name, name, strlen(name));
	e->pool = pool;
	if (anchor)
		g->anchor = (ssize_t)g->count;
	g->count++;
	return 0;
}

struct hc_pool *hc_pool_group_find(const struct hc_pool_group *g, const char *name)
{
	if (!g || !name)
		return NULL;
	for (size_t i = 0; i < g->count; i++)
		if (!strcmp(g->entries[i].name, name))
			return g->entries[i].pool;
	return NULL;
}

struct hc_pool *hc_pool_group_anchor(const struct hc_pool_group *g)
{
	return g && g->anchor >= 0 ? g->entries[g->anchor].pool : NULL;
}

const char *hc_pool_group_anchor_name(const struct hc_pool_group *g)
{
	return g && g->anchor >= 0 ? g->entries[g->anchor].name : NULL;
}

size_t hc_pool_group_count(const struct hc_pool_group *g)
{
	return g ? g->count : 0;
}

struct hc_pool *hc_pool_group_at(const struct hc_pool_group *g, size_t i, const char **name)
{
	if (!g || i >= g->count)
		return NULL;
	if (name)
		*name = g->entries[i].name;
	return g->entries[i].pool;
}
