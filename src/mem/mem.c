/*
 * Host memory regions (include/hicache/mem.h).
 *
 * hc_mem_alloc() runs these steps; a failing step undoes the earlier ones
 * (unmap, free) and nothing after it runs:
 *
 *   validate opts -> map -> pre-fault -> mlock -> find backing -> on_map
 *
 * Mapping by huge_mode:
 *   off       base pages, page-aligned.
 *   thp       (the default) base pages aligned to the THP size with
 *             MADV_HUGEPAGE: the kernel backs every whole aligned 2 MiB of
 *             the region with a transparent huge page at pre-fault. The
 *             length is not rounded up, so a tail shorter than a huge page
 *             stays on base pages and nothing is allocated beyond len. The
 *             hugetlb reservation is left alone: it may belong to others.
 *   required  MAP_HUGETLB of huge_page_size; hugetlb reserves the pages at
 *             mmap time, so too few free pages fail there with ENOMEM,
 *             never later as SIGBUS.
 *   prefer    as required; if that mapping fails, one warning and a normal
 *             mapping aligned to, and a multiple of, the THP size with
 *             MADV_HUGEPAGE, so transparent huge pages can back all of it.
 *
 * mlock comes before on_map so that once the hook has run nothing can fail:
 * the hook's work (pinning for a device) never needs undoing here.
 *
 * Caveats:
 *  - THP backing is read from smaps after the pre-fault; a region that is
 *    neither pre-faulted nor locked has nothing resident yet and reports
 *    normal even if THP backs it later.
 *  - On kernels before 5.14 pre-faulting falls back to one write per page,
 *    where running out of memory meets the OOM killer, not an error code.
 *  - A prefer-mode mapping whose hugetlb mmap succeeds is not retried with
 *    THP if a huge page then goes missing at fault time; it fails.
 */
#define _GNU_SOURCE
#include "mem/mem_internal.h"
#include "mem/os.h"
#include "util/opts.h"
#include "util/util.h"

#include <hicache/config.h>
#include <hicache/mem.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(struct hc_mem_opts) == 56,
	       "struct hc_mem_opts is ABI: new fields go at the end");
#endif

#define OPT_END(field) \
	(offsetof(struct hc_mem_opts, field) + sizeof(((struct hc_mem_opts *)0)->field))
#define OPT_FITS(size, field) (OPT_END(field) <= (size))

struct hc_mem {
	void *addr;
	size_t len;
	size_t mapped_len;
	size_t page_size;
	enum hc_mem_backing backing;
	bool locked;
	hc_mem_hook_fn on_unmap;
	void *hook_arg;
};

static const char *huge_name(size_t huge)
{
	return huge == HC_HUGE_1GB ? "1GB" : "2MB";
}

static bool huge_known(size_t huge)
{
	return huge == HC_HUGE_2MB || huge == HC_HUGE_1GB;
}

static bool round_size(size_t len, size_t align, size_t *out)
{
	uint64_t r;
	if (!util_round_up(len, align, &r) || r > SIZE_MAX)
		return false;
	*out = (size_t)r;
	return true;
}

void hc_mem_opts_init(struct hc_mem_opts *opts, size_t size)
{
	static const struct hc_mem_opts d = {
		.struct_size = sizeof(d),
		.huge_page_size = HC_HUGE_2MB,
		.huge_mode = HC_HUGE_THP,
		.prefault_threads = 0,
		.prefault = true,
		.lock = false,
	};
	util_opts_init(opts, size, &d, sizeof(d));
}

/* The caller's opts over the defaults, as far as its struct_size reaches,
 * checked. */
