/* Host pool sizing: from bytes (hicache_size) or a ratio of the device
 * pool (hicache_ratio), checked against MemAvailable minus a reserve so a
 * pool never pushes the machine into swap or the OOM killer. */
#define _GNU_SOURCE
#include "util/opts.h"
#include "util/util.h"

#include <hicache/config.h>
#include <hicache/mem.h>
#include <hicache/pool.h>

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#define GB 1e9
#define GIB ((uint64_t)1 << 30)

static const struct hc_pool_sizing sizing_defaults = {
	.struct_size = sizeof(sizing_defaults),
	.ratio = 2.0,
	.reserve_bytes = 10 * GIB,
};

#define FITS(size, field)                                                                        \
	(offsetof(struct hc_pool_sizing, field) + sizeof(((struct hc_pool_sizing *)0)->field) <= \
	 (size))

void hc_pool_sizing_init(struct hc_pool_sizing *s, size_t size)
{
	util_opts_init(s, size, &sizing_defaults, sizeof(sizing_defaults));
}

int hc_pool_sizing_from_config(struct hc_pool_sizing *s, const struct hc_config *cfg)
{
	if (!s || !cfg)
		return util_fail(-EINVAL, "hc_pool_sizing_from_config: NULL argument");
	double size_gb, ratio, reserve_gb;
	int rc;
	if ((rc = hc_config_get_number(cfg, "hicache_size", &size_gb)) ||
	    (rc = hc_config_get_number(cfg, "hicache_ratio", &ratio)) ||
	    (rc = hc_config_get_number(cfg, "host_memory_reserve_gb", &reserve_gb)))
		return rc;
	/* The reference reads hicache_size in GB (1e9); the reserve in GiB. */
	/* An older caller's struct has only the fields its struct_size covers. */
	size_t size = s->struct_size;
	if (!FITS(size, struct_size) || size > UTIL_OPTS_SIZE_MAX)
		return util_fail(-EINVAL,
				 "hc_pool_sizing_from_config: struct_size %zu; call "
				 "hc_pool_sizing_init first",
				 size);
	if (FITS(size, bytes))
		s->bytes = (uint64_t)llround(size_gb * GB);
	if (FITS(size, ratio))
		s->ratio = ratio;
	if (FITS(size, reserve_bytes))
		s->reserve_bytes = (uint64_t)llround(reserve_gb * (double)GIB);
	return 0;
}

int hc_pool_size_pages_avail(const struct hc_pool_sizing *user, size_t page_bytes,
			     uint64_t available, uint64_t *pages)
{
	if (!user || !pages)
		return util_fail(-EINVAL, "hc_pool_size_pages: NULL argument");
	struct hc_pool_sizing opts = sizing_defaults;
	const struct hc_pool_sizing *s = &opts;
	int rc = util_opts_load(&opts, sizeof(opts), user, "hc_pool_size_pages: sizing");
	if (rc)
		return rc;
	if (page_bytes == 0)
		return util_fail(-EINVAL, "pool sizing: page_bytes must be > 0");
	uint64_t n;
	if (s->bytes > 0) {
		n = s->bytes / page_bytes;
	} else {
		if (!(s->ratio > 0) || s->device_pages == 0)
			return util_fail(-EINVAL,
					 "pool sizing: neither bytes nor ratio (%g) x "
					 "device_pages (%llu) gives a size",
					 s->ratio, (unsigned long long)s->device_pages);
		double x = floor(s->ratio * (double)s->device_pages);
		if (x >= 18446744073709551616.0)
			return util_fail(-EINVAL, "pool sizing: ratio x device pages overflows");
		n = (uint64_t)x;
	}
	if (n == 0)
		return util_fail(-EINVAL, "pool sizing: the size gives 0 pages of %zu bytes",
				 page_bytes);
	uint64_t want;
	if (!util_mul(n, page_bytes, &want))
		return util_fail(-EINVAL, "pool sizing: %llu pages of %zu bytes overflow",
				 (unsigned long long)n, page_bytes);
	uint64_t usable = available > s->reserve_bytes ? available - s->reserve_bytes : 0;
	if (want > usable)
		return util_fail(-ENOMEM,
				 "host pool of %.2f GB (%llu pages of %zu bytes) does not "
				 "fit: %.2f GB available minus a %.2f GB reserve leaves %.2f GB; "
				 "lower hicache_size or hicache_ratio",
				 (double)want / GB, (unsigned long long)n, page_bytes,
				 (double)available / GB, (double)s->reserve_bytes / GB,
				 (double)usable / GB);
	*pages = n;
	return 0;
}

int hc_pool_size_pages(const struct hc_pool_sizing *s, size_t page_bytes, uint64_t *pages)
{
	uint64_t avail;
	int rc = hc_mem_available(&avail);
	if (rc)
		return rc;
	return hc_pool_size_pages_avail(s, page_bytes, avail, pages);
}
