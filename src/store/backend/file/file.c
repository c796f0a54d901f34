/*
 * The file backend: page objects as files under base dirs.
 *
 *   <dir>/<bucket>/<physical name>        bucket = two hex digits of XXH3(name)
 *   <dir>/<bucket>/.tmp.<16 hex route>.<16 hex nonce>.<seq>   while being written
 *
 * The base dir of an object is (XXH3(name) >> 16) % ndirs. All 256 buckets
 * are created at open, so O_CREAT never meets a missing parent. Objects are
 * published by rename with RENAME_NOREPLACE: a reader sees a whole object or
 * nothing, and an existing object is never rewritten. The trailer (checked
 * by the store core) turns what a crash may leave into a miss.
 *
 * Direct I/O: the alignment comes from statx(STATX_DIOALIGN) of a probe
 * file (4096 when the kernel does not say); at open each base dir gets one
 * aligned O_DIRECT write, and hc_store_register_pool() repeats the probe
 * from the pool's own memory. Any failure switches the backend to buffered
 * I/O with a warning rather than failing every page later.
 *
 * Temp and probe names carry a random 64-bit nonce drawn at every open and
 * a sequence: pids repeat across hosts and containers sharing one dir, a
 * nonce does not. Should a name be taken all the same (the O_EXCL open
 * fails, -EBUSY), the object is written again under a fresh nonce; the
 * file under the taken name is never touched, being another writer's.
 *
 * Trust: whoever can write a base dir or bucket can plant objects (the
 * trailer's checksum is an integrity check, not an authentication), so
 * both must be owned by this user and not writable by others (nor by the
 * group, unless l3_file_shared_group says the group is trusted). No
 * symlink inside a store is followed: buckets must be real dirs, and the
 * io engines resolve "<bucket>/<name>" below the base dir's fd with
 * RESOLVE_NO_SYMLINKS.
 */
#define _GNU_SOURCE
#include "io/io_internal.h"
#include "store/backend.h"
#include "store/backend/file/file_scan.h"
#include "store/backend/file/file_internal.h"
#include "store/format.h"
#include "util/thread.h"
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

uint64_t file_test_nonce;

static void file_close(void *p)
{
	struct file_be *fb = p;
	if (!fb)
		return;
	if (fb->cleaner_started) {
		pthread_mutex_lock(&fb->lock);
		fb->stop = true;
		pthread_cond_signal(&fb->wake);
		pthread_mutex_unlock(&fb->lock);
		pthread_join(fb->cleaner, NULL);
	}
	file_lease_close(&fb->lease);
	io_engine_destroy(fb->io);
	for (size_t i = 0; i < fb->ndirs; i++) {
		if (fb->dirfds && fb->dirfds[i] >= 0)
			close(fb->dirfds[i]);
		if (fb->dirs)
			free(fb->dirs[i]);
	}
	free(fb->dirs);
	free(fb->dirfds);
	pthread_mutex_destroy(&fb->lock);
	pthread_cond_destroy(&fb->wake);
	free(fb);
}

/* A random 64-bit value (a temp name's nonce). */
uint64_t file_random_nonce(void)
{
	uint64_t v = 0;
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v) && v)
		return v;
	/* No entropy yet (early boot): time, pid and an address, mixed. */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	v = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 12) ^
	    (uint64_t)(uintptr_t)&v;
	v ^= v >> 33;
	v *= 0xff51afd7ed558ccdull;
	v ^= v >> 33;
	return v ? v : 1;
}

static int make_dir(const char *path, mode_t mode)
{
	if (mkdir(path, mode) == 0 || errno == EEXIST)
		return 0;
	return -errno;
}