static int opts_load(const struct hc_mem_opts *user, struct hc_mem_opts *o)
{
	hc_mem_opts_init(o, sizeof(*o));
	if (!user)
		return 0;
	int rc = util_opts_load(o, sizeof(*o), user, "hc_mem_alloc: opts");
	if (rc)
		return rc;
	if (o->huge_mode != HC_HUGE_OFF && o->huge_mode != HC_HUGE_THP &&
	    o->huge_mode != HC_HUGE_PREFER && o->huge_mode != HC_HUGE_REQUIRED)
		return util_fail(-EINVAL,
				 "hc_mem_alloc: opts->huge_mode %d is not off, thp, prefer "
				 "or required",
				 (int)o->huge_mode);
	if ((o->huge_mode == HC_HUGE_PREFER || o->huge_mode == HC_HUGE_REQUIRED) &&
	    !huge_known(o->huge_page_size))
		return util_fail(-EINVAL,
				 "hc_mem_alloc: unknown huge page size %zu bytes "
				 "(2MB or 1GB)",
				 o->huge_page_size);
	return 0;
}

/* Map a region of base pages aligned to align, its length rounded up to
 * round. */
static int map_normal(struct hc_mem *m, size_t align, size_t round, bool advise_huge)
{
	size_t len;
	if (!round_size(m->len, round, &len) || len > SIZE_MAX - align)
		return util_fail(-EINVAL,
				 "hc_mem_alloc: len %zu overflows when rounded up to "
				 "%zu-byte pages",
				 m->len, round);
	int rc = mem_os_map(len, align, &m->addr);
	if (rc)
		return util_fail(rc, "hc_mem_alloc: cannot map %zu bytes: %s", len,
				 hc_strerror(rc));
	m->mapped_len = len;
	m->page_size = mem_os_page_size();
	m->backing = HC_MEM_NORMAL;
	/* Without MADV_HUGEPAGE the region may still get THP when the kernel
	 * mode is "always"; a failure (kernel without THP) just means normal
	 * pages. */
	if (advise_huge)
		mem_os_advise_huge(m->addr, len);
	return 0;
}

/* Map according to the huge page mode. *granule: the unit the pre-fault
 * may split the region on; *thp_possible: whether to look for THP later. */
static int map_region(struct hc_mem *m, const struct hc_mem_opts *o, size_t *granule,
		      bool *thp_possible)
{
	size_t page = mem_os_page_size();
	enum mem_os_thp thp_mode = mem_os_thp_mode();
	if (o->huge_mode == HC_HUGE_OFF ||
	    (o->huge_mode == HC_HUGE_THP && thp_mode == MEM_OS_THP_NEVER)) {
		*granule = page;
		*thp_possible = thp_mode == MEM_OS_THP_ALWAYS;
		return map_normal(m, page, page, false);
	}
	if (o->huge_mode == HC_HUGE_THP) {
		size_t thp = mem_os_thp_size();
		*granule = thp;
		*thp_possible = true;
		return map_normal(m, thp, page, true);
	}

	size_t huge = o->huge_page_size;
	size_t len;
	if (!round_size(m->len, huge, &len))
		return util_fail(-EINVAL,
				 "hc_mem_alloc: len %zu overflows when rounded up to %s "
				 "huge pages",
				 m->len, huge_name(huge));
	int rc = mem_os_map_hugetlb(len, huge, &m->addr);
	if (rc == 0) {
		m->mapped_len = len;
		m->page_size = huge;
		m->backing = HC_MEM_HUGETLB;
		*granule = huge;
		*thp_possible = false;
		return 0;
	}

	/* ENOMEM: too few free pages; EINVAL: no pool of that size at all. */
	size_t needed = len / huge;
	uint64_t nfree = 0;
	bool pool = mem_os_huge_free(huge, &nfree) == 0;
	if (o->huge_mode == HC_HUGE_REQUIRED) {
		if (rc != -ENOMEM && rc != -EINVAL)
			return util_fail(rc,
					 "hugepage_mode=required: cannot map %zu bytes of %s "
					 "huge pages: %s",
					 len, huge_name(huge), hc_strerror(rc));
		if (!pool)
			return util_fail(-ENOMEM,
					 "hugepage_mode=required: the kernel has no %s huge "
					 "page pool (0 free, %zu needed for %zu bytes)",
					 huge_name(huge), needed, m->len);
		return util_fail(-ENOMEM,
				 "hugepage_mode=required: too few free %s huge pages: "
				 "%" PRIu64 " free, %zu needed for %zu bytes (raise "
				 "/sys/kernel/mm/hugepages/hugepages-%zukB/nr_hugepages)",
				 huge_name(huge), nfree, needed, m->len, huge >> 10);
	}

	char why[128];
	if (!pool)
		snprintf(why, sizeof(why), "the kernel has no %s huge page pool", huge_name(huge));
	else if (rc == -ENOMEM)
		snprintf(why, sizeof(why),
			 "too few free %s huge pages: %" PRIu64 " free, %zu "
			 "needed",
			 huge_name(huge), nfree, needed);
	else
		snprintf(why, sizeof(why), "%s huge pages: %s", huge_name(huge), hc_strerror(rc));
	log_warn("hugepage_mode=prefer: %s for %zu bytes; using normal pages, with transparent "
		 "huge pages where the kernel gives them",
		 why, m->len);
	/* THP come in PMD size only: a 1GB request falls back to 2 MiB THP, and
	 * rounding up to 1 GiB would pre-fault memory nobody asked for. */
	size_t thp = mem_os_thp_size();
	if (thp > huge)
		thp = huge;
	*granule = thp;
	*thp_possible = thp_mode != MEM_OS_THP_NEVER;
	return map_normal(m, thp, thp, true);
}

