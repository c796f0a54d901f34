/* Which pages go first when a store is over its cap (internal): objects
 * grouped by page, pages oldest first, a page's age its newest object's.
 * One planner for the file store's cleaner and gc (backend/file/file_scan.c)
 * and the s3 gc (backend/s3/s3_list.c): all objects of a page go together.
 * Shared by backends and used by no core file, so it lives beside them in
 * store/backend/, not in the core. */
#ifndef HC_SRC_STORE_PAGE_PLAN_H
#define HC_SRC_STORE_PAGE_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct page_group {
	size_t first, count; /* objects [first, first + count) */
	uint64_t bytes;
	int64_t newest_ns;
};

/* A store's objects, those of one page adjacent. */
struct page_objs {
	const void *arg;
	size_t n;
	/* Is object i of the page whose first object is first (< i)? */
	bool (*same_page)(const void *arg, size_t first, size_t i);
	uint64_t (*bytes)(const void *arg, size_t i);
	int64_t (*mtime_ns)(const void *arg, size_t i);
};

/* The pages, oldest first, into *out (free() it), how many into *n.
 * Returns 0 or -ENOMEM. */
int page_plan(const struct page_objs *o, struct page_group **out, size_t *n);
/* How many of the pages g[0, n) (oldest first), deleted, bring total bytes
 * down to at most cap. */
size_t page_plan_cut(const struct page_group *g, size_t n, uint64_t total, uint64_t cap);

#endif
