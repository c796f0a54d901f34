/*
 * hicache — L3 storage: the store interface (v1 and v2) over a backend.
 *
 * A store holds page objects addressed by page key. Pools are registered
 * once by name; transfers then name host pages by index in their pool.
 *
 *   v1   hc_store_set / _get / _exists on the anchor pool (the KV pool, or
 *        a logical anchor whose pages are tiny marker objects);
 *   v2   hc_store_set_v2 / _get_v2 / _exists_v2 over several pools at once
 *        (kv, mamba, swa, indexer, ...), with hit policies.
 *
 * Every pool gets a context: zero-copy (pages move straight between pool
 * memory and storage; only for layouts that keep a page contiguous per
 * buffer and, under O_DIRECT, whose buffer bases and page strides are
 * multiples of the direct-I/O alignment) or bounce (pages are gathered into
 * per-call bounce slots of raw bytes, each rounded up to the alignment).
 *
 * Objects are immutable: a page that exists is not rewritten. Each object
 * carries a trailer (geometry tag, payload length, XXH3-64 checksum), so a
 * page written under another layout or geometry, a truncated or a corrupt
 * object is a miss, never data. docs/FORMAT.md describes the file layout.
 *
 * Results: calls return 0 (set), the number of leading hits (get, exists)
 * or a negative errno for the whole call (-EINVAL bad arguments, -EFAULT a
 * page outside its registered pool: then nothing was written). Per-page
 * outcomes go to the caller's results array: 0, -ENOENT (miss), -EBADMSG
 * (corrupt object, counted in the stats), or another -errno.
 *
 * Thread-safety: any number of threads may call set, get and exists (v1
 * and v2) and the stats functions on one store at once. Registration must
 * happen before the first transfer and must not race with transfers;
 * hc_store_close() must not race with anything.
 */
#ifndef HICACHE_STORE_H
#define HICACHE_STORE_H

#include <hicache/common.h>
#include <hicache/key.h>
#include <hicache/pool.h>