static int lock_region(struct hc_mem *m)
{
	/* hugetlb pages are never swapped out, and the kernel does not lock
	 * hugetlb VMAs; mlock would only charge RLIMIT_MEMLOCK for nothing. */
	if (m->backing == HC_MEM_HUGETLB) {
		m->locked = true;
		return 0;
	}
	int rc = mem_os_lock(m->addr, m->mapped_len);
	if (rc == 0) {
		m->locked = true;
		return 0;
	}
	uint64_t limit = mem_os_memlock_limit();
	char text[48];
	if (limit == UINT64_MAX)
		snprintf(text, sizeof(text), "unlimited");
	else
		snprintf(text, sizeof(text), "%" PRIu64 " bytes", limit);
	return util_fail(rc == -EPERM ? -EPERM : -ENOMEM,
			 "mlock of %zu bytes failed: %s; RLIMIT_MEMLOCK is %s (raise it, e.g. "
			 "ulimit -l, or grant CAP_IPC_LOCK)",
			 m->mapped_len, hc_strerror(rc), text);
}

int hc_mem_alloc(size_t len, const struct hc_mem_opts *opts, struct hc_mem **out)
{
	if (!out)
		return util_fail(-EINVAL, "hc_mem_alloc: out is NULL");
	*out = NULL;
	struct hc_mem_opts o;
	int rc = opts_load(opts, &o);
	if (rc)
		return rc;
	if (len == 0)
		return util_fail(-EINVAL, "hc_mem_alloc: len is 0");

	struct hc_mem *m = util_fault_calloc(1, sizeof(*m));
	if (!m)
		return util_fail(-ENOMEM, "hc_mem_alloc: out of memory for the region handle");
	m->len = len;
	size_t granule = 0;
	bool thp_possible = false;
	rc = map_region(m, &o, &granule, &thp_possible);
	if (rc)
		goto err;

	if (o.prefault) {
		unsigned threads = mem_prefault_threads(m->mapped_len, o.prefault_threads);
		rc = mem_prefault(m->addr, m->mapped_len, m->page_size, granule, threads);
		if (rc) {
			/* EFAULT: a hugetlb fault found no page (cpuset or mempolicy
			 * limits beyond the reservation): out of memory all the same. */
			int ret = rc == -EFAULT ? -ENOMEM : rc;
			const char *pages = m->backing == HC_MEM_HUGETLB ? huge_name(m->page_size)
									 : "base";
			rc = util_fail(ret,
				       "hc_mem_alloc: pre-faulting %zu bytes (%s pages) "
				       "failed: %s",
				       m->mapped_len, pages, hc_strerror(rc));
			goto err;
		}
	}
	if (o.lock) {
		rc = lock_region(m);
		if (rc)
			goto err;
	}
	/* Nothing is resident without a pre-fault or lock: nothing to see. */
	if (thp_possible && (o.prefault || o.lock)) {
		uint64_t bytes;
		if (mem_os_anon_huge_bytes(m->addr, &bytes) == 0 && bytes > 0)
			m->backing = HC_MEM_THP;
	}
	if (o.on_map) {
		rc = o.on_map(m->addr, m->mapped_len, o.hook_arg);
		if (rc) {
			util_fail(rc, "hc_mem_alloc: the on_map hook failed: %s", hc_strerror(rc));
			goto err;
		}
	}
	m->on_unmap = o.on_unmap;
	m->hook_arg = o.hook_arg;
	*out = m;
	return 0;

err:
	if (m->addr)
		mem_os_unmap(m->addr, m->mapped_len);
	free(m);
	return rc;
}

