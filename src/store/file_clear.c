/*
 * The file backend's clear: delete the objects whose names match, bucket
 * by bucket.
 */
#define _GNU_SOURCE
#include "io/io_internal.h"
#include "store/backend.h"
#include "store/file_scan.h"
#include "store/file_internal.h"
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

/* Bucket b of base dir i: delete the matching objects. A reader that
 * opened one before keeps reading it whole; a writer's rename after the
 * scan publishes its object whole (temp files, ".tmp.*", are skipped). */
static int64_t clear_bucket(struct file_be *fb, size_t i, unsigned b,
			    bool (*match)(const char *name, void *arg), void *arg)
{
	char name[3];
	snprintf(name, sizeof(name), "%02x", b);
	int fd = openat(fb->dirfds[i], name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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
		bool sized = !fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW);
		if (!unlinkat(dirfd(d), de->d_name, 0)) {
			n++;
			bytes += sized ? (uint64_t)sb.st_size : 0;
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
	for (size_t i = 0; i < fb->ndirs; i++)
		for (unsigned b = 0; b < 256; b++) {
			int64_t n = clear_bucket(fb, i, b, match, arg);
			if (n < 0)
				return n;
			total += n;
		}
	return total;
}