/* May a dir with these attributes hold this user's objects? */
static int check_trusted(const struct file_be *fb, const struct stat *st, const char *what,
			 const char *path, const char *name)
{
	uid_t me = geteuid();
	if (st->st_uid != me)
		return util_fail(-EPERM,
				 "file store: %s '%s%s%s' is owned by uid %u, not by this "
				 "user (uid %u): its owner could replace objects. Use a dir of "
				 "your own (mkdir -m 700) or chown it",
				 what, path, name ? "/" : "", name ? name : "",
				 (unsigned)st->st_uid, (unsigned)me);
	mode_t bad = fb->shared_group ? S_IWOTH : (S_IWGRP | S_IWOTH);
	if (st->st_mode & bad)
		return util_fail(-EPERM,
				 "file store: %s '%s%s%s' is writable by %s (mode %04o): "
				 "they could plant forged objects. chmod %s it%s",
				 what, path, name ? "/" : "", name ? name : "",
				 st->st_mode & S_IWOTH ? "others" : "its group",
				 (unsigned)(st->st_mode & 07777), fb->shared_group ? "o-w" : "go-w",
				 fb->shared_group ? ""
						  : ", or set l3_file_shared_group: true "
						    "when everyone in its group is trusted");
	return 0;
}

/* Create/open one base dir and its 256 buckets. */
static int open_dir(struct file_be *fb, size_t i, const char *path)
{
	mode_t dmode = fb->shared_group ? 0770 : 0700;
	int rc = make_dir(path, dmode);
	if (rc)
		return util_fail(rc, "file store: cannot create base dir '%s': %s", path,
				 hc_strerror(rc));
	char *real = realpath(path, NULL);
	if (!real)
		return util_fail(-errno, "file store: base dir '%s': %s", path,
				 hc_strerror(-errno));
	for (size_t j = 0; j < i; j++) {
		if (!strcmp(fb->dirs[j], real)) {
			rc = util_fail(-EINVAL,
				       "file store: base dir '%s' is given twice (both are "
				       "'%s')",
				       path, real);
			free(real);
			return rc;
		}
	}
	fb->dirs[i] = real;
	fb->dirfds[i] = open(real, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fb->dirfds[i] < 0)
		return util_fail(-errno, "file store: cannot open base dir '%s': %s", real,
				 hc_strerror(-errno));
	struct stat st;
	if (fstat(fb->dirfds[i], &st))
		return util_fail(-errno, "file store: base dir '%s': %s", real,
				 hc_strerror(-errno));
	if ((rc = check_trusted(fb, &st, "base dir", real, NULL)))
		return rc;
	for (unsigned b = 0; b < 256; b++) {
		char name[3];
		snprintf(name, sizeof(name), "%02x", b);
		if (mkdirat(fb->dirfds[i], name, dmode) && errno != EEXIST)
			return util_fail(-errno, "file store: cannot create bucket '%s/%s': %s",
					 real, name, hc_strerror(-errno));
		int bfd = openat(fb->dirfds[i], name,
				 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (bfd < 0) {
			rc = -errno;
			struct stat ls;
			if (!fstatat(fb->dirfds[i], name, &ls, AT_SYMLINK_NOFOLLOW) &&
			    S_ISLNK(ls.st_mode))
				rc = -ELOOP; /* O_DIRECTORY says ENOTDIR for a link */
			return util_fail(rc == -ELOOP ? -ENOTDIR : rc,
					 "file store: bucket '%s/%s' is %s", real, name,
					 rc == -ELOOP ? "a symlink (never followed in a store): "
							"remove it"
					 : rc == -ENOTDIR ? "not a directory"
							  : hc_strerror(rc));
		}
		rc = fstat(bfd, &st) ? -errno : check_trusted(fb, &st, "bucket", real, name);
		close(bfd);
		if (rc)
			return rc;
	}
	return 0;
}

/* Write one aligned block from buf with O_DIRECT into a probe file of base
 * dir i, and read the file system's direct-I/O alignment from it. */
static int probe_direct(struct file_be *fb, size_t i, const void *buf, size_t len,
			size_t *align_out)
{
	char tmp[TMP_NAME_MAX], final[TMP_NAME_MAX];
	int rc = -EBUSY;
	/* Another writer's probe under the same name (-EBUSY: its temp name,
	 * -EEXIST: its final name) says nothing about O_DIRECT: a fresh name. */
	for (int t = 0; t <= TEMP_RETRIES && (rc == -EBUSY || rc == -EEXIST); t++) {
		uint64_t seq = atomic_fetch_add(&fb->seq, 1);
		unsigned long long nonce = t ? file_random_nonce() : fb->nonce;
		snprintf(tmp, sizeof(tmp), "00/.tmp.probe.%016llx.%llu", nonce,
			 (unsigned long long)seq);
		snprintf(final, sizeof(final), "00/.probe.%016llx.%llu", nonce,
			 (unsigned long long)seq);
		struct iovec iov = {(void *)buf, len};
		struct io_write_req req = {
			.dirfd = fb->dirfds[i],
			.tmp_name = tmp,
			.final_name = final,
			.iov = &iov,
			.iovcnt = 1,
			.len = len,
			.direct = true,
			.noreplace = true,
		};
		rc = io_write_batch(fb->io, &req, 1);
		if (!rc)
			rc = req.result;
	}
	if (rc)
		return rc;
	size_t align = FORMAT_BLOCK_MAX;
	struct statx stx;
	if (statx(fb->dirfds[i], final, 0, STATX_DIOALIGN, &stx) == 0 &&
	    (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_mem_align) {
		align = stx.stx_dio_mem_align > stx.stx_dio_offset_align ? stx.stx_dio_mem_align
									 : stx.stx_dio_offset_align;
	}
	unlinkat(fb->dirfds[i], final, 0);
	*align_out = align;
	return 0;
}

/* The direct-I/O block statx reports for a regular file, or 0. */
static size_t dio_block_of(int dirfd, const char *path, int flags)
{
	struct statx stx;
	if (statx(dirfd, path, flags | AT_SYMLINK_NOFOLLOW, STATX_DIOALIGN, &stx) ||
	    !(stx.stx_mask & STATX_DIOALIGN) || !S_ISREG(stx.stx_mode))
		return 0;
	return stx.stx_dio_offset_align;
}

/* The block of the first regular file in bucket b (a read-only store's
 * objects), or 0. */
static size_t any_file_block(int base, unsigned b)
{
	char bucket[3];
	snprintf(bucket, sizeof(bucket), "%02x", b);
	int fd = openat(base, bucket, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	size_t block = 0;
	for (struct dirent *de; !block && (de = readdir(d));)
		if (de->d_type == DT_REG || de->d_type == DT_UNKNOWN)
			block = dio_block_of(dirfd(d), de->d_name, 0);
	closedir(d);
	return block;
}

/* The block direct I/O needs on base dir i's file system, whether or not
 * this instance uses direct I/O: objects have the same size for every
 * instance on it (exists compares sizes), a read-only one included.
 * statx reports it for a regular file only: the cleaners' lease file when
 * there is one, else a probe file, else (read-only) any file in a bucket.
 * A file system that does not say gets
 * FORMAT_BLOCK_MAX, right for any block size up to it. */
static size_t fs_block(struct file_be *fb, size_t i)
{
	size_t block = dio_block_of(fb->dirfds[i], FILE_LEASE_NAME, 0);
	if (!block) {
		char probe[TMP_NAME_MAX];
		snprintf(probe, sizeof(probe), "00/.probe.block.%016llx.%llu",
			 (unsigned long long)fb->nonce,
			 (unsigned long long)atomic_fetch_add(&fb->seq, 1));
		int fd = openat(fb->dirfds[i], probe,
				O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd >= 0) {
			block = dio_block_of(fd, "", AT_EMPTY_PATH);
			close(fd);
			unlinkat(fb->dirfds[i], probe, 0);
		}
	}
	for (unsigned b = 0; !block && b < 256; b++)
		block = any_file_block(fb->dirfds[i], b);
	if (block && block < FORMAT_BLOCK_MIN)
		block = FORMAT_BLOCK_MIN;
	return format_block_valid(block) ? block : FORMAT_BLOCK_MAX;
}

static void fall_back_to_buffered(struct file_be *fb, const char *why, int rc)
{
	if (atomic_exchange(&fb->direct, false))
		log_warn("file store: O_DIRECT does not work (%s: %s); using buffered I/O", why,
			 hc_strerror(rc));
	atomic_store(&fb->align, 1);
}

static int file_open(const struct hc_config *cfg, void **out)
{
	const char *const *dirs;
	size_t ndirs;
	bool direct;
	const char *engine;
	int64_t depth, threads;
	double cap_gb, temp_age_s;
	int rc;
	if ((rc = hc_config_get_list(cfg, "dirs", &dirs, &ndirs)) ||
	    (rc = hc_config_get_bool(cfg, "use_direct_io", &direct)) ||
	    (rc = hc_config_get_string(cfg, "io_engine", &engine)) ||
	    (rc = hc_config_get_int(cfg, "io_depth", &depth)) ||
	    (rc = hc_config_get_int(cfg, "io_threads", &threads)) ||
	    (rc = hc_config_get_number(cfg, "capacity_gb", &cap_gb)))
		return rc;
	if (ndirs == 0)
		return util_fail(-EINVAL, "file store: no directory; set config 'dirs' or "
					  "HICACHE_STORAGE_DIR");

	struct file_be *fb = util_fault_calloc(1, sizeof(*fb));
	if (!fb)
		return -ENOMEM;
	pthread_mutex_init(&fb->lock, NULL);
	pthread_cond_init(&fb->wake, NULL);
	fb->nonce = file_test_nonce ? file_test_nonce : file_random_nonce();
	fb->dirs = util_fault_calloc(ndirs, sizeof(*fb->dirs));
	fb->dirfds = util_fault_malloc(ndirs * sizeof(*fb->dirfds));
	if (!fb->dirs || !fb->dirfds) {
		rc = -ENOMEM;
		goto fail;
	}
	fb->ndirs = ndirs;
	for (size_t i = 0; i < ndirs; i++)
		fb->dirfds[i] = -1;
	if ((rc = hc_config_get_bool(cfg, "l3_file_shared_group", &fb->shared_group)) ||
	    (rc = hc_config_get_number(cfg, "l3_cleaner_high_watermark", &fb->high_pct)) ||
	    (rc = hc_config_get_number(cfg, "l3_cleaner_low_watermark", &fb->low_pct)) ||
	    (rc = hc_config_get_number(cfg, "l3_cleaner_interval_s", &fb->interval_s)) ||
	    (rc = hc_config_get_number(cfg, "l3_file_temp_max_age_s", &temp_age_s)))
		goto fail;
	fb->temp_age_ns = (int64_t)(temp_age_s * 1e9);
	if (fb->low_pct >= fb->high_pct) {
		rc = util_fail(-EINVAL,
			       "file store: l3_cleaner_low_watermark (%g) must be below "
			       "l3_cleaner_high_watermark (%g)",
			       fb->low_pct, fb->high_pct);
		goto fail;
	}
	fb->capacity_bytes = (uint64_t)(cap_gb * 1e9);
	for (size_t i = 0; i < ndirs; i++)
		if ((rc = open_dir(fb, i, dirs[i])))
			goto fail;

	struct io_engine_opts io = {.queue_depth = (unsigned)depth, .threads = (unsigned)threads};
	if ((rc = io_engine_parse_kind(engine, &io.kind)) || (rc = io_engine_create(&io, &fb->io)))
		goto fail;

	fb->block = FORMAT_BLOCK_MIN;
	for (size_t i = 0; i < ndirs; i++) {
		size_t b = fs_block(fb, i);
		fb->block = b > fb->block ? b : fb->block;
	}
	atomic_store(&fb->direct, direct);
	atomic_store(&fb->align, (size_t)1);
	if (direct) {
		void *buf = NULL;
		if (posix_memalign(&buf, FORMAT_BLOCK_MAX, FORMAT_BLOCK_MAX)) {
			rc = -ENOMEM;
			goto fail;
		}
		memset(buf, 0, FORMAT_BLOCK_MAX);
		size_t align = 0;
		for (size_t i = 0; i < ndirs && atomic_load(&fb->direct); i++) {
			size_t a;
			int prc = probe_direct(fb, i, buf, FORMAT_BLOCK_MAX, &a);
			if (prc)
				fall_back_to_buffered(fb, fb->dirs[i], prc);
			else if (a > FORMAT_BLOCK_MAX)
				fall_back_to_buffered(fb, "alignment above 4096", -EINVAL);
			else if (a > align)
				align = a;
		}
		free(buf);
		if (atomic_load(&fb->direct))
			atomic_store(&fb->align, align);
	}
	if (fb->interval_s > 0) {
		if ((rc = file_lease_open(&fb->lease, fb->dirfds, fb->dirs, fb->ndirs,
					  fb->shared_group)))
			goto fail;
		if (util_thread_start(&fb->cleaner, file_cleaner_main, fb)) {
			rc = util_fail(-EAGAIN, "file store: cannot start the cleaner thread");
			goto fail;
		}
		fb->cleaner_started = true;
	}
	log_info("file store: %zu dir(s), %s I/O (alignment %zu), engine %s", ndirs,
		 atomic_load(&fb->direct) ? "direct" : "buffered", atomic_load(&fb->align),
		 io_engine_kind_name(io_engine_kind(fb->io)));
	*out = fb;
	return 0;
fail:
	file_close(fb);
	return rc;
}

static size_t file_object_block(void *p)
{
	return ((struct file_be *)p)->block;
}

static size_t file_alignment(void *p)
{
	return atomic_load(&((struct file_be *)p)->align);
}

static bool file_direct(void *p)
{
	return atomic_load(&((struct file_be *)p)->direct);
}

static const char *file_engine(void *p)
{
	return io_engine_kind_name(io_engine_kind(((struct file_be *)p)->io));
}

static int file_probe_memory(void *p, const void *addr, size_t len)
{
	struct file_be *fb = p;
	if (!atomic_load(&fb->direct))
		return 0;
	size_t align = atomic_load(&fb->align);
	size_t probe_len = len < FORMAT_BLOCK_MAX ? len : FORMAT_BLOCK_MAX;
	probe_len -= probe_len % align;
	if (probe_len == 0 || (uintptr_t)addr % align)
		return 0; /* the pool will not be zero-copy under O_DIRECT anyway */
	for (size_t i = 0; i < fb->ndirs; i++) {
		size_t a;
		int rc = probe_direct(fb, i, addr, probe_len, &a);
		if (rc) {
			fall_back_to_buffered(fb, "a write from pool memory", rc);
			return 0;
		}
	}
	return 0;
}

const struct store_backend_ops store_file_ops = {
	.name = "file",
	.object_hooks = true,
	.open = file_open,
	.close = file_close,
	.alignment = file_alignment,
	.object_block = file_object_block,
	.probe_memory = file_probe_memory,
	.direct = file_direct,
	.engine = file_engine,
	.put = file_put,
	.get = file_get,
	.put_feed = file_put_feed,
	.get_feed = file_get_feed,
	.exists = file_exists,
	.remove = file_remove,
	.erase = file_erase,
	.remove_matching = file_remove_matching,
	.cleaner_stats = file_cleaner_stats,
	.ls = file_tool_ls,
	.gc = file_tool_gc,
	.fsck = file_tool_fsck,
};
