/*
 * hc_store_clear: delete every object this store's registered pools name.
 *
 * An object is this store's when its name is "<page><ending>", ending one
 * of the registered pools' suffix + component, and <page> a page key (64
 * lowercase hex digits exactly) or a name (store.h, Keys). So another
 * model's, rank's or layout's objects stay: "<key>_x_m_0_1" is not the
 * object of a store whose ending is "_m_0_1", since "<key>_x" is no page.
 *
 * The backend deletes whole objects while transfers run (remove_matching):
 * a get that loses its object reads a miss, a set racing the clear leaves
 * its object whole or not at all.
 *
 * Caveat: a name may hold '_', so a *named* object of a store whose suffix
 * ends with ours ("p0_x" + "_m_0_1" or "p0" + "_x_m_0_1") is cleared too.
 */
#define _GNU_SOURCE
#include "store/store_types.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENDING_MAX (HC_SUFFIX_MAX + COMPONENT_MAX)

struct endings {
	size_t n;
	char e[STORE_MAX_POOLS * STORE_MAX_OBJS][ENDING_MAX];
	size_t len[STORE_MAX_POOLS * STORE_MAX_OBJS];
};

/* Is s[0, len) a page: a key's hex, or a name? */
static bool is_page(const char *s, size_t len)
{
	size_t hex = 0;
	while (hex < len && hex < HC_KEY_HEX_LEN && strchr("0123456789abcdef", s[hex]))
		hex++;
	if (hex == HC_KEY_HEX_LEN)
		return len == HC_KEY_HEX_LEN; /* a key, or another store's ending */
	if (!len || len > HC_STORE_NAME_MAX || s[0] == '.')
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

static bool ours(const char *name, void *arg)
{
	const struct endings *e = arg;
	size_t nl = strlen(name);
	for (size_t i = 0; i < e->n; i++)
		if (nl > e->len[i] && !memcmp(name + nl - e->len[i], e->e[i], e->len[i]) &&
		    is_page(name, nl - e->len[i]))
			return true;
	return false;
}

int64_t hc_store_clear(struct hc_store *st)
{
	if (!st)
		return util_fail(-EINVAL, "hc_store_clear: store is NULL");
	if (!st->ops->remove_matching)
		return util_fail(-EOPNOTSUPP, "hc_store_clear: the %s backend cannot clear",
				 st->ops->name);
	struct endings *e = util_fault_calloc(1, sizeof(*e));
	if (!e)
		return util_fail(-ENOMEM, "hc_store_clear: no memory");
	pthread_mutex_lock(&st->reg_lock);
	for (size_t p = 0; p < st->nctx; p++) {
		const struct store_ctx *c = st->ctx[p];
		for (unsigned o = 0; o < c->nobj; o++) {
			snprintf(e->e[e->n], ENDING_MAX, "%s%s", c->suffix, c->obj[o].component);
			e->len[e->n] = strlen(e->e[e->n]);
			e->n++;
		}
	}
	pthread_mutex_unlock(&st->reg_lock);
	int64_t n = e->n ? st->ops->remove_matching(st->be, ours, e) : 0;
	free(e);
	if (n >= 0)
		log_info("store: clear deleted %lld objects", (long long)n);
	return n;
}
