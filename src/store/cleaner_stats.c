/* hc_store_cleaner_stats: the backend's cleaner counters, sized as the
 * caller was built. */
#include "store/store_types.h"
#include "util/util.h"

#include <hicache/store.h>

#include <errno.h>
#include <string.h>

int hc_store_cleaner_stats(const struct hc_store *st, struct hc_store_cleaner_stats *out,
			   size_t size)
{
	if (!st || !out)
		return util_fail(-EINVAL, "hc_store_cleaner_stats: NULL argument");
	struct hc_store_cleaner_stats s;
	memset(&s, 0, sizeof(s));
	if (st->ops->cleaner_stats)
		st->ops->cleaner_stats(st->be, &s);
	memset(out, 0, size);
	memcpy(out, &s, size < sizeof(s) ? size : sizeof(s));
	return 0;
}
