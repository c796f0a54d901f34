/* The oldest-pages-first planner (store/backend/page_plan.h). */
#include "store/backend/page_plan.h"

#include <errno.h>
#include <stdlib.h>

static int by_age(const void *a, const void *b)
{
	const struct page_group *x = a, *y = b;
	return (x->newest_ns > y->newest_ns) - (x->newest_ns < y->newest_ns);
}

int page_plan(const struct page_objs *o, struct page_group **out, size_t *n)
{
	size_t npages = 0;
	for (size_t i = 0, first = 0; i < o->n; i++) {
		if (i == 0 || !o->same_page(o->arg, first, i)) {
			npages++;
			first = i;
		}
	}
	struct page_group *g = calloc(npages ? npages : 1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < o->n; i++) {
		if (i == 0 || !o->same_page(o->arg, g[k - 1].first, i))
			g[k++] = (struct page_group){.first = i};
		struct page_group *cur = &g[k - 1];
		cur->count++;
		cur->bytes += o->bytes(o->arg, i);
		int64_t mtime = o->mtime_ns(o->arg, i);
		if (mtime > cur->newest_ns)
			cur->newest_ns = mtime;
	}
	qsort(g, k, sizeof(*g), by_age);
	*out = g;
	*n = k;
	return 0;
}

size_t page_plan_cut(const struct page_group *g, size_t n, uint64_t total, uint64_t cap)
{
	size_t k = 0;
	for (; k < n && total > cap; k++)
		total -= g[k].bytes;
	return k;
}
