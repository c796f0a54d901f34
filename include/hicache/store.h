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
 * A page is stored as objects that depend on its pool alone (kind, layout,
 * buffers; docs/FORMAT.md) and the config key kv_one_object_max_bytes: one
 * per buffer for KV page_first and page_first_direct, Mamba, indexer and
 * segments pools, one of the flat page for KV layer_first and page_head,
 * and for page_first(_direct) MHA pages of at most kv_one_object_max_bytes
 * (docs/CONFIG.md). Every pool gets a context:
 * zero-copy (objects move straight between pool memory and storage; only
 * for the per-buffer pools and, under O_DIRECT, when their buffer bases
 * and page strides are multiples of the direct-I/O alignment) or bounce
 * (objects are built in per-call bounce slots of raw bytes, each rounded
 * up to the alignment). Both write the same objects, so pages stay
 * readable across instances whose memory is aligned differently, a
 * use_direct_io or force_bounce change.
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
 * (corrupt object, counted in the stats), -ENOTUNIQ (set: the name holds a
 * valid object of another geometry, left alone; stats.other_geometry), or
 * another -errno.
 *
 * Keys: a page is named by its hc_key (64 hex digits in the name) or, in
 * the *_named calls and through hc_pool_transfer.names, by a caller's
 * string used verbatim in its place (other engines' keys, SGLang's tests'
 * "p0"). A name must be non-empty, at most HC_STORE_NAME_MAX bytes of
 * UTF-8 (S3 keys are UTF-8), hold no '/' and no control byte, not start
 * with '.', and fit NAME_MAX (255 bytes) with the suffix and longest
 * component of the pool it names. A
 * bad name fails the whole call with -EINVAL naming it; nothing is
 * written. A name of 64 lowercase hex digits is the same object as that
 * hc_key. Registration checks that a key's names fit (-EINVAL).
 *
 * Thread-safety: any number of threads may call set, get, exists (v1 and
 * v2), clear and the stats functions on one store at once, and register or
 * unregister pools while other pools transfer. Unregistering a pool waits
 * for the transfers that use it to finish. hc_store_close() must not race
 * with anything.
 */
#ifndef HICACHE_STORE_H
#define HICACHE_STORE_H

#include <hicache/common.h>
#include <hicache/key.h>
#include <hicache/pool.h>

#include <sys/uio.h>

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
	 * it is allowed). Pages keep their objects (names, bytes) either way. */
	bool force_bounce;
};

/* Defaults for a caller's struct of size bytes (pass sizeof(opts)): sets
 * struct_size to size; fields past this library's struct are zeroed. */
HC_API void hc_store_opts_init(struct hc_store_opts *opts, size_t size);
/* Open a store on the backend opts names. opts may come from an older
 * header (a smaller struct_size: the fields it
 * lacks keep their defaults) or a newer one (refused with -EINVAL if it
 * sets fields this library does not know, as is a struct_size that was
 * never initialised).
 * Returns 0, -EINVAL (bad option or config; the message names it), -ENOENT /
 * -EACCES / -ENOTDIR (a base dir; s3: no such bucket / access denied),
 * -ENOMEM. *out is NULL on failure. */
HC_API int hc_store_open(const struct hc_store_opts *opts, struct hc_store **out);
/* Close a store. Accepts NULL. Waits for background work (the cleaner) to
 * stop. */
HC_API void hc_store_close(struct hc_store *store);

/* Register a pool under a name (unique; [a-z0-9_]{1,32}). The anchor is the
 * KV pool (or a logical anchor pool, or a segments pool of K and V buffers:
 * asymmetric K/V) that v1 calls use; exactly one.
 * The store does not own the pool; it must stay valid while it is
 * registered (until hc_store_unregister_pool() returns or the store
 * closes). A pool in
 * bounce mode gets the bounce slots of three chunks now (a transfer
 * streams chunks, up to three on their way at once; a chunk is 128 objects
 * or 64 MiB, whichever is less, but 32 pages for large pages, up to
 * 512 MiB), pre-faulted on transparent huge pages, so that no transfer
 * faults them in.
 * Returns 0, -EINVAL, -EEXIST (name taken / second anchor), -ENOMEM. */
