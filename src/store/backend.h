/*
 * Store backends (internal): a const ops table per backend. The store core
 * builds complete object images (payload, padding, trailer) as iovecs and
 * checks what comes back; a backend only moves whole objects by name, so
 * checksums, naming and statistics live once, above the table.
 *
 * The backends are peers below the core, one folder each:
 * store/backend/file/, store/backend/mem/, store/backend/s3/. A backend
 * includes this header and format.h, never the core's headers (store_types.h and the files' own)
 * nor another backend's headers; what backends share lives in
 * store/backend/ itself (page_plan.h). The core names a backend only by
 * its ops table, declared at the end of this header.
 */
#ifndef HC_SRC_STORE_BACKEND_H
#define HC_SRC_STORE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct hc_config;
struct hc_fsck_report;
struct hc_ls_report;
struct hc_store_cleaner_stats;

/* One object of a batch. */
struct store_obj {
	const char *name;        /* physical name, NUL-terminated */
	uint64_t route;          /* hc_key_route_hash(name) */
	const struct iovec *iov; /* the whole object image (put) / where it goes (get) */
	unsigned iovcnt;
	size_t len; /* object bytes: image length, expected size */
	/* Per-object hooks, used only by a backend with object_hooks (the
	 * store does the same work itself around other backends' calls):
	 * put calls prepare(hook_arg) once before it writes the object, while
	 * objects before it are being written (a negative return is the
	 * result, nothing is written); get calls
	 * arrived(hook_arg) once when the object was read whole. Either may
	 * run on another thread, alongside the other objects' hooks. */
	int (*prepare)(void *arg);
	void (*arrived)(void *arg);
	void *hook_arg;
	/* put, with object_hooks: look the object up (len bytes under the
	 * name) before prepare; one that is there is neither prepared nor
	 * written, and its result is -EEXIST. Objects are immutable, so a
	 * large one that exists is not rewritten; the backend looks it up
	 * itself, so a put never calls back into the store for it. */
	bool look_first;
	int result; /* out: see each op */
};

/* A stream of object arrays for put_feed/get_feed: next() gives the next
 * array (0: none now; it may be asked again while objects are in flight),
 * done() hands each array back once its results are final and its hooks
 * have run, in any order, exactly once. Both run on the calling thread. */
struct store_feed {
	size_t (*next)(struct store_feed *f, struct store_obj **objs);
	void (*done)(struct store_feed *f, struct store_obj *objs, size_t n);
};

struct store_backend_ops {
	const char *name;
	/* Calls store_obj.prepare/arrived (see there). */
	bool object_hooks;
	/* Open with the store's config (never NULL). */
	int (*open)(const struct hc_config *cfg, void **out);
	void (*close)(void *be);
	/* Alignment that every iov base and length must have (1 = none). */
	size_t (*alignment)(void *be);
	/* Probe that direct I/O works from this memory (a registered pool's
	 * first page); may switch the backend to buffered I/O. NULL = nothing
	 * to probe. Returns 0 or -errno (only for errors other than the
	 * fallback). */
	int (*probe_memory)(void *be, const void *addr, size_t len);
	/* The object block (format.h) the backend needs when the config
	 * leaves it to the backend; NULL = FORMAT_BLOCK_MIN. */
	size_t (*object_block)(void *be);
	/* Is the backend using direct I/O right now? NULL = no. */
	bool (*direct)(void *be);
	/* Name of the I/O engine ("uring", "threads", "none"). */
	const char *(*engine)(void *be);
	/* Publish: result 0 stored, -EEXIST already there (untouched), -errno. */
	int (*put)(void *be, struct store_obj *objs, size_t n);
	/* Read exactly len bytes: 0, -ENOENT, -ENODATA/-EFBIG (wrong size), -errno. */
	int (*get)(void *be, struct store_obj *objs, size_t n);
	/* put and get over a feed, with no drain between its arrays (the disk
	 * stays busy while the store checks one array and makes the next).
	 * NULL: the store calls put/get one array at a time. */
	int (*put_feed)(void *be, struct store_feed *f);
	int (*get_feed)(void *be, struct store_feed *f);
	/* result 0 when the object exists with size len, -EBADMSG when it
	 * exists with another size (corrupt or of another geometry), else
	 * -ENOENT; with
	 * stop_at_miss later objects are not looked at. Returns leading hits. */
	int64_t (*exists)(void *be, struct store_obj *objs, size_t n, bool stop_at_miss);
	/* Delete objects the store found damaged, only while what is under
	 * the name is still not a valid object: a good copy published since
	 * the read stays (results: 0 deleted, -EEXIST a valid object kept,
	 * -ENOENT, -errno). NULL = cannot. */
	int (*remove)(void *be, struct store_obj *objs, size_t n);
	/* Delete objects whatever they hold (an engine's own eviction,
	 * hc_store_delete): results 0 deleted (a backend that cannot tell,
	 * S3, says 0 for a missing one too), -ENOENT, -errno; a non-object
	 * under the name (a directory, a symlink) is left: -errno. Returns 0
	 * or a whole-call -errno. NULL = cannot (-EOPNOTSUPP). */
	int (*erase)(void *be, struct store_obj *objs, size_t n);
	/* Delete every object of the backend (every base dir and bucket, or
	 * the bucket's prefix: not below it) whose name match(name, arg)
	 * accepts; objects being written (temp files) are not objects. Safe
	 * while other calls run: a get of a deleted object reads it whole or
	 * misses. Returns how many were deleted, or -errno (some may have
	 * been). NULL = cannot (hc_store_clear fails with -EOPNOTSUPP). */
	int64_t (*remove_matching)(void *be, bool (*match)(const char *name, void *arg), void *arg);
	/* The backend's cleaner counters (whole struct). NULL = none (zeros). */
	void (*cleaner_stats)(void *be, struct hc_store_cleaner_stats *out);

	/* The offline tools (hc_file_ls, hc_file_gc, hc_file_fsck: no open
	 * store, no geometry) over locations the backend owns: one URL that
	 * starts with url_scheme, or, for the default backend (backend.c),
	 * base directories. Each NULL = the backend has no such tool (the
	 * call fails -ENOTSUP naming the backend). */
	const char *url_scheme; /* "s3://"; NULL = none */
	int (*ls)(const char *const *locs, size_t n, struct hc_ls_report *out);
	int (*gc)(const char *const *locs, size_t n, uint64_t capacity_bytes,
		  uint64_t *removed_pages, uint64_t *removed_bytes);
	/* temp_age_ns: a temp file older than this is orphaned; 0 = the
	 * backend's default. */
	int (*fsck)(const char *const *locs, size_t n, bool repair, int64_t temp_age_ns,
		    struct hc_fsck_report *out);
};

extern const struct store_backend_ops store_file_ops;
extern const struct store_backend_ops store_mem_ops;
extern const struct store_backend_ops store_s3_ops;

/* The backend named name (NULL: the default), or -EINVAL naming the
 * backends there are. */
int store_backend_by_name(const char *name, const struct store_backend_ops **out);
/* The backend that owns locations locs[0, n) (all non-NULL): the one whose
 * url_scheme starts one of them, which must then be the only one (else
 * -EINVAL, what naming the call), or the default. */
int store_backend_by_location(const char *const *locs, size_t n, const char *what,
			      const struct store_backend_ops **out);

#endif
