/*
 * The file backend's transfers: batches of objects through the io engine
 * (put, get and their feeds), exists, and the removal of damaged objects.
 * See file.c for the layout and the rules.
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

/* One array of objects on its way through the I/O engine: the requests
 * follow this header in the same allocation, then their names, then (for
 * writes) their hooks. */
struct file_batch {
	struct store_obj *objs;
	size_t n;
	bool write;
};

/* A write's prepare, wrapped: the object looked up first when the store
 * asks (look_first), and whether it was refused before its write (found
 * existing, or the store's prepare failed: nothing was built, nothing
 * may be rewritten). */
struct file_hook {
	struct store_obj *o;
	int dirfd;
	const char *path;
	bool refused;
};

/* Is an object of o's size under its name? */
static bool file_present(const struct file_hook *h)
{
	struct stat sb;
	return !fstatat(h->dirfd, h->path, &sb, AT_SYMLINK_NOFOLLOW) && S_ISREG(sb.st_mode) &&
	       (uint64_t)sb.st_size == h->o->len;
}

static int file_prepare(void *arg)
{
	struct file_hook *h = arg;
	if (h->o->look_first && file_present(h)) {
		h->refused = true;
		return -EEXIST;
	}
	int rc = h->o->prepare ? h->o->prepare(h->o->hook_arg) : 0;
	h->refused = rc != 0;
	return rc;
}

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
	size_t names = write ? FILE_PATH_MAX + TMP_NAME_MAX + sizeof(struct file_hook)
			     : FILE_PATH_MAX;
	struct file_batch *b = util_fault_calloc(1, sizeof(*b) + n * (req + names));
	if (!b)
		return NULL;
	*b = (struct file_batch){objs, n, write};
	/* Hooks (8-byte aligned) before the names. */
	struct file_hook *hooks = (void *)((char *)file_batch_reqs(b) + n * req);
	char(*paths)[FILE_PATH_MAX] = (void *)((char *)hooks + (write ? n * sizeof(*hooks) : 0));
	char(*tmps)[TMP_NAME_MAX] = (void *)(paths + n);
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
		/* Short temp names unique per writer (nonce, sequence), across
		 * hosts and containers; fsck knows them by their prefix. */
		snprintf(tmps[i], TMP_NAME_MAX, "%s/.tmp.%016llx.%016llx.%llu", bucket,
			 (unsigned long long)objs[i].route, (unsigned long long)fb->nonce,
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
			.mode = fb->shared_group ? 0640 : 0600,
			.prepare = objs[i].prepare || objs[i].look_first ? file_prepare : NULL,
			.arg = &hooks[i],
		};
		hooks[i] = (struct file_hook){&objs[i], dirfd_of(fb, &objs[i]), paths[i], false};
	}
	return b;
}

/* Write q's object again on the calling thread, with the thread engine's
 * own sequence (io_write_file: O_EXCL open, whole write, close, rename),
 * under fresh temp names "<bucket>/.tmp.<kind>.<nonce>" while the name is
 * taken (-EBUSY: another writer's, a nonce clash or a planted file). The
 * image is whole (prepare ran before the first open). replace: rename
 * over what is under the final name. Only a temp file this call created
 * is ever removed. */
static int write_sync(const struct io_write_req *q, const char *kind, bool replace)
{
	struct iovec *scratch = util_fault_malloc(q->iovcnt * sizeof(*scratch));
	if (!scratch)
		return -ENOMEM;
	struct io_write_req one = *q;
	one.prepare = NULL;
	one.noreplace = q->noreplace && !replace;
	const char *slash = strchr(q->tmp_name, '/');
	size_t bucket = slash ? (size_t)(slash - q->tmp_name) + 1 : 0;
	char tmp[TMP_NAME_MAX];
	int rc = -EBUSY;
	for (int t = 0; t < TEMP_RETRIES && rc == -EBUSY; t++) {
		snprintf(tmp, sizeof(tmp), "%.*s.tmp.%s.%016llx", (int)bucket, q->tmp_name, kind,
			 (unsigned long long)file_random_nonce());
		one.tmp_name = tmp;
		rc = io_write_file(&one, scratch);
	}
	free(scratch);
	return rc;
}