HC_API int hc_store_register_pool(struct hc_store *store, const char *name, struct hc_pool *pool,
				  bool anchor);
/* How a pool's objects are named across tensor-parallel ranks. */
enum hc_pool_sharing {
	/* Today's rule: an MLA KV pool is replicated, every other pool sharded. */
	HC_POOL_SHARING_AUTO,
	/* Each rank holds its own shard: suffix "_<model>_<tp_rank>_<tp_size>". */
	HC_POOL_RANK_SHARDED,
	/* Every rank holds the same bytes: suffix "_<model>"; only rank 0
	 * writes (a set on another rank succeeds and writes nothing). MLA KV,
	 * DeepSeek-V4 side pools. */
	HC_POOL_RANK_REPLICATED,
};

/* The longest element type name (hc_pool_reg.elem_type). */
#define HC_ELEM_TYPE_MAX 31

struct hc_pool_reg {
	size_t struct_size;
	bool anchor; /* the pool v1 calls use (see above) */
	enum hc_pool_sharing sharing;
	/* NULL: the suffix the sharing rule gives. Else used verbatim for this
	 * pool's objects (e.g. to add pipeline or context-parallel ranks:
	 * "_<model>_<tp>_<tps>_<pps>_<ppr>"): at most HC_SUFFIX_MAX - 1 bytes,
	 * no '/', and the full names must fit (checked here: -EINVAL). */
	const char *suffix;
	/* This pool only; the store's option still applies. Changes how pages
	 * move, never their objects. */
	bool force_bounce;
	/* The element type of the pool's data, part of its identity: NULL or
	 * "" = none (the geometry tag is the one stores have always written,
	 * so pages of existing stores stay readable); else its name, e.g.
	 * "bfloat16", "float16", "float8_e4m3fn" ([A-Za-z0-9_]{1,HC_ELEM_TYPE_MAX}, else
	 * -EINVAL naming it). It goes into the geometry tag of every object's
	 * trailer, so two pools of equal geometry and element width but
	 * other element types (bf16 and fp16, two fp8 formats) read each
	 * other's pages as misses (objects of another geometry), never as
	 * data. Pools that share pages must pass the same name, spelt the
	 * same way (the store does not know that "bf16" means "bfloat16"). */
	const char *elem_type;
};
/* Defaults for a caller's struct of size bytes (pass sizeof(*reg)): not the
 * anchor, sharing AUTO, the sharing rule's suffix, no element type. */
HC_API void hc_pool_reg_init(struct hc_pool_reg *reg, size_t size);
/* hc_store_register_pool with options (reg NULL = defaults: sharing
 * AUTO, not the anchor). Allowed while other pools transfer: a transfer
 * that started before sees the pool or not, one that starts after sees
 * it. Checks that every object name the pool can produce fits NAME_MAX.
 * Returns 0; -EINVAL (bad pool name or kind for the role, reg without
 * struct_size, unknown sharing, bad suffix, names over NAME_MAX; the
 * message names it); -EEXIST (name taken, second anchor, or objects named
 * as another pool's: '<key><suffix><component>' must differ); -ENOSPC (16
 * pools registered); -ENOMEM; or the error of the zero-copy probe. */
HC_API int hc_store_register_pool_ex(struct hc_store *store, const char *name, struct hc_pool *pool,
				     const struct hc_pool_reg *reg);
/* Remove a registered pool (the anchor too; "kv" names the anchor as in
 * transfers). Waits until no transfer uses it (a started op uses its pools
 * until its pages are done, not until hc_store_op_wait()); transfers that
 * start later fail with -EINVAL ("not registered") as if it never was,
 * exists_v2 counts it as 0 hits. Its stored objects stay; its statistics
 * go. The pool may be destroyed once this returns. Returns 0, -EINVAL
 * (NULL), -ENOENT (no such pool). */
HC_API int hc_store_unregister_pool(struct hc_store *store, const char *name);

