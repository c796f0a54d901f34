/* The S3 backend's listings (s3_list.c): ListObjectsV2 parsing, and what
 * acts on a listing: ls and gc over an "s3://bucket/prefix" URL, clear's
 * remove_matching. Above s3.h; only s3_ops.c (the ops table) is above it.
 * The endpoint, region and credentials of the tools come from the
 * environment (HICACHE_S3_ENDPOINT, AWS_ACCESS_KEY_ID, ... as
 * docs/CONFIG.md lists). */
#ifndef HC_SRC_STORE_BACKEND_S3_LIST_H
#define HC_SRC_STORE_BACKEND_S3_LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hc_ls_report;

struct s3_listed {
	char *name;      /* below the prefix; may hold "sub/" parts */
	size_t page_len; /* name[0, page_len) names the page: sub parts + 64 hex */
	uint64_t bytes;
	int64_t mtime_ns;
};

struct s3_listing {
	struct s3_listed *objs;
	size_t n, cap;
	uint64_t bytes;
	int64_t oldest_ns, newest_ns;
	bool any_name;    /* every object, not only page objects (clear) */
	uint64_t refused; /* keys outside the prefix or with dot segments */
};

/* Parse one ListObjectsV2 page of the listing of prefix into l (page
 * objects, or every object with l->any_name; others count in *foreign;
 * keys outside the prefix or with "." / ".." segments are never taken and
 * count in l->refused); *token gets the continuation (or NULL). Returns 0
 * or -errno (l keeps what it took: listing_free it). */
int s3_parse_list(const char *prefix, const char *xml, size_t len, struct s3_listing *l,
		  char **token, uint64_t *foreign);
void s3_listing_free(struct s3_listing *l);
/* "2026-11-30T05:34:34.388Z" -> ns since the epoch; 0 if unreadable or
 * outside what int64 nanoseconds hold. */
int64_t s3_parse_time(const char *s);
int64_t s3_remove_matching(void *p, bool (*match)(const char *name, void *arg), void *arg);

int s3_tool_ls(const char *url, struct hc_ls_report *out);
/* Delete the oldest pages (all objects of a page together; a page's age is
 * its newest object's) until the objects take at most capacity_bytes. */
int s3_tool_gc(const char *url, uint64_t capacity_bytes, uint64_t *removed_pages,
	       uint64_t *removed_bytes);

/* The ops entries: locs is one URL (n == 1). */
int s3_tool_ls_at(const char *const *locs, size_t n, struct hc_ls_report *out);
int s3_tool_gc_at(const char *const *locs, size_t n, uint64_t capacity_bytes,
		  uint64_t *removed_pages, uint64_t *removed_bytes);

#endif
