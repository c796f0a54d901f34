/*
 * hicache — host memory.
 *
 * Page-aligned anonymous mappings for host pools: pre-faulted (by several
 * threads at once for large regions), backed by transparent huge pages
 * where the kernel gives them (or by hugetlb pages, or by 4 KiB pages, as
 * asked) and optionally locked. Hooks let an embedding engine pin the
 * memory for its device (e.g. cudaHostRegister) right after it is mapped
 * and unpin it before it is unmapped.
 *
 * Thread-safety: hc_mem_alloc() and hc_mem_free() of different regions may
 * run concurrently; a region's accessors are safe from any thread.
 */
#ifndef HICACHE_MEM_H
#define HICACHE_MEM_H

#include <hicache/common.h>

#ifdef __cplusplus
extern "C" {
#endif

struct hc_config;
struct hc_mem;

#define HC_HUGE_2MB ((size_t)2 << 20)
#define HC_HUGE_1GB ((size_t)1 << 30)

enum hc_huge_mode {
	HC_HUGE_OFF,      /* normal pages */
	HC_HUGE_PREFER,   /* hugetlb, else transparent huge pages, else normal (with a warning) */
	HC_HUGE_REQUIRED, /* hugetlb of huge_page_size or fail */
	/* The default: transparent huge pages where the kernel gives them
	 * (THP "madvise" or "always"), normal pages otherwise, silently; the
	 * hugetlb reservation is not touched. */
	HC_HUGE_THP,
};

/* What a region actually got. */
enum hc_mem_backing {
	HC_MEM_NORMAL,
	HC_MEM_THP,     /* transparent huge pages (at least part of the region) */
	HC_MEM_HUGETLB, /* explicit huge pages of hc_mem_huge_page_size() */
};

typedef int (*hc_mem_hook_fn)(void *addr, size_t len, void *arg);

struct hc_mem_opts {
	size_t struct_size;    /* sizeof(struct hc_mem_opts), set by hc_mem_opts_init() */
	size_t huge_page_size; /* HC_HUGE_2MB or HC_HUGE_1GB; prefer and required only */
	enum hc_huge_mode huge_mode;
	unsigned prefault_threads; /* 0 = automatic (one per CPU, 1 GiB per thread at least) */
	bool prefault;             /* touch every page now (default true) */
	bool lock;                 /* mlock the region (default false) */
	/* Called after the region is mapped and pre-faulted, with the whole
	 * mapping (hc_mem_addr, hc_mem_mapped_len) and hook_arg; non-zero fails
	 * the allocation (the region is unmapped, the value returned). */
	hc_mem_hook_fn on_map;
	/* Called before the region is unmapped, with the same addr and len. */
	hc_mem_hook_fn on_unmap;
	void *hook_arg;
};

/* Fill defaults (transparent huge pages, pre-faulted, not locked, no
 * hooks). size is sizeof(*opts) as the caller knows it. */
HC_API void hc_mem_opts_init(struct hc_mem_opts *opts, size_t size);

/* Set huge_page_size, huge_mode, prefault_threads and lock from the config
 * keys hugepage_size, hugepage_mode, prefault_threads and mlock. opts must
 * come from hc_mem_opts_init(). Returns 0 or -EINVAL (NULL, opts not
 * initialised, a key's value out of range; opts is then unchanged). */
HC_API int hc_mem_opts_from_config(struct hc_mem_opts *opts, const struct hc_config *cfg);

/* Map len bytes (rounded up to the page size actually used). opts may be
 * NULL for defaults. Returns 0, -EINVAL (len 0, overflow, unknown huge page
 * size, bad opts), -ENOMEM (no memory, or HC_HUGE_REQUIRED with too few
 * free huge pages: the message says how many are free), -EPERM (mlock not
 * permitted), or the hook's error. *out is NULL on failure. */
HC_API int hc_mem_alloc(size_t len, const struct hc_mem_opts *opts, struct hc_mem **out);
/* Unmap a region (calling on_unmap first) and free it. Accepts NULL. */
HC_API void hc_mem_free(struct hc_mem *mem);

/* The start of the region (NULL for a NULL mem). */
HC_API void *hc_mem_addr(const struct hc_mem *mem);
/* The length asked for. */
HC_API size_t hc_mem_len(const struct hc_mem *mem);
/* The length mapped (a multiple of the backing page size). */
HC_API size_t hc_mem_mapped_len(const struct hc_mem *mem);
/* What the region actually got (HC_MEM_NORMAL for a NULL mem). */
HC_API enum hc_mem_backing hc_mem_backing(const struct hc_mem *mem);
/* The page size backing the region: 4096, or the huge page size. */
HC_API size_t hc_mem_page_size(const struct hc_mem *mem);
/* Is the region mlocked? */
HC_API bool hc_mem_locked(const struct hc_mem *mem);
/* "normal", "thp" or "hugetlb" ("unknown" for another value). Static. */
HC_API const char *hc_mem_backing_name(enum hc_mem_backing backing);

/* Parse "2MB", "2M", "1GB", "1G" (case-insensitive) or a byte count equal to
 * one of them. Returns 0 or -EINVAL. */
HC_API int hc_mem_parse_huge_size(const char *text, size_t *out);
/* Parse "off", "thp", "prefer", "required". Returns 0 or -EINVAL. */
HC_API int hc_mem_parse_huge_mode(const char *text, enum hc_huge_mode *out);

/* Free huge pages of the given size according to sysfs. Returns 0,
 * -EINVAL (unknown size) or -ENOENT (the kernel has no such pool). */
HC_API int hc_mem_huge_pages_free(size_t huge_page_size, uint64_t *out);

/* MemAvailable from /proc/meminfo, in bytes. Returns 0, -EINVAL (out
 * NULL) or the error of reading /proc/meminfo. */
HC_API int hc_mem_available(uint64_t *out);

#ifdef __cplusplus
}
#endif

#endif /* HICACHE_MEM_H */