/* Register every pool of a group (the group's anchor as the anchor). */
HC_API int hc_store_register_group(struct hc_store *store, const struct hc_pool_group *group);

struct hc_store_pool_info {
	bool zero_copy;
	/* A page's bounce slot: its objects' images back to back (0 in
	 * zero-copy mode). */
	size_t slot_bytes;
	size_t page_bytes; /* flat page bytes */
	size_t alignment;  /* direct-I/O alignment the context was chosen for */
	unsigned objects;  /* objects per page (the same in either mode) */
};
/* How a registered pool's pages move ("kv" names the anchor). Returns 0,
 * -EINVAL (NULL) or -ENOENT (no such pool). */
HC_API int hc_store_pool_info(const struct hc_store *store, const char *pool,
			      struct hc_store_pool_info *out);

/* The direct-I/O alignment of the backend (1 when it has none). */
HC_API size_t hc_store_alignment(const struct hc_store *store);
/* The object block of the store: every object is its payload padded to a
 * multiple of it, plus one trailer block of it (docs/FORMAT.md). It is the
 * config's "object_block", else the backend's (the file system's direct-I/O
 * block for the file backend, 512 otherwise). Returns 0 for NULL. */
HC_API size_t hc_store_object_block(const struct hc_store *store);
/* Is O_DIRECT in use (after the open-time probe)? */
HC_API bool hc_store_direct_io(const struct hc_store *store);
/* The I/O engine in use: "uring", "threads" or "none". */
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
 * unspecified. Each destination page may appear once per call (in v2:
 * once over every transfer of its pool; a key may be read into several
 * pages): a page named twice fails the call with -EINVAL naming it,
 * nothing read. The pages must not be written by anyone else until the
 * call returns (a page changed under its read is a miss). */
HC_API int64_t hc_store_get(struct hc_store *store, const struct hc_key *keys, size_t n,
			    const uint64_t *pages, int *results);
/* Number of consecutive keys from the start whose pages exist. */
HC_API int64_t hc_store_exists(struct hc_store *store, const struct hc_key *keys, size_t n);

/* Longest name usable in place of a key (see Keys above). */
#define HC_STORE_NAME_MAX 128
/* hc_store_set / _get / _exists with names in place of keys; the same
 * returns, plus -EINVAL naming a bad name (nothing written or read). */
HC_API int hc_store_set_named(struct hc_store *store, const char *const *names, size_t n,
			      const uint64_t *pages, int *results);
HC_API int64_t hc_store_get_named(struct hc_store *store, const char *const *names, size_t n,
				  const uint64_t *pages, int *results);
HC_API int64_t hc_store_exists_named(struct hc_store *store, const char *const *names, size_t n);

/* ---- v1, started now and waited for later ----
 *
 * Start a set or get of the anchor pool now, to wait for it later
 * (hc_store_op_wait) or hand it to a completion queue.
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
 * keys, names and results (when not NULL) must stay valid and untouched
 * until hc_store_op_wait(); pages is read at start. A started op holds its
 * pools (see hc_store_unregister_pool) until its pages are done. Every started operation
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

/* Is op done? Never blocks. Returns 1 when op is done (its results
 * arrays are complete, and hc_store_op_wait returns at once), 0 while it
 * runs; -EINVAL for NULL or an op handed to a completion queue (which then
 * owns it). Any thread. */
HC_API int hc_store_op_poll(struct hc_store_op *op);
/* Ask op to end early: its pages not yet begun end with -ECANCELED (a
 * lookup or delete not yet begun does nothing), pages already on their
 * way finish. The op must still be waited for or reaped; its outcome is
 * -ECANCELED unless it finished first. Returns 0, -EINVAL (NULL). Any
 * thread, any number of times, also after the op was handed to a
 * completion queue and until it is reaped. */
HC_API int hc_store_op_cancel(struct hc_store_op *op);

/* ---- completion queues: started ops that report themselves ----
 *
 * An engine that polls (vLLM's scheduler, once per step) or waits on a
 * file descriptor (LMCache's demux thread) hands each started op to a
 * queue with a tag of its own; the queue collects the ops as they finish
 * and hands back (tag, outcome) pairs in finish order, each once, without
 * blocking. Its eventfd is readable exactly while finished ops wait to be
 * reaped. Thread-safe: any threads may submit and reap at once.
 * Every queue must be closed before hc_store_close(). */
