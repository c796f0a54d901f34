/* Offline tools over a file store's directories: fsck, ls, gc. They need
 * no open store and no geometry: every object describes itself in its
 * trailer (store/format.h). ls and gc also take one "s3://bucket/prefix"
 * URL in place of the directories (store/s3.h). */
#define _GNU_SOURCE
#include "store/file_scan.h"
#include "store/format.h"
#include "store/s3.h"
#include "util/util.h"

#include <hicache/key.h>
#include <hicache/store.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

static int check_args(const char *const *dirs, size_t ndirs, const void *out, const char *what)
{
	if (!dirs || ndirs == 0 || !out)
		return util_fail(-EINVAL, "%s: no directories or NULL output", what);
	for (size_t i = 0; i < ndirs; i++)
		if (!dirs[i] || !*dirs[i])
			return util_fail(-EINVAL, "%s: directory %zu is empty", what, i);
	return 0;
}

/* One s3:// URL alone, or directories only. Returns 1 for a URL, 0 for
 * directories, or -EINVAL. */
static int s3_target(const char *const *dirs, size_t ndirs, const char *what)
{
	bool any = false;
	for (size_t i = 0; i < ndirs; i++)
		any = any || s3_is_url(dirs[i]);
	if (!any)
		return 0;
	if (ndirs != 1)
		return util_fail(-EINVAL, "%s: an s3:// URL must be the only location given", what);
	return 1;
}

/* Is the object at path whole and consistent? Reads it once. */
static bool object_ok(const char *path, const struct scan_obj *o, size_t ndirs)
{
	uint64_t route = hc_key_route_hash(o->name);
	if (hc_key_bucket(route) != o->bucket || hc_key_disk(route, (unsigned)ndirs) != o->disk)
		return false; /* misplaced: no reader would ever find it */
	if (o->bytes < FORMAT_BLOCK || o->bytes % FORMAT_BLOCK)
		return false;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool ok = false;
	uint8_t *buf = malloc(o->bytes);
	if (!buf)
		goto out;
	size_t got = 0;
	while (got < o->bytes) {
		ssize_t n = pread(fd, buf + got, o->bytes - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto out;
		got += (size_t)n;
	}
	struct store_trailer t;
	if (format_trailer_read(buf + o->bytes - FORMAT_BLOCK, &t))
		goto out;
	if (format_object_len(t.payload_len) != o->bytes)
		goto out;
	ok = !t.checksum || util_checksum(buf, t.payload_len) == t.checksum;
out:
	free(buf);
	close(fd);
	return ok;
}

int hc_file_fsck(const char *const *dirs, size_t ndirs, bool repair, struct hc_fsck_report *out)
{
	int rc = check_args(dirs, ndirs, out, "hc_file_fsck");
	if (rc)
		return rc;
	memset(out, 0, sizeof(*out));
	struct file_scan s;
	rc = file_scan_dirs(dirs, ndirs, &s);
	if (rc)
		return rc;
	char path[PATH_MAX];
	for (size_t i = 0; i < s.nobjs; i++) {
		const struct scan_obj *o = &s.objs[i];
		if (file_scan_path(&s, o->disk, o->bucket, o->name, path, sizeof(path)))
			continue;
		if (object_ok(path, o, ndirs)) {
			out->ok++;
			out->bytes += o->bytes;
			continue;
		}
		out->corrupt++;
		log_warn("fsck: corrupt object %s", path);
		if (repair && (unlink(path) == 0 || errno == ENOENT))
			out->removed++;
	}
	for (size_t i = 0; i < s.ntemps; i++) {
		const struct scan_temp *t = &s.temps[i];
		if (!t->orphaned)
			continue;
		out->orphaned_temp++;
		if (repair && !file_scan_path(&s, t->disk, t->bucket, t->name, path, sizeof(path)) &&
		    (unlink(path) == 0 || errno == ENOENT))
			out->removed++;
	}
	out->foreign = s.foreign;
	file_scan_free(&s);
	return 0;
}

int hc_file_ls(const char *const *dirs, size_t ndirs, struct hc_ls_report *out)
{
	int rc = check_args(dirs, ndirs, out, "hc_file_ls");
	if (rc)
		return rc;
	rc = s3_target(dirs, ndirs, "hc_file_ls");
	if (rc)
		return rc < 0 ? rc : s3_tool_ls(dirs[0], out);
	struct file_scan s;
	rc = file_scan_dirs(dirs, ndirs, &s);
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

int hc_file_gc(const char *const *dirs, size_t ndirs, uint64_t capacity_bytes,
	       uint64_t *removed_pages, uint64_t *removed_bytes)
{
	int rc = check_args(dirs, ndirs, dirs, "hc_file_gc");
	if (rc)
		return rc;
	rc = s3_target(dirs, ndirs, "hc_file_gc");
	if (rc)
		return rc < 0 ? rc : s3_tool_gc(dirs[0], capacity_bytes, removed_pages, removed_bytes);
	struct file_scan s;
	rc = file_scan_dirs(dirs, ndirs, &s);
	if (rc)
		return rc;
	rc = file_scan_evict(&s, capacity_bytes, NULL, NULL, removed_pages, removed_bytes);
	file_scan_free(&s);
	return rc;
}