/* The last FORMAT_TRAILER_BYTES of q's image into *out. */
static void image_trailer(const struct io_write_req *q, struct store_trailer *out)
{
	size_t want = sizeof(*out), skip = q->len - want, off = 0;
	char *dst = (char *)out;
	for (unsigned v = 0; v < q->iovcnt && want; v++) {
		size_t l = q->iov[v].iov_len;
		if (off + l > skip) {
			size_t from = skip > off ? skip - off : 0, k = l - from;
			k = k < want ? k : want;
			memcpy(dst, (const char *)q->iov[v].iov_base + from, k);
			dst += k;
			want -= k;
			skip += k;
		}
		off += l;
	}
}

/*
 * The rename met a file under the object's name (-EEXIST). What is it?
 *   -EEXIST    this page's object (size and trailer match the image's;
 *              the payload is checked by the reads)
 *   -ENOTUNIQ  a valid object of another geometry (another instance with
 *              another layout), or no regular file: left alone
 *   1          not a valid object (wrong size for any object, a bad
 *              trailer, another name's object): what a crash, a copy or
 *              another program left; to replace
 * A file gone meanwhile is 1 as well: the write is made again.
 */
static int existing_kind(const struct io_write_req *q)
{
	int fd = io_openat_beneath(q->dirfd, q->final_name, O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0);
	if (fd < 0)
		return errno == ENOENT || errno == ELOOP ? 1 : -EEXIST;
	struct stat st;
	int kind = 1;
	if (fstat(fd, &st)) {
		kind = -EEXIST;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		kind = -ENOTUNIQ;
		goto out;
	}
	if (st.st_size < FORMAT_BLOCK_MIN || st.st_size % FORMAT_BLOCK_MIN)
		goto out;
	uint8_t tail[FORMAT_TRAILER_BYTES];
	ssize_t n;
	do
		n = pread(fd, tail, sizeof(tail), st.st_size - (off_t)sizeof(tail));
	while (n < 0 && errno == EINTR);
	struct store_trailer got, want;
	if (n != (ssize_t)sizeof(tail) || format_trailer_read(tail, &got) ||
	    !format_block_of(got.payload_len, (uint64_t)st.st_size))
		goto out;
	image_trailer(q, &want);
	if (got.name_hash != want.name_hash)
		goto out; /* another page's object under this name: replace it */
	kind = (uint64_t)st.st_size == q->len && got.pool_kind == want.pool_kind &&
			       got.layout == want.layout && got.component == want.component &&
			       got.component_index == want.component_index &&
			       got.page_tokens == want.page_tokens &&
			       got.geometry == want.geometry && got.payload_len == want.payload_len
		       ? -EEXIST
		       : -ENOTUNIQ;
out:
	close(fd);
	return kind;
}

/* A write that met a file under its name: replace it when it is not a
 * valid object (atomically: a whole new object by rename), else say what
 * it is. The race with another writer publishing meanwhile replaces one
 * whole object by another of the same page. */
static int write_over_invalid(const struct io_write_req *q)
{
	int kind = existing_kind(q);
	if (kind != 1)
		return kind;
	int rc = write_sync(q, "fix", true);
	if (!rc)
		log_info("file store: replaced an invalid file under %s", q->final_name);
	return rc;
}