struct hc_store_cq;
struct hc_store_cqe {
	uint64_t user_data; /* the tag given to hc_store_op_submit */
	int64_t result;     /* what hc_store_op_wait would have returned */
};
/* Open a completion queue for store's started ops. Returns 0 and *out,
 * -EINVAL (NULL), -ENOMEM, or the eventfd's -errno. */
HC_API int hc_store_cq_open(struct hc_store *store, struct hc_store_cq **out);
/* The queue's eventfd (non-blocking, close-on-exec; the queue owns it):
 * readable while finished ops wait. Poll it for POLLIN; never read it,
 * hc_store_cq_reap clears it. -EINVAL for NULL. */
HC_API int hc_store_cq_fd(const struct hc_store_cq *cq);
/* Hand a started op of the queue's store to cq: from now on the queue
 * owns it (never wait for it, nor poll it); it is reaped once finished,
 * at once when it already has. Returns 0, or -EINVAL (NULL, another
 * store's op, a closing queue: the op stays the caller's). */
HC_API int hc_store_op_submit(struct hc_store_cq *cq, struct hc_store_op *op, uint64_t user_data);
/* Take up to max finished ops, oldest first, each once, freed as they are
 * taken; never blocks. Returns how many were written to out. When it
 * takes the last one, the eventfd stops being readable. */
HC_API size_t hc_store_cq_reap(struct hc_store_cq *cq, struct hc_store_cqe *out, size_t max);
/* Ops submitted and not yet reaped (finished or not). */
HC_API size_t hc_store_cq_pending(struct hc_store_cq *cq);
/* Cancel every op of the queue that has not finished (hc_store_op_cancel),
 * wait until all have, free them unreaped, close the eventfd and free the
 * queue. When it returns, no op of the queue reads or writes the caller's
 * memory any more (pools, keys, names, results), so a tier may let go of
 * them. Accepts NULL. */
HC_API void hc_store_cq_close(struct hc_store_cq *cq);

/* ---- v2: several pools ---- */

enum hc_hit_policy {
	HC_HIT_ALL_PAGES,      /* every page of the prefix must exist in this pool */
	HC_HIT_TRAILING_PAGES, /* the last N pages of the prefix must exist (N = n keys) */
};

struct hc_pool_transfer {
	const char *pool; /* registered name; "kv" or the anchor's name for KV */
	const struct hc_key *keys;
	size_t n;
	const uint64_t *pages;     /* n pages of that pool (not read by exists_v2) */
	enum hc_hit_policy policy; /* exists_v2 only */
	int *results;              /* n outcomes (may be NULL) */
	/* With keys NULL: n names in place of keys (see Keys above). */
	const char *const *names;
};

/* Write / read pages of several pools in one call: per transfer as
 * hc_store_set / hc_store_get. Returns 0 / the leading hits of the first
 * transfer, or a whole-call error. */
HC_API int hc_store_set_v2(struct hc_store *store, struct hc_pool_transfer *transfers, size_t nt);
HC_API int hc_store_get_v2(struct hc_store *store, struct hc_pool_transfer *transfers, size_t nt);
/* Start a v2 set / get now, to wait for it later. Started as
 * hc_store_set_start / _get_start (above), for several pools:
 * the transfers array is read at start, each transfer's keys and results
 * must stay valid until hc_store_op_wait(), which returns what
 * hc_store_set_v2 / _get_v2 would have. */
HC_API int hc_store_set_v2_start(struct hc_store *store, struct hc_pool_transfer *transfers,
				 size_t nt, struct hc_store_op **op);
HC_API int hc_store_get_v2_start(struct hc_store *store, struct hc_pool_transfer *transfers,
				 size_t nt, struct hc_store_op **op);
