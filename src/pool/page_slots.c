/*
 * Token slots to pages: engines (SGLang) name host pages by the token slots
 * they hold, n * page_tokens of them per call. Only a whole page is a page:
 * taking the first slot of each and dividing would accept any run that
 * starts on a boundary, and move a page into slots the caller did not name.
 */
#define _GNU_SOURCE
#include "util/util.h"

#include <hicache/pool.h>

#include <errno.h>

int hc_pages_of_slots(const int64_t *slots, size_t npages, uint32_t page_tokens, uint64_t max_pages,
		      uint64_t *pages)
{
	if (!page_tokens)
		return util_fail(-EINVAL, "pages of slots: page_tokens is 0");
	if (npages && (!slots || !pages))
		return util_fail(-EINVAL, "pages of slots: NULL %s", slots ? "pages" : "slots");
	for (size_t i = 0; i < npages; i++) {
		const int64_t *s = slots + i * page_tokens;
		int64_t first = s[0];
		if (first < 0 || first % page_tokens)
			return util_fail(
				-EINVAL,
				"page %zu: its first slot %lld is not the start of a page of %u slots",
				i, (long long)first, page_tokens);
		uint64_t p = (uint64_t)first / page_tokens;
		if (p >= max_pages)
			return util_fail(-EINVAL,
					 "page %zu: page %llu is outside the pool's %llu pages", i,
					 (unsigned long long)p, (unsigned long long)max_pages);
		for (uint32_t t = 1; t < page_tokens; t++)
			if ((uint64_t)s[t] != (uint64_t)first + t) /* unsigned: no overflow */
				return util_fail(
					-EINVAL,
					"page %zu: slot %u is %lld, not %lld (a page's slots are consecutive)",
					i, t, (long long)s[t], (long long)(first + t));
		pages[i] = p;
	}
	return 0;
}
