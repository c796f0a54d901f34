/*
 * The store core's types, shared by its files; each file's functions are
 * declared in a header of its own name (store_xfer.h for store_xfer.c):
 *
 *   store.c         open/close over a backend ops table
 *   store_work.c    work areas (a chunk's scratch), bounce slots reserved
 *                   at registration
 *   store_stats.c   counters and latency histograms
 *   store_object.c  object images: trailer, iovecs, build, verification
 *   store_xfer.c    plans, chunks, set/get chunk build and finish, the
 *                   set-lookup policy
 *   store_stream.c  streams over the backend, the store's thread
 *   store_call.c    the set/get calls, v1 and v2, synchronous and started
 *   store_op.c      a call's op: plan, free, outcome
 *   store_cq.c      started ops that finish on their own: poll, cancel,
 *                   completion queues with an eventfd
 *   store_meta.c    lookups and deletes of pages, synchronous and started
 *   registry.c  pool registration, unregistration, the pools a call holds
 *   names.c     object names from keys or callers' names, name checks
 *   exists.c    exists (v1, v2, the exists query with end points)
 *   clear.c     hc_store_clear
 *
 * Registry rules (registry.c): the pool table (ctx, nctx, anchor) is read
 * and written under reg_lock only. A call looks its pools up once, under
 * that lock, and takes a reference on each (store_hold); it uses the
 * contexts without the lock until it releases them (store_release), which
 * a started op does as soon as its pages are done. Unregistering takes the
 * context out of the table (later lookups miss it) and waits on reg_cond
 * until its references are gone before freeing it.
 */
#ifndef HC_SRC_STORE_TYPES_H
#define HC_SRC_STORE_TYPES_H

#include "store/backend.h"
#include "store/format.h"
#include "util/util.h"

#include <hicache/mem.h>
#include <hicache/store.h>

#include <pthread.h>
#include <stdatomic.h>

#define STORE_MAX_POOLS 16
#define STORE_MAX_OBJS 9 /* objects per page: at most 1 + HC_MAMBA_MAX_CONV */
#define CHUNK_OBJS 128   /* objects per backend call */
#define COMPONENT_MAX 64
/* The longest file or object name (NAME_MAX of Linux file systems). */
#define STORE_NAME_LEN_MAX (HC_NAME_MAX - 1)

#define NSTATS (sizeof(struct hc_store_stats) / sizeof(uint64_t))
#define STAT(field) (offsetof(struct hc_store_stats, field) / sizeof(uint64_t))

struct stats_acc {
	_Atomic uint64_t v[NSTATS];
};

struct obj_desc {
	char component[COMPONENT_MAX];
	enum hc_component kind;
	uint32_t index;
	uint64_t payload;  /* bytes */
	uint64_t len;      /* object bytes */
	uint64_t slot_off; /* where its image lies in the page's bounce slot */
};

struct store_ctx {
	char name[HC_POOL_NAME_MAX + 1];
	struct hc_pool *pool;
	bool anchor;
	bool marker; /* logical anchor: one empty marker object per page */
	/* A page's objects are its segments (registry.c objects_split):
	 * fixed by the pool, whatever zero_copy is. */
	bool split;
	bool zero_copy;   /* split, and the objects move from pool memory */
	bool skip_writes; /* rank-replicated on a TP rank other than 0 */
	char suffix[HC_SUFFIX_MAX];
	char elem_type[HC_ELEM_TYPE_MAX + 1]; /* "" = none (hc_pool_reg.elem_type) */
	/* Longest name usable in place of a key: suffix and longest component
	 * still fit STORE_NAME_LEN_MAX. */
	size_t name_room;
	size_t page_bytes;
	size_t slot_bytes;
	size_t alignment;
	size_t block; /* the store's object block (format.h) */
	unsigned nobj;
	struct obj_desc obj[STORE_MAX_OBJS];
	struct store_trailer tmpl; /* geometry fields of every trailer */
	struct stats_acc stats;
	unsigned refs; /* calls holding it (reg_lock) */
};

struct hc_store;
struct entry;

/* The CPU work of one object of a chunk, done by the backend's per-object
 * hooks (store_obj.prepare/arrived) while the rest of the chunk is on the
 * disk, or by the chunk loop itself for backends without them. Each hook
 * touches only its own object (and, in bounce mode, its own slice of the
 * slot and its own page or segment). */
struct obj_job {
	struct hc_store *st;
	const struct entry *e;
	struct store_obj *obj;
	unsigned o;            /* object index within its page */
	struct hc_segment seg; /* zero-copy: the pool segment */
	uint8_t *slot;         /* bounce: the page's slot */
	uint8_t *block;        /* where the trailer block is */
	size_t at;             /* its place in the work's objs (set: SIZE_MAX, not written) */
	/* set: */
	bool looked_up; /* looked up first (set_looks_up said so) */
	bool existed;   /* found before writing: nothing written */
	/* get: */
	bool checked; /* verdict and damaged are set (a bounce page that
			      * passed is in the pool already) */
	bool damaged;
	int verdict; /* 0 or -EBADMSG */
};

/* One object of a chunk: the object as the store made it (so, whose
 * copy in the work's objs the backend moves), its CPU work, the iovecs
 * of its image and its name. */
struct work_obj {
	struct store_obj so;
	struct obj_job job;
	struct iovec iov[3];
	char name[HC_NAME_MAX];
};