/* Start a set / get of one pool's pages from / into the caller's buffers.
 * Started as hc_store_set_v2_start / _get_v2_start for one transfer whose
 * pages are a caller's buffers instead of pool pages: bufs[i] holds page i
 * (t->pages is not read). For an engine whose buffers lie anywhere
 * (LMCache's arena): the pool must hold one buffer per page (a segments
 * or indexer pool) and be registered in bounce mode (force_bounce): each
 * page's object is built in, and read into, the pool's bounce slot, so a
 * buffer needs no alignment. A buffer may be shorter than the page: a set
 * stores it zero padded to the page, a get fills only its bytes (the
 * object's checksum still covers the whole page). bufs is read at start;
 * the buffers must stay valid, and a get's untouched by anyone else, until
 * the op is over; a get's buffers must not overlap. -EINVAL for another
 * pool, an empty buffer or one over the page. */
HC_API int hc_store_set_bufs_start(struct hc_store *store, struct hc_pool_transfer *t,
				   const struct iovec *bufs, struct hc_store_op **op);
HC_API int hc_store_get_bufs_start(struct hc_store *store, struct hc_pool_transfer *t,
				   const struct iovec *bufs, struct hc_store_op **op);
/* How much of a prefix exists in the anchor and in several pools, each
 * by its hit policy. keys: the KV keys of the prefix. *kv_hit_pages = longest existing KV
 * prefix; pool_hits[t] = hit pages of transfer t by its policy (0 for an
 * unregistered pool, and for every transfer after one whose result is 0).
 * Returns min(kv, every pool_hits) or a negative errno. */
HC_API int64_t hc_store_exists_v2(struct hc_store *store, const struct hc_key *keys, size_t n,
				  const struct hc_pool_transfer *transfers, size_t nt,
				  uint64_t *kv_hit_pages, uint64_t *pool_hits);

/* hc_store_exists_v2 with everything a newer engine asks for. In: keys
 * or names (n), transfers (nt). Out: kv_hit_pages, pool_hits[nt] (as
 * hc_store_exists_v2), and with endpoints set, the restorable prefix end
 * points: every p in 1..kv_hit_pages at which each transfer's pool can
 * restore (all_pages: p <= its boundary; trailing_pages: pages
 * [max(0, p - N), p) exist), ascending, at most endpoints_max of them
 * (n is always enough; more are not written), the count written in
 * nendpoints (0 without endpoints). Trailing pools may have gaps, so the
 * greatest end point can be below the min rule's result, and two pools'
 * end points may have none in common. Names are checked against the
 * anchor and every transfer's pool (Keys, above); a transfer's own
 * keys and names are not read, only its n. Thread-safe as exists_v2. */
struct hc_exists_query {
	size_t struct_size;
	const struct hc_key *keys;
	const char *const *names; /* with keys NULL */
	size_t n;
	const struct hc_pool_transfer *transfers;
	size_t nt;
	uint64_t kv_hit_pages; /* out */
	uint64_t *pool_hits;   /* out: nt entries (may be NULL when nt is 0) */
	uint64_t *endpoints;   /* out, may be NULL */
	size_t endpoints_max;
	size_t nendpoints; /* out */
};
/* Defaults for a caller's struct of size bytes (pass sizeof(*q)): every
 * field empty. */
HC_API void hc_exists_query_init(struct hc_exists_query *q, size_t size);
/* Answer q (struct hc_exists_query) and fill its out fields. Returns the
 * min rule's result (as hc_store_exists_v2) or a negative errno: -EINVAL
 * (NULL, struct_size below this struct's, no anchor, a bad name),
 * -ENOMEM. */
HC_API int64_t hc_store_exists_query(struct hc_store *store, struct hc_exists_query *q);

/* ---- lookups and deletes of pages ---- */

/* Which pages of each transfer exist: results[i] 0 (every object of the
 * page, of the right size), -ENOENT, -EBADMSG (an object of the wrong
 * size: corrupt, or of another geometry). Per page, in key order, unlike
 * exists (a leading run). A transfer's pages may be NULL (not read).
 * Returns the number of pages that exist over all transfers, or a
 * whole-call error (-EINVAL: NULL, an unregistered pool, a bad name). */