/* The results back into the objects; the batch is freed. */
static void file_batch_end(struct file_be *fb, struct file_batch *b)
{
	uint64_t added = 0;
	for (size_t i = 0; i < b->n; i++) {
		struct store_obj *o = &b->objs[i];
		if (b->write) {
			struct io_write_req *q = &((struct io_write_req *)file_batch_reqs(b))[i];
			const struct file_hook *h = q->arg;
			if (q->result == -EBUSY)
				q->result = write_sync(q, "retry", false);
			if (q->result == -EEXIST && q->noreplace && !(h && h->refused))
				q->result = write_over_invalid(q);
			o->result = q->result;
			added += o->result == 0 ? o->len : 0;
		} else {
			o->result = ((struct io_read_req *)file_batch_reqs(b))[i].result;
		}
	}
	free(b);
	if (added) {
		atomic_fetch_add(&fb->used_bytes, added);
		file_kick_cleaner(fb);
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

int file_put(void *p, struct store_obj *objs, size_t n)
{
	return file_batch_run(p, objs, n, true);
}

int file_get(void *p, struct store_obj *objs, size_t n)
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

int file_put_feed(void *p, struct store_feed *f)
{
	struct file_feed ff = {{file_feed_next, file_feed_done}, f, p, true};
	return io_write_feed(((struct file_be *)p)->io, &ff.io);
}

int file_get_feed(void *p, struct store_feed *f)
{
	struct file_feed ff = {{file_feed_next, file_feed_done}, f, p, false};
	return io_read_feed(((struct file_be *)p)->io, &ff.io);
}

int64_t file_exists(void *p, struct store_obj *objs, size_t n, bool stop_at_miss)
{
	struct file_be *fb = p;
	struct io_stat_req *reqs = util_fault_calloc(n ? n : 1, sizeof(*reqs));
	char(*paths)[FILE_PATH_MAX] = util_fault_malloc((n ? n : 1) * sizeof(*paths));
	if (!reqs || !paths) {
		free(reqs);
		free(paths);
		return fail_all(objs, n, -ENOMEM);
	}
	for (size_t i = 0; i < n; i++) {
		path_of(&objs[i], paths[i]);
		reqs[i] = (struct io_stat_req){.dirfd = dirfd_of(fb, &objs[i]),
					       .name = paths[i],
					       .result = -ENOENT};
	}
	int64_t rc = io_stat_batch(fb->io, reqs, n, stop_at_miss);
	int64_t lead = 0;
	bool missed = false;
	for (size_t i = 0; i < n; i++) {
		/* A file of the wrong size is not an object of this geometry. */
		bool looked = rc >= 0 && reqs[i].result == 0 && !(missed && stop_at_miss);
		bool hit = looked && reqs[i].size == objs[i].len;
		objs[i].result = hit ? 0 : looked ? -EBADMSG : -ENOENT;
		if (hit && !missed)
			lead++;
		if (!hit)
			missed = true;
	}
	free(reqs);
	free(paths);
	return rc < 0 ? rc : lead;
}

/*
 * Healing: the store found these objects damaged when it read them. What
 * is under the name now may be a good copy published since (by another
 * writer, after a set replaced the bad one), so the name is not unlinked
 * blindly: the file is moved aside in its bucket (an atomic rename to a
 * temp name, which fsck and the cleaner know), checked on its own
 * (format_check_fd), and removed only when it fails; a good one goes back,
 * unless a newer object took the name meanwhile.
 * Results: 0 removed, -EEXIST a valid object is there (kept), -ENOENT gone.
 */
static int heal_one(struct file_be *fb, int dirfd, const char *path)
{
	const char *slash = strchr(path, '/');
	size_t bucket = slash ? (size_t)(slash - path) + 1 : 0;
	char aside[TMP_NAME_MAX];
	snprintf(aside, sizeof(aside), "%.*s.tmp.heal.%016llx.%llu", (int)bucket, path,
		 (unsigned long long)fb->nonce, (unsigned long long)atomic_fetch_add(&fb->seq, 1));
	if (renameat2(dirfd, path, dirfd, aside, RENAME_NOREPLACE))
		return -errno;
	int fd = io_openat_beneath(dirfd, aside, O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0);
	struct stat st;
	struct store_trailer t;
	bool good = fd >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode) &&
		    format_check_fd(fd, (uint64_t)st.st_size, path + bucket, &t) == 0;
	if (fd >= 0)
		close(fd);
	if (good && !renameat2(dirfd, aside, dirfd, path, RENAME_NOREPLACE))
		return -EEXIST;
	/* Bad, or good but a newer object has the name: the aside copy goes. */
	if (unlinkat(dirfd, aside, 0) && errno != ENOENT)
		return -errno;
	return good ? -EEXIST : 0;
}

int file_remove(void *p, struct store_obj *objs, size_t n)
{
	struct file_be *fb = p;
	char path[FILE_PATH_MAX];
	for (size_t i = 0; i < n; i++) {
		objs[i].result = path_of(&objs[i], path);
		if (!objs[i].result)
			objs[i].result = heal_one(fb, dirfd_of(fb, &objs[i]), path);
	}
	return 0;
}

/* An engine's eviction: the object goes whatever it holds. The bucket is
 * opened beneath the base dir with no symlink followed, so a planted
 * bucket link cannot aim the unlink elsewhere; a symlink under the
 * object's name is removed itself, never its target. */
int file_erase(void *p, struct store_obj *objs, size_t n)
{
	struct file_be *fb = p;
	for (size_t i = 0; i < n; i++) {
		char bucket[3];
		hc_key_bucket_hex(objs[i].route, bucket);
		int fd = io_openat_beneath(dirfd_of(fb, &objs[i]), bucket,
					   O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
		if (fd < 0) {
			objs[i].result = errno == ENOENT ? -ENOENT : -errno;
			continue;
		}
		objs[i].result = unlinkat(fd, objs[i].name, 0) ? -errno : 0;
		close(fd);
	}
	return 0;
}
