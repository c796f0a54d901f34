/* Scanning a file store's directories: shared by the cleaner, gc, ls and
 * fsck (internal). */
#ifndef HC_SRC_STORE_FILE_SCAN_H
#define HC_SRC_STORE_FILE_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct scan_obj {
	char *name;
	uint32_t disk;
	uint32_t bucket;
	uint64_t bytes;
	int64_t mtime_ns;
	bool deleted; /* by file_scan_evict */
};

struct scan_temp {
	char *name;
	uint32_t disk;
	uint32_t bucket;
	int64_t mtime_ns;
	bool orphaned; /* its writer is gone (dead pid, or older than 60 s) */
};

struct file_scan {
	const char *const *dirs;
	size_t ndirs;
	struct scan_obj *objs;
	size_t nobjs, cap_objs;
	struct scan_temp *temps;
	size_t ntemps, cap_temps;
	uint64_t foreign;
	uint64_t object_bytes;
	int64_t oldest_ns, newest_ns;
};

/* Names are "<64 lowercase hex><rest>"; temp files ".tmp.*" and ".probe.*". */
bool file_scan_is_object(const char *name);

int file_scan_dirs(const char *const *dirs, size_t ndirs, struct file_scan *out);
void file_scan_free(struct file_scan *s);
/* Distinct pages (64-hex prefixes). */
uint64_t file_scan_pages(const struct file_scan *s);
/* "<dir>/<bucket>/<name>" into out. */
int file_scan_path(const struct file_scan *s, uint32_t disk, uint32_t bucket, const char *name,
		   char *out, size_t size);
/* Delete the oldest pages, all objects of a page together (the page's age
 * is its newest object's mtime), while the scanned bytes exceed target or,
 * when keep_going is given, while it returns true. */
int file_scan_evict(struct file_scan *s, uint64_t target, bool (*keep_going)(void *), void *arg,
		    uint64_t *pages, uint64_t *bytes);

#endif