HC_API int64_t hc_store_lookup(struct hc_store *store, struct hc_pool_transfer *transfers,
			       size_t nt);
/* Delete each page's objects, valid or not: results[i] 0 (deleted), -ENOENT
 * (none was there), or -errno (some may be gone). For an engine's own
 * eviction (LMCache's capacity accounting); the store's cleaner needs no
 * help. A delete racing with a set of the same page that has not returned
 * may leave that set's objects. Returns the pages deleted, or a whole-call
 * error as hc_store_lookup; -EOPNOTSUPP from a backend that cannot. */
HC_API int64_t hc_store_delete(struct hc_store *store, struct hc_pool_transfer *transfers,
			       size_t nt);
/* Start a lookup / delete now, to wait for it later. Started forms,
 * waited for or reaped as the others. They run on a store
 * thread of their own, so a lookup is not queued behind long transfers;
 * the price is order: a lookup sees the sets that returned before it
 * started, perhaps also later ones. The transfers array is read at start;
 * keys, names and results must stay valid until the op is over. */
HC_API int hc_store_lookup_start(struct hc_store *store, struct hc_pool_transfer *transfers,
				 size_t nt, struct hc_store_op **op);
HC_API int hc_store_delete_start(struct hc_store *store, struct hc_pool_transfer *transfers,
				 size_t nt, struct hc_store_op **op);

/* Delete every object this store's registered pools name (their suffixes
 * and components), under every base dir or the bucket's prefix; other
 * instances' objects (other models, ranks, layouts' names) stay. Safe while
 * transfers run: a get that loses its object reads a miss, a set that
 * races with the clear either stays or is gone, whole. Returns the number
 * of objects deleted, or -EINVAL (NULL), -EOPNOTSUPP (a backend that
 * cannot list), another -errno (a directory or listing that failed; some
 * objects may be gone). With no pool registered nothing is the store's: 0.
 * Caveats: a name may hold '_', so a named object of a store whose suffix
 * ends with this one's ("p0" + "_x_m_0_1" against "_m_0_1") is deleted
 * too; an S3 prefix without a trailing '/' shares names with longer ones
 * ("a" + "b..." is "ab" + "..."). A file-store clear reads all 256 bucket
 * dirs of every base dir; it follows no symlink (a bucket that is one is
 * skipped) and deletes only regular files: a directory, symlink or other
 * non-file under an object's name is left, logged once per clear. */
HC_API int64_t hc_store_clear(struct hc_store *store);

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
	/* Pages not set because a name held a valid object of another
	 * geometry (another instance with another layout), left alone: the
	 * page's result is -ENOTUNIQ (file store). */
	uint64_t other_geometry;
};

/* The store's counters. pool NULL: the whole store; else one registered
 * pool. Returns 0, -EINVAL (NULL) or -ENOENT (no such pool). */
HC_API int hc_store_stats(const struct hc_store *store, const char *pool,
			  struct hc_store_stats *out);
/* Latency quantile (0 < q < 1) of a histogram, in microseconds. */
HC_API double hc_store_latency_quantile(const uint64_t hist[HC_STORE_LAT_BUCKETS], double q);

/* The file store's cleaner thread, this store's own (all 0 for other
 * backends and with l3_cleaner_interval_s 0). Pages count when this
 * cleaner unlinked one of their objects; one already deleted by another
 * cleaner or a gc is not counted. */
struct hc_store_cleaner_stats {
	uint64_t rounds;          /* rounds run */
	uint64_t rounds_skipped;  /* skipped: another cleaner held a base dir's lease */
	uint64_t rounds_unlocked; /* of rounds: run without the lease on some base dir
				   * (its file system cannot lock; docs/FORMAT.md) */
	uint64_t capacity_pages, capacity_bytes;   /* deleted to stay under capacity_gb */
	uint64_t watermark_pages, watermark_bytes; /* deleted for the fs watermarks */
	uint64_t temps_removed; /* orphaned temp files (older than l3_file_temp_max_age_s) */
};
/* The cleaner's counters. size = sizeof(*out) as the caller was built: a
 * struct from an older header gets the fields it has. Returns 0, or
 * -EINVAL for NULL. */
