/* The backend table: every backend's ops, found by name (hc_store_open) or
 * by location (the offline tools), so neither the core nor the tools name
 * a backend. */
#include "store/backend.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The first is the default: a store opened with no backend named, and the
 * backend of locations no other backend's url_scheme claims (directories). */
static const struct store_backend_ops *const backends[] = {
	&store_file_ops,
	&store_mem_ops,
	&store_s3_ops,
};
#define NBACKENDS (sizeof(backends) / sizeof(backends[0]))

int store_backend_by_name(const char *name, const struct store_backend_ops **out)
{
	if (!name) {
		*out = backends[0];
		return 0;
	}
	for (size_t i = 0; i < NBACKENDS; i++) {
		if (!strcmp(backends[i]->name, name)) {
			*out = backends[i];
			return 0;
		}
	}
	/* "file, mem or s3": the names, from the table. */
	char known[128] = "";
	size_t len = 0;
	for (size_t i = 0; i < NBACKENDS && len < sizeof(known); i++) {
		const char *sep = i == 0 ? "" : i + 1 == NBACKENDS ? " or " : ", ";
		int n = snprintf(known + len, sizeof(known) - len, "%s%s", sep, backends[i]->name);
		len += n > 0 ? (size_t)n : 0;
	}
	return util_fail(-EINVAL, "store: unknown backend '%s' (%s)", name, known);
}

/* The backend whose url_scheme starts loc, or NULL. */
static const struct store_backend_ops *by_scheme(const char *loc)
{
	for (size_t i = 0; i < NBACKENDS; i++) {
		const char *scheme = backends[i]->url_scheme;
		if (scheme && !strncmp(loc, scheme, strlen(scheme)))
			return backends[i];
	}
	return NULL;
}

int store_backend_by_location(const char *const *locs, size_t n, const char *what,
			      const struct store_backend_ops **out)
{
	for (size_t i = 0; i < n; i++) {
		const struct store_backend_ops *ops = by_scheme(locs[i]);
		if (!ops)
			continue;
		if (n != 1)
			return util_fail(-EINVAL, "%s: an %s URL must be the only location given",
					 what, ops->url_scheme);
		*out = ops;
		return 0;
	}
	*out = backends[0];
	return 0;
}
