/*
 * io — the batched I/O engine under the file backend (internal).
 *
 * One call moves a whole batch of page files. With io_uring, each page is
 * one chain of linked requests and the batch is one submission:
 *
 *   write:  openat_direct(tmp, O_CREAT|O_EXCL|O_WRONLY[|O_DIRECT]) -> writev -> close_direct
 *           -> renameat(tmp, final[, RENAME_NOREPLACE])
 *   read:   openat_direct(name, O_RDONLY[|O_DIRECT]) -> readv (hardlinked) -> close_direct
 *
 * so the calling thread makes no per-file system call. Names are resolved
 * below dirfd without following any symlink (openat2 RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS; O_NOFOLLOW where the kernel lacks openat2): a
 * symlink planted in a store is never a way out of it (-ELOOP/-EXDEV). When io_uring is
 * unavailable (old kernel, seccomp) or HICACHE_IO_ENGINE=threads, a pool
 * of worker threads does the same work with openat/pwritev/preadv/close/
 * renameat. Both engines give the same results and leave the same state.
 *
 * Guarantees of every batch call, whatever fails:
 *   - no fixed-file slot, fd or temp file is left behind (a failed chain is
 *     followed by a clean-up of its slot and its temp name);
 *   - a final name is either untouched or replaced by a complete file (the
 *     rename is the only step that makes a file visible);
 *   - results are per request; one failed page never fails the others.
 * Batches of any length are accepted; up to queue_depth pages are in
 * flight at once (io_uring: a finished page's slot takes the next page).
 *
 * Thread-safety: any number of threads may call the batch functions on one
 * engine at once (each call takes its own ring or workers);
 * io_engine_destroy() must not race with anything.
 */
#ifndef HC_SRC_IO_H
#define HC_SRC_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

enum io_engine_kind {
	IO_ENGINE_AUTO, /* io_uring if the probe at create succeeds, else threads */
	IO_ENGINE_URING,
	IO_ENGINE_THREADS,
};

struct io_engine_opts {
	enum io_engine_kind kind;
	unsigned queue_depth; /* pages per submission (io_uring) / in flight (threads); 0 = 64 */
	unsigned threads;     /* worker threads of the thread engine; 0 = 8 */
};

struct io_engine;

/* kind URING fails with -ENOSYS/-EPERM (message says why) when io_uring
 * cannot be used; AUTO then falls back to threads with an info message. */
int io_engine_create(const struct io_engine_opts *opts, struct io_engine **out);
/* Accepts NULL. */
void io_engine_destroy(struct io_engine *e);
enum io_engine_kind io_engine_kind(const struct io_engine *e);
const char *io_engine_kind_name(enum io_engine_kind kind);
/* "uring", "threads", "auto" (or "" = auto). Returns 0 or -EINVAL. */
int io_engine_parse_kind(const char *text, enum io_engine_kind *out);

/* Publish one file: write iov (len bytes in all) to tmp_name, then rename
 * it to final_name, both relative to dirfd.
 * result: 0 published; -EEXIST final_name already existed and noreplace was
 * set (the temp file is removed, the existing file untouched); any other
 * -errno: nothing was published and the temp file is gone (a short write
 * is -EIO, or -ENOSPC/-EFBIG when the kernel said so). */
struct io_write_req {
	int dirfd;
	const char *tmp_name;
	const char *final_name;
	const struct iovec *iov;
	unsigned iovcnt;
	size_t len;
	bool direct;    /* O_DIRECT: every iov base/len must be aligned by the caller */
	bool noreplace; /* RENAME_NOREPLACE */
	unsigned mode;  /* the temp file's mode; 0 = 0600 */
	/* Optional. Called once before this request's chain is sent, while
	 * earlier requests are already in flight (io_uring: while every slot
	 * is busy, up to queue_depth requests ahead; else when its slot is
	 * free), so that the caller can fill the memory iov points at (hash,
	 * gather) without holding the disk back. iov itself must be final
	 * before the call.
	 * A negative return becomes the result and nothing is written (e.g.
	 * -EEXIST: the object turned out to exist). Runs on the calling
	 * thread (io_uring) or on a worker (threads): it must be safe to run
	 * alongside the other requests' calls. */
	int (*prepare)(void *arg);
	void *arg;
	int result;
};