HC_API int hc_store_cleaner_stats(const struct hc_store *store, struct hc_store_cleaner_stats *out,
				  size_t size);

/* ---- file store maintenance (works on directories, no open store) ----
 * hc_file_ls() and hc_file_gc() also take one "s3://bucket/prefix" URL as
 * the only "directory": they list the bucket under the prefix (endpoint and
 * credentials from the environment, as docs/CONFIG.md lists). */

struct hc_fsck_report {
	uint64_t ok, corrupt, orphaned_temp, foreign; /* foreign: not a store object */
	uint64_t removed;                             /* with repair */
	uint64_t bytes;                               /* of ok objects */
	/* Objects in another base dir or bucket than their name routes to
	 * (dirs given in another order or number than the store's): never
	 * checked further nor removed. */
	uint64_t misplaced;
	/* Objects listed but deleted before they were checked (a gc, a
	 * cleaner, another fsck beside this one): not corrupt. */
	uint64_t gone;
};
/* Check every object under the base dirs (trailer, length, checksum, as
 * the store's reads do). With repair, remove corrupt objects (each only
 * when the file under its name is still the one found bad) and orphaned
 * temp files: those older than 10 minutes (age alone: a writer may be on
 * another host; hc_file_fsck_ex takes another age). A dir given twice (also through a symlink) is refused
 * (-EINVAL); symlinks inside the dirs are never followed (counted as
 * foreign). Safe beside live writers, cleaners, gc and other fscks. */
HC_API int hc_file_fsck(const char *const *dirs, size_t ndirs, bool repair,
			struct hc_fsck_report *out);

/* hc_file_fsck with options. Size-tagged: fill with hc_fsck_opts_init
 * (size = sizeof(struct hc_fsck_opts)), then set fields. */
struct hc_fsck_opts {
	size_t struct_size; /* sizeof(struct hc_fsck_opts), set by hc_fsck_opts_init() */
	bool repair;        /* remove corrupt objects and orphaned temp files */
	/* A temp file older than this many seconds is orphaned (counted, and
	 * with repair removed); 0 = the default, 600 (as the cleaner's
	 * l3_file_temp_max_age_s). A small age removes a live writer's temp
	 * file: its write then fails, and the page is a miss. */
	uint64_t temp_age_s;
};
/* Defaults for a caller's struct of size bytes: repair false, temp_age_s 0
 * (600 s). */
HC_API void hc_fsck_opts_init(struct hc_fsck_opts *opts, size_t size);
/* hc_file_fsck with options. opts NULL: the defaults. -EINVAL for an opts not initialised or a
 * temp_age_s above 2^32 s; otherwise as hc_file_fsck. */
HC_API int hc_file_fsck_ex(const char *const *dirs, size_t ndirs, const struct hc_fsck_opts *opts,
			   struct hc_fsck_report *out);

struct hc_ls_report {
	uint64_t pages; /* distinct page keys (one page may be several objects) */
	uint64_t objects;
	uint64_t bytes;
	int64_t oldest_ns, newest_ns; /* mtimes, 0 when empty */
};
/* Count the pages, objects and bytes under the base dirs (or an S3 URL),
 * with the oldest and newest mtimes. Returns 0, -EINVAL (no dirs, an
 * empty one, out NULL) or another -errno (a directory or listing that
 * failed). */
HC_API int hc_file_ls(const char *const *dirs, size_t ndirs, struct hc_ls_report *out);

/* Delete the oldest pages (all objects of a page together) until the store
 * holds at most capacity_bytes. *removed_pages/bytes (may be NULL) get what
 * was deleted. Returns 0, -EINVAL (no dirs, an empty one) or another
 * -errno (a directory, listing or delete that failed). */
HC_API int hc_file_gc(const char *const *dirs, size_t ndirs, uint64_t capacity_bytes,
		      uint64_t *removed_pages, uint64_t *removed_bytes);

#ifdef __cplusplus
}
#endif

#endif /* HICACHE_STORE_H */
