/*
 * The file backend: page objects as files under base dirs.
 *
 *   <dir>/<bucket>/<physical name>        bucket = two hex digits of XXH3(name)
 *   <dir>/<bucket>/.tmp.<16 hex>.<pid>.<seq>   while being written
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
 */
#define _GNU_SOURCE
#include "io/io.h"
#include "store/backend.h"
#include "store/file_scan.h"
#include "store/format.h"
#include "util/util.h"

#include <hicache/config.h>
#include <hicache/key.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define FILE_PATH_MAX (3 + HC_NAME_MAX)    /* "ab/" + name */
#define TMP_NAME_MAX 64

struct file_be {
	size_t ndirs;
	char **dirs;  /* real paths */
	int *dirfds;
	_Atomic bool direct;
	_Atomic size_t align;
	struct io_engine *io;
	_Atomic uint64_t seq;
	pid_t pid;

	/* capacity and the cleaner */
	uint64_t capacity_bytes;
	double high_pct, low_pct, interval_s;
	_Atomic uint64_t used_bytes; /* objects written since the last scan, plus the scan */
	pthread_t cleaner;
	bool cleaner_started;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop;
	bool kick;
};

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

static int make_dir(const char *path)
{
	if (mkdir(path, 0700) == 0 || errno == EEXIST)
		return 0;
	return -errno;
}

/* Create/open one base dir and its 256 buckets. */
static int open_dir(struct file_be *fb, size_t i, const char *path)
{
	int rc = make_dir(path);
	if (rc)
		return util_fail(rc, "file store: cannot create base dir '%s': %s", path,
				 hc_strerror(rc));
	char *real = realpath(path, NULL);
	if (!real)
		return util_fail(-errno, "file store: base dir '%s': %s", path, hc_strerror(-errno));
	for (size_t j = 0; j < i; j++) {
		if (!strcmp(fb->dirs[j], real)) {
			rc = util_fail(-EINVAL, "file store: base dir '%s' is given twice (both are "
				       "'%s')", path, real);
			free(real);
			return rc;
		}
	}
	fb->dirs[i] = real;
	fb->dirfds[i] = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fb->dirfds[i] < 0)
		return util_fail(-errno, "file store: cannot open base dir '%s': %s", real,
				 hc_strerror(-errno));
	for (unsigned b = 0; b < 256; b++) {
		char name[3];
		snprintf(name, sizeof(name), "%02x", b);
		if (mkdirat(fb->dirfds[i], name, 0700) && errno != EEXIST)
			return util_fail(-errno, "file store: cannot create bucket '%s/%s': %s",
					 real, name, hc_strerror(-errno));
		struct stat st;
		if (fstatat(fb->dirfds[i], name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISDIR(st.st_mode))
			return util_fail(-ENOTDIR, "file store: bucket '%s/%s' is not a directory",
					 real, name);
	}
	return 0;
}

/* Write one aligned block from buf with O_DIRECT into a probe file of base
 * dir i, and read the file system's direct-I/O alignment from it. */
