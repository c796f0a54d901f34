/* The S3 backend's offline tools (internal): ls and gc over a bucket and
 * key prefix named by an "s3://bucket/prefix" URL, its ops entries (the
 * _at forms, over the one location store/tools.c hands them), so
 * hc_file_ls() and hc_file_gc() and the CLI take an s3:// URL where they
 * take a directory.
 * The endpoint, region and credentials come from the environment
 * (HICACHE_S3_ENDPOINT, AWS_ACCESS_KEY_ID, ... as docs/CONFIG.md lists). */
#ifndef HC_SRC_STORE_S3_H
#define HC_SRC_STORE_S3_H

#include <stddef.h>
#include <stdint.h>

struct hc_ls_report;

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
