/* The file backend's offline tools over a store's directories: fsck, ls,
 * gc (its ops entries; store/tools.c checks the arguments). They need no
 * open store and no geometry: every object describes itself in its
 * trailer (store/format.h). */
#define _GNU_SOURCE
#include "store/backend/file/file_internal.h"
#include "store/backend/file/file_scan.h"
#include "store/format.h"
#include "util/util.h"

#include <hicache/key.h>
#include <hicache/store.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* Where an object's name routes it: its bucket in its base dir. */
static bool placed_right(const struct scan_obj *o, size_t ndirs)
{
	uint64_t route = hc_key_route_hash(o->name);
	return hc_key_bucket(route) == o->bucket && hc_key_disk(route, (unsigned)ndirs) == o->disk;
}

enum verdict { V_OK, V_CORRUPT, V_GONE, V_ERROR };

/* Remove the file under name in bucket fd bfd only if it is still the one
 * found bad (dev/ino of *bad): moved aside first (atomic), compared, and
 * put back when it is another file (a good copy published since). */
static bool remove_if_same(int bfd, const char *name, const struct stat *bad)
{
	char aside[96];
	snprintf(aside, sizeof(aside), ".tmp.fsck.%016llx.%u", (unsigned long long)bad->st_ino,
		 (unsigned)getpid());
	if (renameat2(bfd, name, bfd, aside, RENAME_NOREPLACE))
		return false; /* gone already, or cannot: nothing removed */
	struct stat now;
	bool same = !fstatat(bfd, aside, &now, AT_SYMLINK_NOFOLLOW) && now.st_dev == bad->st_dev &&
		    now.st_ino == bad->st_ino;
	if (same)
		return unlinkat(bfd, aside, 0) == 0;
	/* Not the one found bad: back under its name (a newer one there
	 * makes it a duplicate, which goes). */
	if (renameat2(bfd, aside, bfd, name, RENAME_NOREPLACE))
		unlinkat(bfd, aside, 0);
	return false;
}

/* One object: the shared validator (format_check_fd) on the file under its
 * name, opened without following a symlink. */
static enum verdict check_object(int bfd, const struct scan_obj *o, struct stat *st, int *err)
{
	int fd = openat(bfd, o->name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	*err = fd < 0 ? -errno : 0;
	if (fd < 0)
		return *err == -ENOENT || *err == -ELOOP ? V_GONE : V_ERROR;
	enum verdict v = V_CORRUPT;
	struct store_trailer t;
	if (fstat(fd, st)) {
		*err = -errno;
		v = V_ERROR;
	} else if (S_ISREG(st->st_mode)) {
		int rc = format_check_fd(fd, (uint64_t)st->st_size, o->name, &t);
		v = rc == 0 ? V_OK : rc == -EBADMSG || rc == -ENODATA ? V_CORRUPT : V_ERROR;
		*err = rc;
	}
	close(fd);
	if (v != V_CORRUPT)
		return v;
	/* Deleted or replaced while it was read: the file checked is gone. */
	struct stat now;
	if (fstatat(bfd, o->name, &now, AT_SYMLINK_NOFOLLOW) || now.st_ino != st->st_ino ||
	    now.st_dev != st->st_dev)
		return V_GONE;
	return V_CORRUPT;
}

int file_tool_fsck(const char *const *dirs, size_t ndirs, bool repair, int64_t temp_age_ns,
		   struct hc_fsck_report *out)
{
	memset(out, 0, sizeof(*out));
	if (!temp_age_ns)
		temp_age_ns = FILE_TEMP_AGE_NS;
	struct file_scan s;
	int rc = file_scan_dirs_aged(dirs, ndirs, temp_age_ns, &s);
	if (rc)
		return rc;
	char path[PATH_MAX];
	int bfd = -1;
	uint32_t bdisk = UINT32_MAX, bbucket = UINT32_MAX;
	for (size_t i = 0; i < s.nobjs && !rc; i++) {
		const struct scan_obj *o = &s.objs[i];
		if (file_scan_path(&s, o->disk, o->bucket, o->name, path, sizeof(path)))
			continue;
		if (!placed_right(o, ndirs)) {
			out->misplaced++;
			log_warn("fsck: misplaced object %s (another base dir or bucket than its "
				 "name routes to: are the dirs given in the store's order and "
				 "number?); left alone",
				 path);
			continue;
		}
		if (o->disk != bdisk || o->bucket != bbucket) {
			if (bfd >= 0)
				close(bfd);
			bfd = file_scan_bucket_fd(&s, o->disk, o->bucket);
			bdisk = o->disk;
			bbucket = o->bucket;
		}
		if (bfd < 0) {
			out->gone++; /* the bucket went (a symlink now, or removed) */
			continue;
		}
		struct stat st;
		int err = 0;
		switch (check_object(bfd, o, &st, &err)) {
		case V_OK:
			out->ok++;
			out->bytes += (uint64_t)st.st_size;
			break;
		case V_GONE:
			out->gone++;
			break;
		case V_ERROR:
			rc = util_fail(err ? err : -EIO, "fsck: cannot check %s: %s", path,
				       hc_strerror(err ? err : -EIO));
			break;
		case V_CORRUPT:
			out->corrupt++;
			log_warn("fsck: corrupt object %s", path);
			if (repair && remove_if_same(bfd, o->name, &st))
				out->removed++;
			break;
		}
	}
	if (bfd >= 0)
		close(bfd);
	/* Temp files by age alone, as the cleaner judges them (its writer may
	 * be on another host); each re-checked just before it is unlinked. */
	for (size_t i = 0; i < s.ntemps && !rc; i++)
		out->orphaned_temp += s.temps[i].orphaned;
	if (repair && !rc)
		out->removed += file_scan_remove_orphans(&s, temp_age_ns);
	out->foreign = s.foreign;
	file_scan_free(&s);
	return rc;
}

int file_tool_ls(const char *const *dirs, size_t ndirs, struct hc_ls_report *out)
{
	struct file_scan s;
	int rc = file_scan_dirs(dirs, ndirs, &s);
	if (rc)
		return rc;
	*out = (struct hc_ls_report){
		.pages = file_scan_pages(&s),
		.objects = s.nobjs,
		.bytes = s.object_bytes,
		.oldest_ns = s.oldest_ns,
		.newest_ns = s.newest_ns,
	};
	file_scan_free(&s);
	return 0;
}

int file_tool_gc(const char *const *dirs, size_t ndirs, uint64_t capacity_bytes,
		 uint64_t *removed_pages, uint64_t *removed_bytes)
{
	struct file_scan s;
	int rc = file_scan_dirs(dirs, ndirs, &s);
	if (rc)
		return rc;
	rc = file_scan_evict(&s, capacity_bytes, removed_pages, removed_bytes);
	file_scan_free(&s);
	return rc;
}