#ifdef __cplusplus
extern "C" {
#endif

struct hc_config;
struct hc_store;

struct hc_store_opts {
	size_t struct_size;
	/* "file" (default), "mem" or "s3" (an S3 bucket shared by many
	 * instances: docs/S3.md). */
	const char *backend;
	/* Backend keys (dirs, use_direct_io, io_engine, verify_checksum,
	 * capacity_gb, watermarks, mem_capacity_bytes, endpoint, bucket,
	 * prefix, max_inflight ...); NULL = defaults and environment. Read at
	 * open only. */
	const struct hc_config *config;
	/* Naming: suffix "_<model>" (MLA) or "_<model>_<tp_rank>_<tp_size>". */
	const char *model;
	uint32_t tp_rank;
	uint32_t tp_size;
	/* Force bounce mode for every pool (the default picks zero-copy where
	 * it is allowed). */
	bool force_bounce;
};

HC_API void hc_store_opts_init(struct hc_store_opts *opts, size_t size);
/* Returns 0, -EINVAL (bad option or config; the message names it), -ENOENT /
 * -EACCES / -ENOTDIR (a base dir; s3: no such bucket / access denied),
 * -ENOMEM. *out is NULL on failure. */
HC_API int hc_store_open(const struct hc_store_opts *opts, struct hc_store **out);
/* Accepts NULL. Waits for background work (the cleaner) to stop. */
HC_API void hc_store_close(struct hc_store *store);

/* Register a pool under a name (unique; [a-z0-9_]{1,32}). The anchor is the
 * KV pool (or a logical anchor pool) that v1 calls use; exactly one.
 * The store does not own the pool; it must outlive the store. A pool in
 * bounce mode gets the bounce slots of three chunks now (a transfer
 * streams chunks, up to three on their way at once; a chunk is 128 objects
 * or 64 MiB, whichever is less, but 32 pages for large pages, up to
 * 512 MiB), pre-faulted on transparent huge pages, so that no transfer
 * faults them in.
 * Returns 0, -EINVAL, -EEXIST (name taken / second anchor), -ENOMEM. */
HC_API int hc_store_register_pool(struct hc_store *store, const char *name, struct hc_pool *pool,
				  bool anchor);
/* Register every pool of a group (the group's anchor as the anchor). */
HC_API int hc_store_register_group(struct hc_store *store, const struct hc_pool_group *group);

struct hc_store_pool_info {
	bool zero_copy;
	size_t slot_bytes;  /* bounce slot size (0 in zero-copy mode) */
	size_t page_bytes;  /* flat page bytes */
	size_t alignment;   /* direct-I/O alignment the context was chosen for */
	unsigned objects;   /* objects per page */
};
HC_API int hc_store_pool_info(const struct hc_store *store, const char *pool,
			      struct hc_store_pool_info *out);

/* The direct-I/O alignment of the backend (1 when it has none). */
HC_API size_t hc_store_alignment(const struct hc_store *store);
/* Is O_DIRECT in use (after the open-time probe)? */
HC_API bool hc_store_direct_io(const struct hc_store *store);
/* "uring", "threads" or "none". */
HC_API const char *hc_store_io_engine(const struct hc_store *store);

/* ---- v1: the anchor pool ---- */

/* Write pages[i] of the anchor under keys[i]. results (may be NULL) gets
 * one outcome per page (0 also for a page that already existed). Returns 0
 * when every page is stored, the negative errno of the first failed page
 * otherwise, or a whole-call error (nothing written). */
HC_API int hc_store_set(struct hc_store *store, const struct hc_key *keys, size_t n,
			const uint64_t *pages, int *results);
/* Read keys[i] into pages[i]. Returns the number of leading hits. A page
 * that is not a hit may have been written all the same (a read that failed
 * its checksum lands there, as in zero-copy mode it must): its content is
 * unspecified. */
HC_API int64_t hc_store_get(struct hc_store *store, const struct hc_key *keys, size_t n,
			    const uint64_t *pages, int *results);
/* Number of consecutive keys from the start whose pages exist. */
HC_API int64_t hc_store_exists(struct hc_store *store, const struct hc_key *keys, size_t n);

/* ---- v1, started now and waited for later ----
 *
 * A synchronous call ends with a drain: the disk waits while the call's
 * last pages finish and the next call is prepared. Started operations run
 * in the order they were started, on one store thread, which keeps one
 * stream of at most io_depth pages in flight going from each started op
 * to the next of the same direction (set or get) while there is one, so
 * that keeping two or more started keeps the disk busy across calls; each
 * op finishes (its wait returns) as soon as its own pages are done. A set
 * started after a set of the same key behaves as if the first had
 * returned; a get started after a set sees what that set stored.
 *
 * keys and results (when not NULL) must stay valid and untouched until
 * hc_store_op_wait(); pages is read at start. Every started operation
 * must be waited for, and before hc_store_close(). Returns 0 and *op, or
 * a whole-call error as the synchronous call (then *op is NULL and
 * nothing was started). */
struct hc_store_op;
HC_API int hc_store_set_start(struct hc_store *store, const struct hc_key *keys, size_t n,
			      const uint64_t *pages, int *results, struct hc_store_op **op);
HC_API int hc_store_get_start(struct hc_store *store, const struct hc_key *keys, size_t n,
			      const uint64_t *pages, int *results, struct hc_store_op **op);
/* Wait for op to finish and free it. Returns what hc_store_set() (0 or
 * the first failed page's -errno) or hc_store_get() (leading hits) would
 * have returned. Any thread may wait for an op, once. */
HC_API int64_t hc_store_op_wait(struct hc_store_op *op);

/* ---- v2: several pools ---- */

enum hc_hit_policy {
	HC_HIT_ALL_PAGES,      /* every page of the prefix must exist in this pool */
	HC_HIT_TRAILING_PAGES, /* the last N pages of the prefix must exist (N = n keys) */
};

struct hc_pool_transfer {
	const char *pool;           /* registered name; "kv" or the anchor's name for KV */
	const struct hc_key *keys;
	size_t n;
	const uint64_t *pages;      /* n pages of that pool (not read by exists_v2) */
	enum hc_hit_policy policy;  /* exists_v2 only */
	int *results;               /* n outcomes (may be NULL) */
};

/* Per transfer as hc_store_set / hc_store_get. Returns 0 / the leading hits
 * of the first transfer, or a whole-call error. */
HC_API int hc_store_set_v2(struct hc_store *store, struct hc_pool_transfer *transfers, size_t nt);
HC_API int hc_store_get_v2(struct hc_store *store, struct hc_pool_transfer *transfers, size_t nt);
/* Started as hc_store_set_start / _get_start (above), for several pools:
 * the transfers array is read at start, each transfer's keys and results
 * must stay valid until hc_store_op_wait(), which returns what
 * hc_store_set_v2 / _get_v2 would have. */
HC_API int hc_store_set_v2_start(struct hc_store *store, struct hc_pool_transfer *transfers,
				 size_t nt, struct hc_store_op **op);
HC_API int hc_store_get_v2_start(struct hc_store *store, struct hc_pool_transfer *transfers,
				 size_t nt, struct hc_store_op **op);
/* keys: the KV keys of the prefix. *kv_hit_pages = longest existing KV
 * prefix; pool_hits[t] = hit pages of transfer t by its policy (0 for an
 * unregistered pool, and for every transfer after one whose result is 0).
 * Returns min(kv, every pool_hits) or a negative errno. */
HC_API int64_t hc_store_exists_v2(struct hc_store *store, const struct hc_key *keys, size_t n,
				  const struct hc_pool_transfer *transfers, size_t nt,
				  uint64_t *kv_hit_pages, uint64_t *pool_hits);

/* ---- statistics ---- */

#define HC_STORE_LAT_BUCKETS 32 /* bucket i counts batches of [2^i, 2^(i+1)) microseconds */

struct hc_store_stats {
	uint64_t pages_written, bytes_written;
	uint64_t pages_read, bytes_read;
	uint64_t pages_existing; /* set of a page that was already stored */
	uint64_t hits, misses;   /* get and exists, per page */
	uint64_t corrupt;        /* objects that failed the trailer or checksum check */
	uint64_t failures;       /* pages that failed with an I/O or other error */
	uint64_t set_batches, get_batches, exists_batches;
	uint64_t set_latency_us[HC_STORE_LAT_BUCKETS];
	uint64_t get_latency_us[HC_STORE_LAT_BUCKETS];
	uint64_t exists_latency_us[HC_STORE_LAT_BUCKETS];
	/* Objects of 256 KiB and more looked up before a set, to skip the
	 * transfer of one that exists. Made only while recent sets found
	 * enough objects existing (docs/PERFORMANCE.md). */
	uint64_t set_lookups;
	/* Bytes of bounce slots the store holds now (whole store; 0 per
	 * pool): a full chunk's worth for each of three work areas made when a
	 * bounce pool is registered, more only while several calls run at
	 * once. */
	uint64_t bounce_bytes;
};

/* pool NULL: the whole store; else one registered pool. */
HC_API int hc_store_stats(const struct hc_store *store, const char *pool, struct hc_store_stats *out);
/* Latency quantile (0 < q < 1) of a histogram, in microseconds. */
HC_API double hc_store_latency_quantile(const uint64_t hist[HC_STORE_LAT_BUCKETS], double q);

/* ---- file store maintenance (works on directories, no open store) ----
 * hc_file_ls() and hc_file_gc() also take one "s3://bucket/prefix" URL as
 * the only "directory": they list the bucket under the prefix (endpoint and
 * credentials from the environment, as docs/CONFIG.md lists). */

struct hc_fsck_report {
	uint64_t ok, corrupt, orphaned_temp, foreign; /* foreign: not a store object */
	uint64_t removed;                             /* with repair */
	uint64_t bytes;                               /* of ok objects */
};
/* Check every object under the base dirs (trailer, length, checksum).
 * With repair, remove corrupt objects and orphaned temp files: those whose
 * writer process is gone (the pid in the name) or older than 60 s; a live
 * writer's temp file is left alone. */
HC_API int hc_file_fsck(const char *const *dirs, size_t ndirs, bool repair,
			struct hc_fsck_report *out);

struct hc_ls_report {
	uint64_t pages;   /* distinct page keys (one page may be several objects) */
	uint64_t objects;
	uint64_t bytes;
	int64_t oldest_ns, newest_ns; /* mtimes, 0 when empty */
};
HC_API int hc_file_ls(const char *const *dirs, size_t ndirs, struct hc_ls_report *out);

/* Delete the oldest pages (all objects of a page together) until the store
 * holds at most capacity_bytes. *removed_pages/bytes (may be NULL) get what
 * was deleted. */
HC_API int hc_file_gc(const char *const *dirs, size_t ndirs, uint64_t capacity_bytes,
		      uint64_t *removed_pages, uint64_t *removed_bytes);

#ifdef __cplusplus
}
#endif

#endif /* HICACHE_STORE_H */
