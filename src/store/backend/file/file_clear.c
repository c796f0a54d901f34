/*
 * The file backend's clear: delete the objects whose names match, bucket
 * by bucket.
 */
#define _GNU_SOURCE
#include "io/io_internal.h"
#include "store/backend.h"
#include "store/backend/file/file_scan.h"
#include "store/backend/file/file_internal.h"
#include "store/format.h"
#include "util/util.h"

#include <hicache/config.h>
#include <hicache/key.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Entries a clear found and left: not objects of a store (a symlink, a
 * directory, another kind of file) where buckets or objects belong. The
 * first one is named in the one log line of the clear. */
struct clear_foreign {
	uint64_t n;
	char first[PATH_MAX];
};

static void foreign_note(struct clear_foreign *f, const char *dir, const char *bucket,
			 const char *name)
{
	if (!f->n++)
		snprintf(f->first, sizeof(f->first), "%s/%s%s%s", dir, bucket, name ? "/" : "",
			 name ? name : "");
}

/* Bucket b of base dir i: delete the matching objects. A reader that
 * opened one before keeps reading it whole; a writer's rename after the
 * scan publishes its object whole (temp files, ".tmp.*", are skipped).
 * The bucket is opened as the data path opens objects (beneath the base
 * dir, no symlink followed): a bucket that is a symlink is skipped, never
 * followed, or a clear would delete files outside the store. Inside it,
 * only regular files are deleted: a directory, a symlink or a device
 * under an object's name is skipped (unlinkat would fail on a directory
 * and stop the clear), counted in *foreign. */
static int64_t clear_bucket(struct file_be *fb, size_t i, unsigned b,
			    bool (*match)(const char *name, void *arg), void *arg,
			    struct clear_foreign *foreign)
{
	char name[3];
	snprintf(name, sizeof(name), "%02x", b);
	int fd = io_openat_beneath(fb->dirfds[i], name, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd < 0 && (errno == ELOOP || errno == ENOTDIR || errno == EXDEV)) {
		foreign_note(foreign, fb->dirs[i], name, NULL);
		return 0;
	}
	if (fd < 0 && errno == ENOENT)
		return 0; /* nothing of ours can be there */
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		int rc = -errno;
		if (fd >= 0)
			close(fd);
		return util_fail(rc, "file store: clear: cannot read bucket '%s/%s': %s",
				 fb->dirs[i], name, hc_strerror(rc));
	}
	int64_t n = 0;
	uint64_t bytes = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || !match(de->d_name, arg))
			continue;
		struct stat sb;
		if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW))
			continue; /* gone meanwhile */
		if (!S_ISREG(sb.st_mode)) {
			foreign_note(foreign, fb->dirs[i], name, de->d_name);
			continue;
		}
		if (!unlinkat(dirfd(d), de->d_name, 0)) {
			n++;
			bytes += (uint64_t)sb.st_size;
		} else if (errno != ENOENT) {
			int rc = -errno;
			n = util_fail(rc, "file store: clear: cannot delete '%s/%s/%s': %s",
				      fb->dirs[i], name, de->d_name, hc_strerror(rc));
			break;
		}
	}
	closedir(d);
	/* The cleaner's estimate; its next scan counts again anyway. */
	uint64_t used = atomic_load(&fb->used_bytes);
	while (!atomic_compare_exchange_weak(&fb->used_bytes, &used,
					     used > bytes ? used - bytes : 0))
		;
	return n;
}

int64_t file_remove_matching(void *p, bool (*match)(const char *name, void *arg), void *arg)
{
	struct file_be *fb = p;
	int64_t total = 0;
	struct clear_foreign foreign = {0};
	for (size_t i = 0; i < fb->ndirs && total >= 0; i++)
		for (unsigned b = 0; b < 256; b++) {
			int64_t n = clear_bucket(fb, i, b, match, arg, &foreign);
			if (n < 0) {
				total = n;
				break;
			}
			total += n;
		}
	/* One line per clear, however many: a planted tree is one cause. */
	if (foreign.n)
		log_warn("file store: clear left %llu foreign entr%s (a symlink, directory or "
			 "other non-file where a bucket or an object belongs; never followed), "
			 "first '%s'",
			 (unsigned long long)foreign.n, foreign.n == 1 ? "y" : "ies",
			 foreign.first);
	return total;
}