static int probe_direct(struct file_be *fb, size_t i, const void *buf, size_t len,
			size_t *align_out)
{
	char tmp[TMP_NAME_MAX], final[TMP_NAME_MAX];
	uint64_t seq = atomic_fetch_add(&fb->seq, 1);
	snprintf(tmp, sizeof(tmp), "00/.tmp.probe.%d.%llu", (int)fb->pid, (unsigned long long)seq);
	snprintf(final, sizeof(final), "00/.probe.%d.%llu", (int)fb->pid, (unsigned long long)seq);
	struct iovec iov = {(void *)buf, len};
	struct io_write_req req = {
		.dirfd = fb->dirfds[i], .tmp_name = tmp, .final_name = final, .iov = &iov,
		.iovcnt = 1, .len = len, .direct = true,
	};
	int rc = io_write_batch(fb->io, &req, 1);
	if (!rc)
		rc = req.result;
	if (rc)
		return rc;
	size_t align = FORMAT_BLOCK;
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

static void fall_back_to_buffered(struct file_be *fb, const char *why, int rc)
{
	if (atomic_exchange(&fb->direct, false))
		log_warn("file store: O_DIRECT does not work (%s: %s); using buffered I/O", why,
			 hc_strerror(rc));
	atomic_store(&fb->align, 1);
}

static void *cleaner_main(void *arg);

static int file_open(const struct hc_config *cfg, void **out)
{
	const char *const *dirs;
	size_t ndirs;
	bool direct;
	const char *engine;
	int64_t depth, threads;
	double cap_gb;
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

	struct file_be *fb = calloc(1, sizeof(*fb));
	if (!fb)
		return -ENOMEM;
	pthread_mutex_init(&fb->lock, NULL);
	pthread_cond_init(&fb->wake, NULL);
	fb->pid = getpid();
	fb->dirs = calloc(ndirs, sizeof(*fb->dirs));
	fb->dirfds = malloc(ndirs * sizeof(*fb->dirfds));
	if (!fb->dirs || !fb->dirfds) {
		rc = -ENOMEM;
		goto fail;
	}
	fb->ndirs = ndirs;
	for (size_t i = 0; i < ndirs; i++)
		fb->dirfds[i] = -1;
	if ((rc = hc_config_get_number(cfg, "l3_cleaner_high_watermark", &fb->high_pct)) ||
	    (rc = hc_config_get_number(cfg, "l3_cleaner_low_watermark", &fb->low_pct)) ||
	    (rc = hc_config_get_number(cfg, "l3_cleaner_interval_s", &fb->interval_s)))
		goto fail;
	if (fb->low_pct >= fb->high_pct) {
		rc = util_fail(-EINVAL, "file store: l3_cleaner_low_watermark (%g) must be below "
			       "l3_cleaner_high_watermark (%g)", fb->low_pct, fb->high_pct);
		goto fail;
	}
	fb->capacity_bytes = (uint64_t)(cap_gb * 1e9);
	for (size_t i = 0; i < ndirs; i++)
		if ((rc = open_dir(fb, i, dirs[i])))
			goto fail;

	struct io_engine_opts io = {.queue_depth = (unsigned)depth, .threads = (unsigned)threads};
	if ((rc = io_engine_parse_kind(engine, &io.kind)) ||
	    (rc = io_engine_create(&io, &fb->io)))
		goto fail;

	atomic_store(&fb->direct, direct);
	atomic_store(&fb->align, (size_t)1);
	if (direct) {
		void *buf = NULL;
		if (posix_memalign(&buf, FORMAT_BLOCK, FORMAT_BLOCK)) {
			rc = -ENOMEM;
			goto fail;
		}
		memset(buf, 0, FORMAT_BLOCK);
		size_t align = 0;
		for (size_t i = 0; i < ndirs && atomic_load(&fb->direct); i++) {
			size_t a;
			int prc = probe_direct(fb, i, buf, FORMAT_BLOCK, &a);
			if (prc)
				fall_back_to_buffered(fb, fb->dirs[i], prc);
			else if (a > FORMAT_BLOCK)
				fall_back_to_buffered(fb, "alignment above 4096", -EINVAL);
			else if (a > align)
				align = a;
		}
		free(buf);
		if (atomic_load(&fb->direct))
			atomic_store(&fb->align, align);
	}
	if (fb->interval_s > 0) {
		if (pthread_create(&fb->cleaner, NULL, cleaner_main, fb)) {
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
	size_t probe_len = len < FORMAT_BLOCK ? len : FORMAT_BLOCK;
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

static int path_of(const struct store_obj *o, char *out)
{
	char bucket[3];
	hc_key_bucket_hex(o->route, bucket);
	int n = snprintf(out, FILE_PATH_MAX, "%s/%s", bucket, o->name);
	return n > 0 && n < FILE_PATH_MAX ? 0 : -ENAMETOOLONG;
}

static int dirfd_of(const struct file_be *fb, const struct store_obj *o)
{
	return fb->dirfds[hc_key_disk(o->route, (unsigned)fb->ndirs)];
}

/* The whole batch failed before any I/O (no memory for its requests). */
static int fail_all(struct store_obj *objs, size_t n, int rc)
{
	for (size_t i = 0; i < n; i++)
		objs[i].result = rc;
	return rc;
}

static void kick_cleaner(struct file_be *fb)
{
	if (!fb->cleaner_started || !fb->capacity_bytes ||
	    atomic_load(&fb->used_bytes) <= fb->capacity_bytes)
		return;
	pthread_mutex_lock(&fb->lock);
	fb->kick = true;
	pthread_cond_signal(&fb->wake);
	pthread_mutex_unlock(&fb->lock);
}

/* One array of objects on its way through the I/O engine: the requests
 * follow this header in the same allocation, then their names. */
struct file_batch {
	struct store_obj *objs;
	size_t n;
	bool write;
};

static void *file_batch_reqs(struct file_batch *b)
{
	return b + 1;
}

static struct file_batch *file_batch_of(void *reqs)
{
	return (struct file_batch *)reqs - 1;
}

/* The engine's requests for objs[0..n), or NULL without memory. */
static struct file_batch *file_batch_new(struct file_be *fb, struct store_obj *objs, size_t n,
					 bool write)
{
	size_t req = write ? sizeof(struct io_write_req) : sizeof(struct io_read_req);
	size_t names = write ? FILE_PATH_MAX + TMP_NAME_MAX : FILE_PATH_MAX;
	struct file_batch *b = calloc(1, sizeof(*b) + n * (req + names));
	if (!b)
		return NULL;
	*b = (struct file_batch){objs, n, write};
	char (*paths)[FILE_PATH_MAX] = (void *)((char *)file_batch_reqs(b) + n * req);
	char (*tmps)[TMP_NAME_MAX] = (void *)(paths + n);
	bool direct = atomic_load(&fb->direct);
	for (size_t i = 0; i < n; i++) {
		path_of(&objs[i], paths[i]);
		if (!write) {
			((struct io_read_req *)file_batch_reqs(b))[i] = (struct io_read_req){
				.dirfd = dirfd_of(fb, &objs[i]),
				.name = paths[i],
				.iov = objs[i].iov,
				.iovcnt = objs[i].iovcnt,
				.len = objs[i].len,
				.direct = direct,
				.arrived = objs[i].arrived,
				.arg = objs[i].hook_arg,
			};
			continue;
		}
		char bucket[3];
		hc_key_bucket_hex(objs[i].route, bucket);
		/* Short, unique temp names: a crashed writer's leftovers never
		 * collide with a new one (pid, sequence), and fsck knows them. */
		snprintf(tmps[i], TMP_NAME_MAX, "%s/.tmp.%016llx.%d.%llu", bucket,
			 (unsigned long long)objs[i].route, (int)fb->pid,
			 (unsigned long long)atomic_fetch_add(&fb->seq, 1));
		((struct io_write_req *)file_batch_reqs(b))[i] = (struct io_write_req){
			.dirfd = dirfd_of(fb, &objs[i]),
			.tmp_name = tmps[i],
			.final_name = paths[i],
			.iov = objs[i].iov,
			.iovcnt = objs[i].iovcnt,
			.len = objs[i].len,
			.direct = direct,
			.noreplace = true,
			.prepare = objs[i].prepare,
			.arg = objs[i].hook_arg,
		};
	}
	return b;
}

/* The results back into the objects; the batch is freed. */
static void file_batch_end(struct file_be *fb, struct file_batch *b)
{
	uint64_t added = 0;
	for (size_t i = 0; i < b->n; i++) {
		struct store_obj *o = &b->objs[i];
		if (b->write) {
			o->result = ((struct io_write_req *)file_batch_reqs(b))[i].result;
			added += o->result == 0 ? o->len : 0;
		} else {
			o->result = ((struct io_read_req *)file_batch_reqs(b))[i].result;
		}
	}
	free(b);
	if (added) {
		atomic_fetch_add(&fb->used_bytes, added);
		kick_cleaner(fb);
	}
}

static int file_batch_run(struct file_be *fb, struct store_obj *objs, size_t n, bool write)
{
	struct file_batch *b = file_batch_new(fb, objs, n, write);
	if (!b)
		return fail_all(objs, n, -ENOMEM);
	int rc = write ? io_write_batch(fb->io, file_batch_reqs(b), n)
		       : io_read_batch(fb->io, file_batch_reqs(b), n);
	file_batch_end(fb, b);
	return rc;
}

static int file_put(void *p, struct store_obj *objs, size_t n)
{
	return file_batch_run(p, objs, n, true);
}

static int file_get(void *p, struct store_obj *objs, size_t n)
{
	return file_batch_run(p, objs, n, false);
}

/* The store's feed of object arrays as the engine's feed of requests. */
struct file_feed {
	struct io_feed io;
	struct store_feed *objs;
	struct file_be *fb;
	bool write;
};

static size_t file_feed_next(struct io_feed *f, void **reqs)
{
	struct file_feed *ff = (struct file_feed *)f;
	struct store_obj *objs;
	size_t n;
	while ((n = ff->objs->next(ff->objs, &objs))) {
		struct file_batch *b = file_batch_new(ff->fb, objs, n, ff->write);
		if (b) {
			*reqs = file_batch_reqs(b);
			return n;
		}
		fail_all(objs, n, -ENOMEM);
		ff->objs->done(ff->objs, objs, n);
	}
	return 0;
}

static void file_feed_done(struct io_feed *f, void *reqs, size_t n)
{
	struct file_feed *ff = (struct file_feed *)f;
	struct file_batch *b = file_batch_of(reqs);
	struct store_obj *objs = b->objs;
	file_batch_end(ff->fb, b);
	ff->objs->done(ff->objs, objs, n);
}

static int file_put_feed(void *p, struct store_feed *f)
{
	struct file_feed ff = {{file_feed_next, file_feed_done}, f, p, true};
	return io_write_feed(((struct file_be *)p)->io, &ff.io);
}

static int file_get_feed(void *p, struct store_feed *f)
{
	struct file_feed ff = {{file_feed_next, file_feed_done}, f, p, false};
	return io_read_feed(((struct file_be *)p)->io, &ff.io);
}

static int64_t file_exists(void *p, struct store_obj *objs, size_t n, bool stop_at_miss)
{
	struct file_be *fb = p;
	struct io_stat_req *reqs = calloc(n ? n : 1, sizeof(*reqs));
	char (*paths)[FILE_PATH_MAX] = malloc((n ? n : 1) * sizeof(*paths));
	if (!reqs || !paths) {
		free(reqs);
		free(paths);
		return fail_all(objs, n, -ENOMEM);
	}
	for (size_t i = 0; i < n; i++) {
		path_of(&objs[i], paths[i]);
		reqs[i] = (struct io_stat_req){.dirfd = dirfd_of(fb, &objs[i]), .name = paths[i],
					       .result = -ENOENT};
	}
	int64_t rc = io_stat_batch(fb->io, reqs, n, stop_at_miss);
	int64_t lead = 0;
	bool missed = false;
	for (size_t i = 0; i < n; i++) {
		/* A file of the wrong size is not an object of this geometry. */
		bool hit = rc >= 0 && reqs[i].result == 0 && reqs[i].size == objs[i].len &&
			   !(missed && stop_at_miss);
		objs[i].result = hit ? 0 : -ENOENT;
		if (hit && !missed)
			lead++;
		if (!hit)
			missed = true;
	}
	free(reqs);
	free(paths);
	return rc < 0 ? rc : lead;
}

static int file_remove(void *p, struct store_obj *objs, size_t n)
{
	struct file_be *fb = p;
	char path[FILE_PATH_MAX];
	for (size_t i = 0; i < n; i++) {
		objs[i].result = path_of(&objs[i], path);
		if (!objs[i].result && unlinkat(dirfd_of(fb, &objs[i]), path, 0))
			objs[i].result = -errno;
	}
	return 0;
}

/* ---- the cleaner ---- */

static bool over_watermark(const struct file_be *fb, double pct)
{
	for (size_t i = 0; i < fb->ndirs; i++) {
		struct statvfs sv;
		if (fstatvfs(fb->dirfds[i], &sv) || sv.f_blocks == 0)
			continue;
		double used = 100.0 * (double)(sv.f_blocks - sv.f_bavail) / (double)sv.f_blocks;
		if (used >= pct)
			return true;
	}
	return false;
}

static bool over_watermark_cb(void *arg);

/* One pass: the capacity cap, then the file-system watermarks. */
static void clean_once(struct file_be *fb)
{
	struct file_scan scan;
	if (file_scan_dirs((const char *const *)fb->dirs, fb->ndirs, &scan))
		return;
	if (fb->capacity_bytes && scan.object_bytes > fb->capacity_bytes) {
		/* Hysteresis: delete down to the low/high fraction of the cap. */
		uint64_t target = (uint64_t)((double)fb->capacity_bytes * fb->low_pct / fb->high_pct);
		uint64_t pages = 0, bytes = 0;
		file_scan_evict(&scan, target, NULL, NULL, &pages, &bytes);
		log_info("file store cleaner: capacity %.3f GB: deleted %llu pages (%llu bytes)",
			 (double)fb->capacity_bytes / 1e9, (unsigned long long)pages,
			 (unsigned long long)bytes);
	}
	if (over_watermark(fb, fb->high_pct)) {
		uint64_t pages = 0, bytes = 0;
		file_scan_evict(&scan, 0, over_watermark_cb, fb, &pages, &bytes);
		log_info("file store cleaner: file system above %g%%: deleted %llu pages", fb->high_pct,
			 (unsigned long long)pages);
	}
	/* Writes since the scan began are not in it; the next pass sees them. */
	atomic_store(&fb->used_bytes, scan.object_bytes);
	file_scan_free(&scan);
}

static bool over_watermark_cb(void *arg)
{
	const struct file_be *fb = arg;
	return over_watermark(fb, fb->low_pct);
}

static void *cleaner_main(void *arg)
{
	struct file_be *fb = arg;
	pthread_mutex_lock(&fb->lock);
	while (!fb->stop) {
		pthread_mutex_unlock(&fb->lock);
		clean_once(fb);
		pthread_mutex_lock(&fb->lock);
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		double whole = (double)(time_t)fb->interval_s;
		until.tv_sec += (time_t)fb->interval_s;
		until.tv_nsec += (long)((fb->interval_s - whole) * 1e9);
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		while (!fb->stop && !fb->kick)
			if (pthread_cond_timedwait(&fb->wake, &fb->lock, &until) == ETIMEDOUT)
				break;
		fb->kick = false;
	}
	pthread_mutex_unlock(&fb->lock);
	return NULL;
}

const struct store_backend_ops store_file_ops = {
	.name = "file",
	.object_hooks = true,
	.open = file_open,
	.close = file_close,
	.alignment = file_alignment,
	.probe_memory = file_probe_memory,
	.direct = file_direct,
	.engine = file_engine,
	.put = file_put,
	.get = file_get,
	.put_feed = file_put_feed,
	.get_feed = file_get_feed,
	.exists = file_exists,
	.remove = file_remove,
};