/* Scratch of one chunk while it is on its way; cached across chunks. */
struct work {
	struct work *next;
	/* the chunk: entries [from, to) of op */
	struct hc_store_op *op;
	size_t from, to;
	size_t nobj;  /* objects of the chunk, in item */
	size_t nmove; /* objects the backend moves, in objs */
	bool bounced; /* the chunk has bounce slots (struct stream) */
	struct work_obj item[CHUNK_OBJS];
	/* The backend's array (it takes a contiguous one): a get's every
	 * object in chunk order, a set's objects to write (item[k].job.at);
	 * lookups and deletes (exists.c, store_meta.c) name theirs here
	 * directly, with item[k].name. */
	struct store_obj objs[CHUNK_OBJS];
	uint8_t *trailers; /* CHUNK_OBJS blocks */
	uint8_t *discard;  /* one block: read padding lands here */
	uint8_t *bounce;
	size_t bounce_cap;
	struct hc_mem *bounce_mem; /* what bounce lies in */
};

/* Rate-limited report of damaged objects (store_log_bad). */
struct store_bad_log {
	struct util_log_limit limit;
	_Atomic uint64_t unreported; /* objects found since the last line */
};

struct hc_store {
	const struct store_backend_ops *ops;
	void *be;
	char suffix_rank[HC_SUFFIX_MAX];
	char suffix_shared[HC_SUFFIX_MAX];
	uint32_t tp_rank;
	bool force_bounce;
	bool verify;
	size_t block; /* object block (format.h): padding and trailer */
	/* kv_one_object_max_bytes: split or not (registry.c, objects_split) */
	uint64_t kv_one_object_max;
	/* the registry (registry.c) */
	pthread_mutex_t reg_lock;
	pthread_cond_t reg_cond; /* a context's last reference went */
	struct store_ctx *ctx[STORE_MAX_POOLS];
	size_t nctx;
	struct store_ctx *anchor;
	pthread_mutex_t work_lock;
	struct work *free_work;
	struct hc_mem_opts bounce_mem; /* the config's host memory keys */
	struct stats_acc stats;
	/* Corrupt objects a get (or wrong-size ones an exists) finds: expected
	 * after a crash or under a foreign writer, maybe many per call, so
	 * at most one line per HC_LOG_INTERVAL_S each, with the count. */
	struct store_bad_log bad_get, bad_exists;
	/* recent sets of objects of SET_LOOKUP_MIN_BYTES and more */
	_Atomic uint32_t set_recent, set_existed;
	/* started operations (hc_store_*_start), run by async_thread */
	pthread_mutex_t async_lock;
	pthread_cond_t async_work; /* an op was queued, or stop */
	pthread_cond_t async_done; /* ops finished */
	struct hc_store_op *async_head, *async_tail;
	pthread_t async_thread;
	bool async_started, async_stop;
	/* started lookups and deletes (store_meta.c), on a thread of their
	 * own so they do not wait behind transfers; under async_lock */
	pthread_cond_t meta_work;
	struct hc_store_op *meta_head, *meta_tail;
	pthread_t meta_thread;
	bool meta_started;
};

/* Work areas with bounce slots made at registration: a stream has up to
 * three chunks on their way (one being read, one whose checks are running,
 * and one whose first slots are refilled while the last pages of the
 * oldest still finish). A fourth is made when needed; making one in a
 * stream costs its pages' first touch (docs/PERFORMANCE-HISTORY.md). */
#define BOUNCE_RESERVED_WORKS 3

/* One page of one pool in a call, named by its key or, key NULL, by a
 * caller's name (store.h, Keys). */
struct entry {
	struct store_ctx *ctx;
	const struct hc_key *key;
	const char *name;
	uint64_t page;
	int *result;
	/* A caller's buffer in place of the pool page (hc_store_*_bufs_start):
	 * the page's one object is built from it and read into it, through
	 * the pool's bounce slot; buf_len may be below the object's payload
	 * (set: zero padded; get: the first buf_len bytes). NULL: the page. */
	void *buf;
	size_t buf_len;
};

enum transfer_op { OP_SET, OP_GET, OP_LOOKUP, OP_DELETE };

/* The outcome of one transfer of an op: its results, the caller's or ours. */
struct op_out {
	int *results;
	size_t n;
};

struct hc_store_op {
	struct hc_store_op *next;      /* the queue */
	struct hc_store_op *live_next; /* a stream's ops not over yet */
	struct hc_store *st;
	enum transfer_op dir;
	struct entry *e; /* what is left to move (MLA skips taken out) */
	size_t ne;
	struct hc_key *hexkeys; /* names that were keys' hex (plan) */
	size_t left;            /* entries not over yet */
	struct op_out *out;     /* one per transfer */
	size_t nout;
	int *own; /* results of the transfers that brought none */
	/* The distinct pools of the call, held (store_hold) until it is over. */
	struct store_ctx *touched[STORE_MAX_POOLS];
	size_t ntouched;
	uint64_t t0;
	int rc; /* whole-call error */
	bool done;
	atomic_bool cancel; /* hc_store_op_cancel: pages not begun end */
	/* Handed to a completion queue (store_cq.c): it owns the op, which
	 * moves from its running list to its finished list once done (both
	 * doubly linked: thousands may be in flight). Under async_lock. */
	struct hc_store_cq *cq;
	uint64_t user_data;
	struct hc_store_op *cq_next, *cq_prev;
};

struct stream {
	struct store_feed feed;
	struct hc_store *st;
	enum transfer_op dir;
	struct hc_store_op *cur;  /* the op being cut into chunks */
	size_t pos;               /* its next entry */
	bool queue;               /* takes more ops from the store's queue */
	struct hc_store_op *live; /* ops taken and not over */
	unsigned bounced_live;    /* its chunks with bounce slots not over */
	bool paused;              /* the last next() waited for one to be over */
};

#endif
