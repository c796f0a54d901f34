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
	bool orphaned; /* older than the scan's temp age: its writer is gone */
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

/* A temp file older than this is a dead writer's (10 minutes: far above
 * one write, even on a slow network file system). The default of
 * l3_file_temp_max_age_s, and what fsck uses. */
#define FILE_TEMP_AGE_NS (600ll * 1000000000ll)

/* Test hook: when not 0, the nonce of every file store opened after (the
 * per-writer part of temp and probe names), so tests can make two writers
 * clash. */
extern uint64_t file_test_nonce;

/* Names are "<64 lowercase hex><rest>"; temp files ".tmp.*" and ".probe.*". */
bool file_scan_is_object(const char *name);

int file_scan_dirs(const char *const *dirs, size_t ndirs, struct file_scan *out);
/* file_scan_dirs with temp files orphaned once older than temp_age_ns. */
int file_scan_dirs_aged(const char *const *dirs, size_t ndirs, int64_t temp_age_ns,
			struct file_scan *out);
void file_scan_free(struct file_scan *s);
/* Distinct pages (64-hex prefixes). */
uint64_t file_scan_pages(const struct file_scan *s);
/* "<dir>/<bucket>/<name>" into out. */
int file_scan_path(const struct file_scan *s, uint32_t disk, uint32_t bucket, const char *name,
		   char *out, size_t size);
/* An fd of bucket dir <dir>/<bucket> (never through a symlink), or -errno. */
int file_scan_bucket_fd(const struct file_scan *s, uint32_t disk, uint32_t bucket);
/* unlinkat of name in that bucket: 0 or -errno. */
int file_scan_unlink(const struct file_scan *s, uint32_t disk, uint32_t bucket, const char *name);
/* Delete the oldest pages, all objects of a page together (the page's age
 * is its newest object's mtime), while the scanned bytes exceed target.
 * *pages, *bytes (may be NULL): the pages of which this call unlinked an
 * object, and the bytes it unlinked (an object already gone, deleted by a
 * cleaner or gc beside this one, frees its bytes but is not counted). */
int file_scan_evict(struct file_scan *s, uint64_t target, uint64_t *pages, uint64_t *bytes);
/* The same, oldest first, until each file system group g (base dirs
 * grouped by file system: group_of_disk[disk]) has had need[g] bytes of
 * its objects deleted; pages with no object on a group still in need are
 * skipped. need is decremented as objects go. */
int file_scan_evict_needs(struct file_scan *s, const uint32_t *group_of_disk, uint64_t *need,
			  size_t ngroups, uint64_t *pages, uint64_t *bytes);
/* Bytes of the scanned objects (still there) in base dir disk. */
uint64_t file_scan_disk_bytes(const struct file_scan *s, uint32_t disk);
/* Unlink the orphaned temp files of the scan, each only if it is still
 * older than temp_age_ns when unlinked (a name is never reused, but an
 * mtime changes while a writer writes). Returns how many were removed. */
uint64_t file_scan_remove_orphans(const struct file_scan *s, int64_t temp_age_ns);

#endif