void hc_mem_free(struct hc_mem *mem)
{
	if (!mem)
		return;
	/* The hook's result cannot change anything: the memory goes anyway. */
	if (mem->on_unmap)
		mem->on_unmap(mem->addr, mem->mapped_len, mem->hook_arg);
	mem_os_unmap(mem->addr, mem->mapped_len);
	free(mem);
}

void *hc_mem_addr(const struct hc_mem *mem)
{
	return mem ? mem->addr : NULL;
}

size_t hc_mem_len(const struct hc_mem *mem)
{
	return mem ? mem->len : 0;
}

size_t hc_mem_mapped_len(const struct hc_mem *mem)
{
	return mem ? mem->mapped_len : 0;
}

enum hc_mem_backing hc_mem_backing(const struct hc_mem *mem)
{
	return mem ? mem->backing : HC_MEM_NORMAL;
}

size_t hc_mem_page_size(const struct hc_mem *mem)
{
	return mem ? mem->page_size : 0;
}

bool hc_mem_locked(const struct hc_mem *mem)
{
	return mem && mem->locked;
}

const char *hc_mem_backing_name(enum hc_mem_backing backing)
{
	switch (backing) {
	case HC_MEM_NORMAL:
		return "normal";
	case HC_MEM_THP:
		return "thp";
	case HC_MEM_HUGETLB:
		return "hugetlb";
	}
	return "unknown";
}

int hc_mem_parse_huge_size(const char *text, size_t *out)
{
	static const struct {
		const char *text;
		size_t size;
	} names[] = {
		{"2MB", HC_HUGE_2MB},
		{"2M", HC_HUGE_2MB},
		{"1GB", HC_HUGE_1GB},
		{"1G", HC_HUGE_1GB},
	};
	if (!text || !out)
		return util_fail(-EINVAL, "hc_mem_parse_huge_size: %s is NULL",
				 text ? "out" : "text");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcasecmp(text, names[i].text)) {
			*out = names[i].size;
			return 0;
		}
	}
	/* A byte count: digits only, so no sign, space or suffix slips in. */
	size_t n = strspn(text, "0123456789");
	if (n > 0 && n < 21 && !text[n]) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(text, &end, 10);
		if (!errno && !*end && huge_known((size_t)v) && v <= SIZE_MAX) {
			*out = (size_t)v;
			return 0;
		}
	}
	return util_fail(-EINVAL, "unknown huge page size \"%s\" (2MB or 1GB)", text);
}

int hc_mem_parse_huge_mode(const char *text, enum hc_huge_mode *out)
{
	static const char *const names[] = {
		[HC_HUGE_OFF] = "off",
		[HC_HUGE_PREFER] = "prefer",
		[HC_HUGE_REQUIRED] = "required",
		[HC_HUGE_THP] = "thp",
	};
	if (!text || !out)
		return util_fail(-EINVAL, "hc_mem_parse_huge_mode: %s is NULL",
				 text ? "out" : "text");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcasecmp(text, names[i])) {
			*out = (enum hc_huge_mode)i;
			return 0;
		}
	}
	return util_fail(-EINVAL, "unknown huge page mode \"%s\" (off, thp, prefer or required)",
			 text);
}