/* Read exactly len bytes of a file into iov.
 * result: 0 the file is exactly len bytes and iov holds them; -ENOENT no
 * such file; -ENODATA the file is shorter than len; -EFBIG it is longer;
 * other -errno on failure. iov contents are unspecified unless result is 0. */
struct io_read_req {
	int dirfd;
	const char *name;
	const struct iovec *iov;
	unsigned iovcnt;
	size_t len;
	bool direct;
	/* Optional. Called once when the request finished with result 0, by
	 * the thread that saw it finish, while other requests of the batch may
	 * still be in flight (checksums overlap the I/O). The same thread
	 * rules as io_write_req.prepare. */
	void (*arrived)(void *arg);
	void *arg;
	int result;
};

/* size of a file: result 0 and size set, or -ENOENT / -errno. */
struct io_stat_req {
	int dirfd;
	const char *name;
	uint64_t size;
	int64_t mtime_ns;
	int result;
};

/* Write one request's page file on the calling thread with plain system
 * calls, as the thread engine does (q->prepare is not called): O_EXCL
 * create of q->tmp_name (-EBUSY when that name is taken), the whole image,
 * close, rename (RENAME_NOREPLACE with q->noreplace). A temp file it
 * created is removed on failure. scratch: IO_MAX_IOV iovecs (io_stream.h)
 * for a short write's rest. Returns 0 or -errno. */
int io_write_file(const struct io_write_req *q, struct iovec *scratch);
/* Remove a temp file after a failed write; a missing one is no error. */
void io_unlink_tmp(int dirfd, const char *name);

/* Each returns 0 when the batch ran (see the per-request results), or a
 * negative errno when it could not run at all (then every result is that
 * error and nothing changed on disk). n == 0 is a no-op. */
int io_write_batch(struct io_engine *e, struct io_write_req *reqs, size_t n);
int io_read_batch(struct io_engine *e, struct io_read_req *reqs, size_t n);

/*
 * A batch that grows while it runs: the engine asks the feed for more
 * requests whenever it has room for them, so arrays given one after another
 * stream through the ring without a drain between them (a batch call waits
 * for its last page, and on a disk that completes its reads in bursts, the
 * caller's work after that wait is time the disk idles).
 *
 * next() gives the next array (io_write_req for io_write_feed, io_read_req
 * for io_read_feed) and its length, or 0 when it has none now. It is called
 * on the calling thread, only once every request given so far has been
 * started, and may be asked again after a 0 while requests are in flight;
 * the call returns once next() said 0 with nothing in flight.
 * done() hands back each array from next() once every request of it has its
 * final result, its hooks have run, and the engine will not touch it again,
 * so the caller may free or reuse it; arrays may end out of order. Every
 * array given is handed back exactly once, whatever fails.
 * Returns 0, or -errno when it could not run at all (every request that
 * passed validation then has that error, one that did not keeps -EINVAL,
 * and each array was still handed back).
 */
struct io_feed {
	size_t (*next)(struct io_feed *f, void **reqs);
	void (*done)(struct io_feed *f, void *reqs, size_t n);
};
int io_write_feed(struct io_engine *e, struct io_feed *f);
int io_read_feed(struct io_engine *e, struct io_feed *f);
/* Stops at the first miss when stop_at_miss (later results are left -ENOENT
 * and not looked up); returns the number of leading hits (>= 0) or -errno. */
int64_t io_stat_batch(struct io_engine *e, struct io_stat_req *reqs, size_t n, bool stop_at_miss);

#endif