int hc_mem_opts_from_config(struct hc_mem_opts *opts, const struct hc_config *cfg)
{
	if (!opts || !cfg)
		return util_fail(-EINVAL, "hc_mem_opts_from_config: %s is NULL",
				 opts ? "cfg" : "opts");
	size_t size = opts->struct_size;
	if (!OPT_FITS(size, struct_size) || size > UTIL_OPTS_SIZE_MAX)
		return util_fail(-EINVAL,
				 "hc_mem_opts_from_config: opts->struct_size is %zu; "
				 "initialise opts with hc_mem_opts_init() first",
				 size);

	/* Read and check everything before writing anything, so a failure
	 * leaves opts as it was. */
	const char *size_text, *mode_text;
	size_t huge;
	enum hc_huge_mode mode;
	int64_t threads;
	bool lock;
	int rc;
	unsigned mark = util_fail_mark(); /* the getter's own words are the precise ones */
	if ((rc = hc_config_get_string(cfg, "hugepage_size", &size_text)))
		return util_fail_ctx(mark, rc, "config key hugepage_size: %s", hc_strerror(rc));
	if (hc_mem_parse_huge_size(size_text, &huge))
		return util_fail(-EINVAL, "config key hugepage_size: \"%s\" is not 2MB or 1GB",
				 size_text);
	if ((rc = hc_config_get_string(cfg, "hugepage_mode", &mode_text)))
		return util_fail_ctx(mark, rc, "config key hugepage_mode: %s", hc_strerror(rc));
	if (hc_mem_parse_huge_mode(mode_text, &mode))
		return util_fail(-EINVAL,
				 "config key hugepage_mode: \"%s\" is not off, thp, "
				 "prefer or required",
				 mode_text);
	if ((rc = hc_config_get_int(cfg, "prefault_threads", &threads)))
		return util_fail_ctx(mark, rc, "config key prefault_threads: %s", hc_strerror(rc));
	if (threads < 0 || threads > UINT_MAX)
		return util_fail(-EINVAL,
				 "config key prefault_threads: %" PRId64 " is out of range",
				 threads);
	if ((rc = hc_config_get_bool(cfg, "mlock", &lock)))
		return util_fail_ctx(mark, rc, "config key mlock: %s", hc_strerror(rc));

	if (OPT_FITS(size, huge_page_size))
		opts->huge_page_size = huge;
	if (OPT_FITS(size, huge_mode))
		opts->huge_mode = mode;
	if (OPT_FITS(size, prefault_threads))
		opts->prefault_threads = (unsigned)threads;
	if (OPT_FITS(size, lock))
		opts->lock = lock;
	return 0;
}

int hc_mem_huge_pages_free(size_t huge_page_size, uint64_t *out)
{
	if (!out)
		return util_fail(-EINVAL, "hc_mem_huge_pages_free: out is NULL");
	if (!huge_known(huge_page_size))
		return util_fail(-EINVAL,
				 "hc_mem_huge_pages_free: unknown huge page size %zu bytes "
				 "(2MB or 1GB)",
				 huge_page_size);
	int rc = mem_os_huge_free(huge_page_size, out);
	if (rc == -ENOENT)
		return util_fail(rc,
				 "the kernel has no %s huge page pool "
				 "(/sys/kernel/mm/hugepages/hugepages-%zukB)",
				 huge_name(huge_page_size), huge_page_size >> 10);
	if (rc)
		return util_fail(rc, "cannot read the free %s huge page count: %s",
				 huge_name(huge_page_size), hc_strerror(rc));
	return 0;
}

int hc_mem_available(uint64_t *out)
{
	if (!out)
		return util_fail(-EINVAL, "hc_mem_available: out is NULL");
	int rc = mem_os_meminfo("MemAvailable", out);
	if (rc)
		return util_fail(rc, "cannot read MemAvailable from /proc/meminfo: %s",
				 hc_strerror(rc));
	return 0;
}
