/*
 * The store core: v1/v2 semantics, per-pool contexts, object images,
 * trailer checks and statistics, over a backend ops table.
 *
 * A transfer is flattened into "page entries" (pool context, key, host
 * page, result slot) and processed in chunks of at most CHUNK_OBJS objects
 * (one work area each). The chunks are fed to the backend as one stream
 * (put_feed/get_feed): a v2 call over kv + mamba + swa is one io_uring
 * stream, not one per pool, and the disk keeps io_depth pages in flight
 * from one chunk to the next, and from one started call to the next.
 *
 *   set:  exists(objects) -> build images of the missing ones -> put
 *   get:  get(objects into pool memory or bounce slots) -> check trailer
 *         and checksum -> scatter bounce slots into the pool
 *
 * With a backend that has per-object hooks (the file backend), the work
 * around the I/O moves into them and overlaps the disk: put looks each
 * object up and builds its image while the objects before it are being
 * written (set_prepare), get checks each object as it arrives
 * (get_arrived) while the next ones are being read. Other backends get the same
 * steps around their calls, one chunk at a time.
 *
 * An object image (store/format.h) is payload | zero pad | trailer block.
 * Zero-copy:  iov = [pool segment] [shared zero pad] [trailer block]
 * Bounce:     iov = [slot: payload, pad, trailer]   (one per page)
 *
 * Per-call state (names, iovecs, trailer blocks, bounce slots) lives in a
 * work area taken from a cache for the duration of one call, so any number
 * of threads can transfer at once and no buffer is shared by direction.
 */
#define _GNU_SOURCE
#include "store/backend.h"
#include "pool/pool_internal.h"
#include "store/format.h"
#include "util/util.h"

#include <hicache/config.h>
#include <hicache/mem.h>
#include <hicache/store.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

/* A bounce page from this size on is hashed while it is copied, block by
 * block: into the pool after a verified read, into its slot before a
 * write. Hashing it whole and copying it are two passes over cold memory
 * (the disk wrote the slot; the device wrote the pool), of which the
 * second misses the cache once the page is larger than about half of L2
 * (1 MiB here). Smaller pages do better in one hash and one copy from L2
 * (64 KiB bounce gets: 0.80 of zero-copy block by block, 0.92 whole). */
#define BOUNCE_SUMMED_MIN_BYTES ((size_t)1 << 20)

#define STORE_MAX_POOLS 16
#define STORE_MAX_OBJS 9        /* objects per page: at most 1 + HC_MAMBA_MAX_CONV */
#define CHUNK_OBJS 128          /* objects per backend call */
#define CHUNK_BOUNCE_BYTES (64u << 20)
#define CHUNK_MIN_OBJS 32                 /* the default io_depth's worth ... */
#define CHUNK_BOUNCE_MAX ((size_t)512 << 20) /* ... unless pages are huge */
/* A set looks an object up before writing it only from this size on.
 * Every backend's put refuses to replace an object (-EEXIST, untouched),
 * so the lookup only saves the transfer of one that exists; for a small
 * object that costs less than looking up every one (64 KiB sets: the
 * lookup was ~15% of the time, docs/PERFORMANCE.md). */
#define SET_LOOKUP_MIN_BYTES ((uint64_t)256 << 10)
/* ... and only while at least 1 in SET_LOOKUP_PAYS of the recent sets of
 * such objects found one existing (by the lookup, or -EEXIST from a put
 * made without one). A lookup of a name that does not exist costs the
 * file store a directory search: 13-26 us per 512 KiB object in a stream
 * of new pages, about a fifth of the store thread's time per object, for
 * nothing; where pages are set again (another instance wrote them, a
 * restart), it saves a transfer of 125 us and more. The window halves
 * every SET_LOOKUP_WINDOW objects, so the policy follows the workload. */
#define SET_LOOKUP_PAYS 8
#define SET_LOOKUP_WINDOW 256
#define COMPONENT_MAX 64

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
};

struct store_ctx {
	char name[HC_POOL_NAME_MAX + 1];
	struct hc_pool *pool;
	bool anchor;
	bool marker;      /* logical anchor: one empty marker object per page */
	bool zero_copy;
	bool skip_writes; /* MLA on a TP rank other than 0 */
	const char *suffix;
	size_t page_bytes;
	size_t slot_bytes;
	size_t alignment;
	unsigned nobj;
	struct obj_desc obj[STORE_MAX_OBJS];
	struct store_trailer tmpl; /* geometry fields of every trailer */
	struct stats_acc stats;
};

struct hc_store;
struct entry;

/* The CPU work of one object of a chunk, done by the backend's per-object
 * hooks (store_obj.prepare/arrived) while the rest of the chunk is on the
 * disk, or by the chunk loop itself for backends without them. Each hook
 * touches only its own object (and, in bounce mode, its own page). */
struct obj_job {
	struct hc_store *st;
	const struct entry *e;
	struct store_obj *obj;
	unsigned o;          /* object index within its page */
	struct hc_segment seg; /* zero-copy: the pool segment */
	uint8_t *slot;       /* bounce: the page's slot */
	uint8_t *block;      /* where the trailer block is */
	/* set: */
	bool looked_up;      /* looked up first (set_looks_up said so) */
	bool existed;        /* found before writing: nothing written */
	/* get: */
	bool checked;        /* verdict and damaged are set (a bounce page that
			      * passed is in the pool already) */
	bool damaged;
	int verdict;         /* 0 or -EBADMSG */
};

/* Scratch of one chunk while it is on its way; cached across chunks. */
struct work {
	struct work *next;
	/* the chunk: entries [from, to) of op */
	struct hc_store_op *op;
	size_t from, to;
	size_t nobj;
	size_t ntodo;            /* set: objects to write, in batch */
	bool bounced;            /* the chunk has bounce slots (struct stream) */
	struct store_obj *todo[CHUNK_OBJS];
	struct store_obj batch[CHUNK_OBJS];
	char (*names)[HC_NAME_MAX];
	struct store_obj objs[CHUNK_OBJS];
	struct obj_job jobs[CHUNK_OBJS];
	struct iovec iov[CHUNK_OBJS][3];
	uint8_t *trailers;       /* CHUNK_OBJS blocks */
	uint8_t *discard;        /* one block: read padding lands here */
	uint8_t *bounce;
	size_t bounce_cap;
	struct hc_mem *bounce_mem; /* what bounce lies in */
};

struct hc_store {
	const struct store_backend_ops *ops;
	void *be;
	char suffix_rank[HC_SUFFIX_MAX];
	char suffix_shared[HC_SUFFIX_MAX];
	uint32_t tp_rank;
	bool force_bounce;
	bool verify;
	struct store_ctx *ctx[STORE_MAX_POOLS];
	size_t nctx;
	struct store_ctx *anchor;
	pthread_mutex_t work_lock;
	struct work *free_work;
	struct hc_mem_opts bounce_mem; /* the config's host memory keys */
	struct stats_acc stats;
	/* recent sets of objects of SET_LOOKUP_MIN_BYTES and more */
	_Atomic uint32_t set_recent, set_existed;
	/* started operations (hc_store_*_start), run by async_thread */
	pthread_mutex_t async_lock;
	pthread_cond_t async_work; /* an op was queued, or stop */
	pthread_cond_t async_done; /* ops finished */
	struct hc_store_op *async_head, *async_tail;
	pthread_t async_thread;
	bool async_started, async_stop;
};

static uint8_t zero_block[FORMAT_BLOCK] __attribute__((aligned(FORMAT_BLOCK)));

/* ---- statistics ---- */

static void stat_add(struct store_ctx *c, struct hc_store *st, size_t field, uint64_t v)
{
	if (!v)
		return;
	atomic_fetch_add_explicit(&c->stats.v[field], v, memory_order_relaxed);
	atomic_fetch_add_explicit(&st->stats.v[field], v, memory_order_relaxed);
}

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static unsigned lat_bucket(uint64_t us)
{
	unsigned b = us ? 63u - (unsigned)__builtin_clzll(us) : 0;
	return b < HC_STORE_LAT_BUCKETS ? b : HC_STORE_LAT_BUCKETS - 1;
}

static void stat_batch_acc(struct stats_acc *acc, size_t count_field, size_t hist_field,
			   unsigned bucket)
{
	atomic_fetch_add_explicit(&acc->v[count_field], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&acc->v[hist_field + bucket], 1, memory_order_relaxed);
}

/* One batch for the store and for each pool it touched (a pool's latency
 * is that of the calls that moved its pages). */
static void stat_batch(struct hc_store *st, struct store_ctx *const *ctxs, size_t nctx,
		       size_t count_field, size_t hist_field, uint64_t t0)
{
	unsigned bucket = lat_bucket(now_us() - t0);
	stat_batch_acc(&st->stats, count_field, hist_field, bucket);
	for (size_t i = 0; i < nctx; i++) {
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			seen = ctxs[j] == ctxs[i];
		if (ctxs[i] && !seen)
			stat_batch_acc(&ctxs[i]->stats, count_field, hist_field, bucket);
	}
}

int hc_store_stats(const struct hc_store *st, const char *pool, struct hc_store_stats *out)
{
	if (!st || !out)
		return util_fail(-EINVAL, "hc_store_stats: NULL argument");
	const struct stats_acc *acc = &st->stats;
	if (pool) {
		acc = NULL;
		for (size_t i = 0; i < st->nctx; i++)
			if (!strcmp(st->ctx[i]->name, pool))
				acc = &st->ctx[i]->stats;
		if (!acc)
			return util_fail(-ENOENT, "store: no pool '%s' is registered", pool);
	}
	uint64_t *dst = (uint64_t *)out;
	for (size_t i = 0; i < NSTATS; i++)
		dst[i] = atomic_load_explicit(&acc->v[i], memory_order_relaxed);
	return 0;
}

double hc_store_latency_quantile(const uint64_t hist[HC_STORE_LAT_BUCKETS], double q)
{
	uint64_t total = 0;
	for (int i = 0; i < HC_STORE_LAT_BUCKETS; i++)
		total += hist[i];
	if (!total)
		return 0;
	double want = q * (double)total, seen = 0;
	for (int i = 0; i < HC_STORE_LAT_BUCKETS; i++) {
		if (seen + (double)hist[i] >= want && hist[i]) {
			/* Interpolate inside [2^i, 2^(i+1)). */
			double lo = (double)(1ull << i), frac = (want - seen) / (double)hist[i];
			return lo + frac * lo;
		}
		seen += (double)hist[i];
	}
	return (double)(1ull << (HC_STORE_LAT_BUCKETS - 1));
}

/* ---- open, close, registration ---- */

void hc_store_opts_init(struct hc_store_opts *o, size_t size)
{
	if (!o)
		return;
	struct hc_store_opts d = {.struct_size = sizeof(d), .backend = "file", .tp_size = 1};
	if (size > sizeof(d))
		size = sizeof(d);
	memcpy(o, &d, size);
	o->struct_size = size;
}

static void work_free(struct work *w)
{
	if (!w)
		return;
	free(w->names);
	free(w->trailers);
	free(w->discard);
	hc_mem_free(w->bounce_mem);
	free(w);
}

void hc_store_close(struct hc_store *st)
{
	if (!st)
		return;
	pthread_mutex_lock(&st->async_lock);
	st->async_stop = true;
	pthread_cond_broadcast(&st->async_work);
	pthread_mutex_unlock(&st->async_lock);
	if (st->async_started)
		pthread_join(st->async_thread, NULL);
	pthread_cond_destroy(&st->async_done);
	pthread_cond_destroy(&st->async_work);
	pthread_mutex_destroy(&st->async_lock);
	if (st->be)
		st->ops->close(st->be);
	for (size_t i = 0; i < st->nctx; i++)
		free(st->ctx[i]);
	while (st->free_work) {
		struct work *w = st->free_work;
		st->free_work = w->next;
		work_free(w);
	}
	pthread_mutex_destroy(&st->work_lock);
	free(st);
}

int hc_store_open(const struct hc_store_opts *o, struct hc_store **out)
{
	if (!o || !out)
		return util_fail(-EINVAL, "hc_store_open: NULL argument");
	*out = NULL;
	if (o->struct_size < offsetof(struct hc_store_opts, force_bounce) + sizeof(bool))
		return util_fail(-EINVAL, "hc_store_open: opts.struct_size %zu is too small "
				 "(call hc_store_opts_init)", o->struct_size);
	const char *backend = o->backend ? o->backend : "file";
	const struct store_backend_ops *ops = NULL;
	if (!strcmp(backend, "file"))
		ops = &store_file_ops;
	else if (!strcmp(backend, "mem"))
		ops = &store_mem_ops;
	else if (!strcmp(backend, "s3"))
		ops = &store_s3_ops;
	else
		return util_fail(-EINVAL, "store: unknown backend '%s' (file, mem or s3)", backend);
	if (o->tp_size == 0 || o->tp_rank >= o->tp_size)
		return util_fail(-EINVAL, "store: tp_rank %u must be below tp_size %u", o->tp_rank,
				 o->tp_size);

	struct hc_store *st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	pthread_mutex_init(&st->work_lock, NULL);
	pthread_mutex_init(&st->async_lock, NULL);
	pthread_cond_init(&st->async_work, NULL);
	pthread_cond_init(&st->async_done, NULL);
	st->ops = ops;
	st->tp_rank = o->tp_rank;
	st->force_bounce = o->force_bounce;
	int rc = hc_key_suffix(o->model, o->tp_rank, o->tp_size, false, st->suffix_rank,
			       sizeof(st->suffix_rank));
	if (rc >= 0)
		rc = hc_key_suffix(o->model, o->tp_rank, o->tp_size, true, st->suffix_shared,
				   sizeof(st->suffix_shared));
	if (rc < 0)
		goto fail;

	struct hc_config *own_cfg = NULL;
	const struct hc_config *cfg = o->config;
	if (!cfg) {
		rc = hc_config_create(NULL, &own_cfg);
		if (rc)
			goto fail;
		cfg = own_cfg;
	}
	rc = hc_config_get_bool(cfg, "verify_checksum", &st->verify);
	/* Bounce slots are host memory like the pools: the same huge page
	 * mode and mlock. */
	hc_mem_opts_init(&st->bounce_mem, sizeof(st->bounce_mem));
	if (!rc)
		rc = hc_mem_opts_from_config(&st->bounce_mem, cfg);
	if (!rc)
		rc = ops->open(cfg, &st->be);
	hc_config_destroy(own_cfg);
	if (rc)
		goto fail;
	*out = st;
	return 0;
fail:
	hc_store_close(st);
	return rc;
}

size_t hc_store_alignment(const struct hc_store *st)
{
	return st ? st->ops->alignment(st->be) : 0;
}

bool hc_store_direct_io(const struct hc_store *st)
{
	return st && st->ops->direct && st->ops->direct(st->be);
}

const char *hc_store_io_engine(const struct hc_store *st)
{
	return st && st->ops->engine ? st->ops->engine(st->be) : "none";
}

/* Canonical geometry: what must match for bytes to mean the same thing. */
static uint64_t geometry_hash(const struct hc_pool *pool)
{
	uint64_t g[24] = {0};
	g[0] = hc_pool_kind(pool);
	g[1] = hc_pool_page_tokens(pool);
	g[2] = hc_pool_page_bytes(pool);
	const struct hc_kv_geometry *kv = hc_pool_kv_geometry(pool);
	const struct hc_mamba_geometry *mg = hc_pool_mamba_geometry(pool);
	if (kv) {
		g[3] = kv->layout;
		g[4] = kv->layers;
		g[5] = kv->heads;
		g[6] = kv->head_dim;
		g[7] = kv->elem_bytes;
		g[8] = kv->mla;
	} else if (mg) {
		g[4] = mg->layers;
		g[9] = mg->temporal_bytes;
		g[10] = mg->nconv;
		for (unsigned i = 0; i < mg->nconv && i < HC_MAMBA_MAX_CONV; i++)
			g[11 + i] = mg->conv_bytes[i];
	}
	return XXH3_64bits(g, sizeof(g));
}

static int set_component(struct store_ctx *c, unsigned i, enum hc_component kind, const char *pool,
			 uint32_t index)
{
	int rc = hc_key_component(kind, pool, index, c->obj[i].component,
				  sizeof(c->obj[i].component));
	c->obj[i].kind = kind;
	c->obj[i].index = index;
	return rc < 0 ? rc : 0;
}

/* Names as the reference: v1 zero-copy KV "_k"/"_v" (MLA "_k"), bounce
 * plain; side pools "_<pool>" in bounce mode, zero-copy Mamba
 * "_mamba_temporal"/"_mamba_conv_<i>", two-buffer pools "_<pool>_k/_v",
 * other multi-buffer pools "_<pool>_<i>", one-buffer pools "_<pool>". */
static int name_objects(struct store_ctx *c, const struct hc_segment *segs, unsigned nsegs)
{
	const char *pool = c->name;
	if (c->marker) {
		c->nobj = 1;
		c->obj[0].payload = 0;
		return set_component(c, 0, HC_COMP_PLAIN, NULL, 0);
	}
	if (!c->zero_copy) {
		c->nobj = 1;
		c->obj[0].payload = c->page_bytes;
		return c->anchor ? set_component(c, 0, HC_COMP_PLAIN, NULL, 0)
				 : set_component(c, 0, HC_COMP_POOL, pool, 0);
	}
	c->nobj = nsegs;
	for (unsigned i = 0; i < nsegs; i++) {
		int rc;
		c->obj[i].payload = segs[i].len;
		if (c->anchor)
			rc = set_component(c, i, segs[i].component, NULL, 0);
		else if (segs[i].component == HC_COMP_MAMBA_TEMPORAL && !strcmp(pool, "mamba"))
			rc = set_component(c, i, HC_COMP_MAMBA_TEMPORAL, NULL, 0);
		else if (segs[i].component == HC_COMP_MAMBA_CONV && !strcmp(pool, "mamba"))
			rc = set_component(c, i, HC_COMP_MAMBA_CONV, NULL, segs[i].index);
		else if (nsegs == 1)
			rc = set_component(c, i, HC_COMP_POOL, pool, 0);
		else if (nsegs == 2 && segs[0].component == HC_COMP_K)
			rc = set_component(c, i, i == 0 ? HC_COMP_POOL_K : HC_COMP_POOL_V, pool, 0);
		else
			rc = set_component(c, i, HC_COMP_POOL_INDEX, pool, i);
		if (rc)
			return rc;
	}
	return 0;
}

static int bounce_reserve(struct hc_store *st, struct store_ctx *c);

int hc_store_register_pool(struct hc_store *st, const char *name, struct hc_pool *pool,
			   bool anchor)
{
	if (!st || !name || !pool)
		return util_fail(-EINVAL, "hc_store_register_pool: NULL argument");
	if (!hc_key_pool_name_ok(name))
		return util_fail(-EINVAL, "store: pool name '%s' is not [a-z0-9_]{1,%d}", name,
				 HC_POOL_NAME_MAX);
	for (size_t i = 0; i < st->nctx; i++)
		if (!strcmp(st->ctx[i]->name, name))
			return util_fail(-EEXIST, "store: pool '%s' is already registered", name);
	if (anchor && st->anchor)
		return util_fail(-EEXIST, "store: '%s' is already the anchor", st->anchor->name);
	enum hc_pool_kind kind = hc_pool_kind(pool);
	if (anchor && kind != HC_POOL_KV && kind != HC_POOL_ANCHOR)
		return util_fail(-EINVAL, "store: anchor '%s' must be a kv or anchor pool", name);
	if (!anchor && kind == HC_POOL_ANCHOR)
		return util_fail(-EINVAL, "store: a logical anchor pool ('%s') can only be the anchor",
				 name);
	if (st->nctx == STORE_MAX_POOLS)
		return util_fail(-ENOSPC, "store: at most %d pools", STORE_MAX_POOLS);

	struct store_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	memcpy(c->name, name, strlen(name));
	c->pool = pool;
	c->anchor = anchor;
	c->marker = kind == HC_POOL_ANCHOR;
	c->page_bytes = hc_pool_page_bytes(pool);
	const struct hc_kv_geometry *kv = hc_pool_kv_geometry(pool);
	bool mla = kv && kv->mla;
	c->suffix = mla ? st->suffix_shared : st->suffix_rank;
	c->skip_writes = mla && st->tp_rank != 0;
	c->alignment = st->ops->alignment(st->be);

	struct hc_segment segs[STORE_MAX_OBJS];
	unsigned nsegs = hc_pool_segment_count(pool);
	if (nsegs > STORE_MAX_OBJS)
		nsegs = 0;
	int rc = 0;
	if (nsegs) {
		rc = hc_pool_page_segments(pool, 0, segs, STORE_MAX_OBJS);
		if (rc < 0)
			goto fail;
	}
	c->zero_copy = !c->marker && !st->force_bounce && nsegs > 0 &&
		       hc_pool_aligned(pool, c->alignment);
	if (c->zero_copy && st->ops->probe_memory) {
		/* The reference's zero-length-file bug came from memory that
		 * O_DIRECT could not read; try one aligned write from it. */
		rc = st->ops->probe_memory(st->be, segs[0].addr, segs[0].len);
		if (rc)
			goto fail;
		c->alignment = st->ops->alignment(st->be);
	}
	rc = name_objects(c, segs, nsegs);
	if (rc)
		goto fail;
	for (unsigned i = 0; i < c->nobj; i++) {
		c->obj[i].len = format_object_len(c->obj[i].payload);
		if (!c->obj[i].len) {
			rc = util_fail(-EINVAL, "store: pool '%s' pages are too large", name);
			goto fail;
		}
	}
	/* Two pools must never write the same file: a side pool named "k" or
	 * "swa_k" would otherwise shadow the anchor's or swa's objects. */
	for (size_t p = 0; p < st->nctx; p++) {
		const struct store_ctx *other = st->ctx[p];
		if (strcmp(other->suffix, c->suffix))
			continue;
		for (unsigned i = 0; i < c->nobj; i++)
			for (unsigned j = 0; j < other->nobj; j++)
				if (!strcmp(c->obj[i].component, other->obj[j].component)) {
					rc = util_fail(-EEXIST, "store: pool '%s' would name its "
						       "objects '<key>%s%s' like pool '%s'; "
						       "choose another name", name, c->suffix,
						       c->obj[i].component, other->name);
					goto fail;
				}
	}
	c->slot_bytes = c->zero_copy ? 0 : c->obj[0].len;
	if (c->slot_bytes && (rc = bounce_reserve(st, c)))
		goto fail;
	c->tmpl.pool_kind = (uint16_t)kind;
	c->tmpl.layout = kv ? (uint16_t)kv->layout : 0;
	c->tmpl.page_tokens = hc_pool_page_tokens(pool);
	c->tmpl.geometry = geometry_hash(pool);
	st->ctx[st->nctx++] = c;
	if (anchor)
		st->anchor = c;
	log_info("store: pool '%s' (%s, %zu-byte pages): %s, %u object(s) per page", name,
		 hc_pool_kind_name(kind), c->page_bytes,
		 c->marker ? "marker" : c->zero_copy ? "zero-copy" : "bounce", c->nobj);
	return 0;
fail:
	free(c);
	return rc;
}

int hc_store_register_group(struct hc_store *st, const struct hc_pool_group *g)
{
	if (!st || !g)
		return util_fail(-EINVAL, "hc_store_register_group: NULL argument");
	struct hc_pool *anchor = hc_pool_group_anchor(g);
	for (size_t i = 0; i < hc_pool_group_count(g); i++) {
		const char *name;
		struct hc_pool *p = hc_pool_group_at(g, i, &name);
		int rc = hc_store_register_pool(st, name, p, p == anchor);
		if (rc)
			return rc;
	}
	return 0;
}

static struct store_ctx *find_ctx(const struct hc_store *st, const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < st->nctx; i++)
		if (!strcmp(st->ctx[i]->name, name))
			return st->ctx[i];
	/* "kv" always means the anchor, whatever it was registered as. */
	if (!strcmp(name, "kv") && st->anchor)
		return st->anchor;
	return NULL;
}

int hc_store_pool_info(const struct hc_store *st, const char *pool, struct hc_store_pool_info *out)
{
	if (!st || !out)
		return util_fail(-EINVAL, "hc_store_pool_info: NULL argument");
	const struct store_ctx *c = find_ctx(st, pool);
	if (!c)
		return util_fail(-ENOENT, "store: no pool '%s' is registered", pool ? pool : "(null)");
	*out = (struct hc_store_pool_info){
		.zero_copy = c->zero_copy,
		.slot_bytes = c->slot_bytes,
		.page_bytes = c->page_bytes,
		.alignment = c->alignment,
		.objects = c->nobj,
	};
	return 0;
}

/* ---- work areas ---- */

static struct work *work_get(struct hc_store *st)
{
	pthread_mutex_lock(&st->work_lock);
	struct work *w = st->free_work;
	if (w)
		st->free_work = w->next;
	pthread_mutex_unlock(&st->work_lock);
	if (w)
		return w;
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->names = malloc(CHUNK_OBJS * sizeof(*w->names));
	if (!w->names || posix_memalign((void **)&w->trailers, FORMAT_BLOCK,
					(size_t)CHUNK_OBJS * FORMAT_BLOCK) ||
	    posix_memalign((void **)&w->discard, FORMAT_BLOCK, FORMAT_BLOCK)) {
		work_free(w);
		return NULL;
	}
	return w;
}

static void work_put(struct hc_store *st, struct work *w)
{
	pthread_mutex_lock(&st->work_lock);
	w->next = st->free_work;
	st->free_work = w;
	pthread_mutex_unlock(&st->work_lock);
}

static int work_bounce(struct hc_store *st, struct work *w, size_t bytes)
{
	if (bytes <= w->bounce_cap)
		return 0;
	atomic_fetch_sub_explicit(&st->stats.v[STAT(bounce_bytes)], w->bounce_cap,
				  memory_order_relaxed);
	hc_mem_free(w->bounce_mem);
	w->bounce_mem = NULL;
	w->bounce = NULL;
	w->bounce_cap = 0;
	/* On transparent huge pages, as the pools are by default: O_DIRECT
	 * from 4 KiB pages pays per page in this VM (2 MiB bounce sets ran at
	 * 0.69 GB/s from malloc memory, docs/PERFORMANCE.md). Pre-faulted
	 * here, which registration does for the first call (bounce_reserve). */
	int rc = hc_mem_alloc(bytes, &st->bounce_mem, &w->bounce_mem);
	if (rc) {
		char why[256]; /* hc_last_error() is the buffer util_fail writes */
		snprintf(why, sizeof(why), "%s", hc_last_error());
		return util_fail(rc, "store: %zu bytes of bounce slots: %s", bytes, why);
	}
	w->bounce = hc_mem_addr(w->bounce_mem);
	w->bounce_cap = bytes;
	atomic_fetch_add_explicit(&st->stats.v[STAT(bounce_bytes)], bytes, memory_order_relaxed);
	return 0;
}

/* ---- transfers ---- */

/* One page of one pool in a call. */
struct entry {
	struct store_ctx *ctx;
	const struct hc_key *key;
	uint64_t page;
	int *result;
};

/* Flatten transfers into entries, checking every page first so a bad
 * transfer writes nothing. */
static int plan(struct hc_store *st, struct hc_pool_transfer *t, size_t nt, bool need_pages,
		struct entry **out, size_t *nout)
{
	size_t total = 0;
	for (size_t i = 0; i < nt; i++) {
		if (t[i].n && (!t[i].keys || (need_pages && !t[i].pages)))
			return util_fail(-EINVAL, "store: transfer %zu ('%s') has NULL keys or pages",
					 i, t[i].pool ? t[i].pool : "(null)");
		struct store_ctx *c = find_ctx(st, t[i].pool);
		if (!c)
			return util_fail(-EINVAL, "store: pool '%s' is not registered",
					 t[i].pool ? t[i].pool : "(null)");
		if (need_pages) {
			uint64_t limit = hc_pool_pages(c->pool);
			for (size_t j = 0; j < t[i].n; j++)
				if (t[i].pages[j] >= limit)
					return util_fail(-EFAULT, "store: page %llu lies outside the "
							 "registered pool '%s' (%llu pages); "
							 "nothing was transferred",
							 (unsigned long long)t[i].pages[j], c->name,
							 (unsigned long long)limit);
		}
		total += t[i].n;
	}
	struct entry *e = malloc((total ? total : 1) * sizeof(*e));
	if (!e)
		return -ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < nt; i++) {
		struct store_ctx *c = find_ctx(st, t[i].pool);
		for (size_t j = 0; j < t[i].n; j++, k++) {
			e[k] = (struct entry){c, &t[i].keys[j], need_pages ? t[i].pages[j] : 0,
					      t[i].results ? &t[i].results[j] : NULL};
			if (e[k].result)
				*e[k].result = -ENOENT;
		}
	}
	*out = e;
	*nout = total;
	return 0;
}

static void set_result(struct entry *e, int rc)
{
	if (e->result)
		*e->result = rc;
}

/* How many entries from `from` fit one chunk (objects and bounce bytes). */
static size_t chunk_end(const struct entry *e, size_t from, size_t n, size_t *bounce_bytes)
{
	size_t objs = 0, bytes = 0, i = from;
	for (; i < n; i++) {
		size_t o = e[i].ctx->nobj, b = e[i].ctx->slot_bytes;
		/* Never cut a chunk below CHUNK_MIN_OBJS objects for want of bounce
		 * room: that would split one io_depth batch into two submissions
		 * (2 MiB pages: 31 + 1) with a full wait between them. */
		bool room = bytes + b <= CHUNK_BOUNCE_BYTES ||
			    (objs < CHUNK_MIN_OBJS && bytes + b <= CHUNK_BOUNCE_MAX);
		if (i > from && (objs + o > CHUNK_OBJS || !room))
			break;
		objs += o;
		bytes += b;
	}
	*bounce_bytes = bytes;
	return i;
}

/* Work areas with bounce slots made at registration: a stream has up to
 * three chunks on their way (one being read, one whose checks are running,
 * and one whose first slots are refilled while the last pages of the
 * oldest still finish). A fourth is made when needed; making one in a
 * stream costs its pages' first touch, ~100 ms for 64 MiB in this VM
 * (pipelined 2 MiB bounce gets ran at 1.9 GB/s with two reserved, against
 * 5.1 for synchronous ones, which use one). */
#define BOUNCE_RESERVED_WORKS 3

/* Give the store's first works the bounce slots of a full chunk of c's
 * pages each, so that no transfer faults them in (a THP fault may compact
 * memory: the first 2 MiB bounce set of a run spent ~0.9 ms per page in
 * its gather, later ones ~0.2 ms). */
static int bounce_reserve(struct hc_store *st, struct store_ctx *c)
{
	struct entry e[CHUNK_OBJS];
	for (size_t i = 0; i < CHUNK_OBJS; i++)
		e[i] = (struct entry){.ctx = c};
	size_t bytes;
	chunk_end(e, 0, CHUNK_OBJS, &bytes);
	struct work *w[BOUNCE_RESERVED_WORKS];
	int rc = 0, n = 0;
	while (n < BOUNCE_RESERVED_WORKS && !rc) {
		if (!(w[n] = work_get(st)))
			rc = util_fail(-ENOMEM, "store: no memory for a transfer");
		else
			rc = work_bounce(st, w[n++], bytes);
	}
	while (n-- > 0)
		work_put(st, w[n]);
	return rc;
}

/* Name every object of entries [from, to) into w; returns object count. */
static size_t name_chunk(struct work *w, const struct entry *e, size_t from, size_t to)
{
	size_t k = 0;
	for (size_t i = from; i < to; i++) {
		const struct store_ctx *c = e[i].ctx;
		for (unsigned o = 0; o < c->nobj; o++, k++) {
			hc_key_name(e[i].key, c->suffix, c->obj[o].component, w->names[k],
				    HC_NAME_MAX);
			w->objs[k] = (struct store_obj){
				.name = w->names[k],
				.route = hc_key_route_hash(w->names[k]),
				.iov = w->iov[k],
				.len = c->obj[o].len,
				.result = -ENOENT,
			};
		}
	}
	return k;
}

static void trailer_for(const struct store_ctx *c, unsigned o, uint64_t checksum,
			struct store_trailer *t)
{
	*t = c->tmpl;
	t->component = (uint16_t)c->obj[o].kind;
	t->component_index = c->obj[o].index;
	t->payload_len = c->obj[o].payload;
	t->checksum = checksum;
}

/* iov for object o of a zero-copy page: segment, pad, trailer block. */
static unsigned zero_copy_iov(struct iovec *iov, const struct hc_segment *seg, uint64_t len,
			      uint8_t *pad, uint8_t *trailer)
{
	unsigned n = 0;
	if (seg->len)
		iov[n++] = (struct iovec){seg->addr, seg->len};
	size_t padlen = (size_t)(len - FORMAT_BLOCK - seg->len);
	if (padlen)
		iov[n++] = (struct iovec){pad, padlen};
	iov[n++] = (struct iovec){trailer, FORMAT_BLOCK};
	return n;
}

/* Where an entry's page is for this chunk: its zero-copy segments (when the
 * pool is zero-copy) and its bounce slot, right after the previous entry's. */
static uint8_t *entry_page(const struct entry *e, struct work *w, size_t *slot_off,
			   struct hc_segment *segs)
{
	const struct store_ctx *c = e->ctx;
	if (c->zero_copy)
		hc_pool_page_segments(c->pool, e->page, segs, STORE_MAX_OBJS);
	uint8_t *slot = w->bounce + *slot_off;
	*slot_off += c->slot_bytes;
	return slot;
}

/* The object's image around its iovecs, which are already in place: the
 * trailer with the payload's checksum and, in bounce mode, the page
 * gathered into its slot and the padding. */
static void build_image(const struct obj_job *j)
{
	const struct store_ctx *c = j->e->ctx;
	struct store_trailer t;
	if (c->marker) {
		trailer_for(c, j->o, 0, &t);
	} else if (c->zero_copy) {
		trailer_for(c, j->o, util_checksum(j->seg.addr, j->seg.len), &t);
	} else {
		uint64_t sum;
		if (c->page_bytes >= BOUNCE_SUMMED_MIN_BYTES) {
			/* One pass over the pool's cold page instead of two (see
			 * BOUNCE_SUMMED_MIN_BYTES). */
			sum = pool_gather_summed(c->pool, j->e->page, j->slot);
		} else {
			hc_pool_gather(c->pool, j->e->page, j->slot, c->page_bytes);
			sum = util_checksum(j->slot, c->page_bytes);
		}
		memset(j->slot + c->page_bytes, 0, j->obj->len - FORMAT_BLOCK - c->page_bytes);
		trailer_for(c, j->o, sum, &t);
	}
	format_trailer_write(j->block, &t);
}

/* Whether a set of this object looks it up first (see SET_LOOKUP_PAYS). */
static bool set_looks_up(struct hc_store *st, uint64_t len)
{
	if (len < SET_LOOKUP_MIN_BYTES)
		return false;
	uint32_t recent = atomic_load_explicit(&st->set_recent, memory_order_relaxed);
	uint32_t existed = atomic_load_explicit(&st->set_existed, memory_order_relaxed);
	return (uint64_t)existed * SET_LOOKUP_PAYS >= recent;
}

/* One set of an object of SET_LOOKUP_MIN_BYTES or more, and whether it
 * existed. Races between threads only blur the window. */
static void set_note_existing(struct hc_store *st, bool existed)
{
	uint32_t recent = atomic_fetch_add_explicit(&st->set_recent, 1, memory_order_relaxed) + 1;
	if (existed)
		atomic_fetch_add_explicit(&st->set_existed, 1, memory_order_relaxed);
	if (recent >= SET_LOOKUP_WINDOW) {
		atomic_store_explicit(&st->set_recent, recent / 2, memory_order_relaxed);
		atomic_store_explicit(&st->set_existed,
				      atomic_load_explicit(&st->set_existed, memory_order_relaxed) / 2,
				      memory_order_relaxed);
	}
}

/* One backend lookup for the n (<= CHUNK_OBJS) objects *objs[i]; found[i]
 * says whether each exists. Their results are left alone. */
static void set_lookup(struct hc_store *st, struct store_obj **objs, size_t n, bool *found)
{
	struct store_obj look[CHUNK_OBJS];
	for (size_t i = 0; i < n; i++) {
		look[i] = *objs[i];
		look[i].result = -ENOENT;
	}
	if (n)
		st->ops->exists(st->be, look, n, false);
	for (size_t i = 0; i < n; i++)
		found[i] = look[i].result == 0;
}

/* set_lookup of objects about to be set, counted in the window that
 * set_looks_up reads. */
static void set_lookup_first(struct hc_store *st, struct store_obj **objs, size_t n, bool *found)
{
	set_lookup(st, objs, n, found);
	for (size_t i = 0; i < n; i++)
		set_note_existing(st, found[i]);
}

/* store_obj.prepare of a set, before the object is written. Objects
 * are immutable, so one that exists is not rewritten: the lookup and the
 * image are made here, one object at a time, while the objects before it
 * are already on their way to the disk. */
static int set_prepare(void *arg)
{
	struct obj_job *j = arg;
	if (set_looks_up(j->st, j->obj->len)) {
		struct store_obj *obj = j->obj;
		bool found;
		set_lookup_first(j->st, &obj, 1, &found);
		j->looked_up = true;
		stat_add(j->e->ctx, j->st, STAT(set_lookups), 1);
		if (found) {
			j->existed = true;
			return -EEXIST;
		}
	}
	build_image(j);
	return 0;
}

/* Whether an object whose write failed with err may still be there: the
 * store refused the write (read-only, full, no permission), not an
 * unreachable one, which a lookup would only wait for once more. */
static bool set_failure_worth_lookup(int err)
{
	switch (err) {
	case -ETIMEDOUT:
	case -ECONNREFUSED:
	case -ECONNRESET:
	case -ECONNABORTED:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
	case -ENOMEM:
		return false;
	default:
		return true;
	}
}


/* Object k (object o of page e) of a chunk: its job and where its image
 * is: the trailer block alone (marker), the pool segment plus pad and
 * trailer block (zero-copy; pad is the zero block on set, the discard
 * block on get), or the page's bounce slot. */
static void obj_job_init(struct hc_store *st, struct work *w, const struct entry *e, unsigned o,
			 size_t k, uint8_t *slot, const struct hc_segment *segs, uint8_t *pad)
{
	const struct store_ctx *c = e->ctx;
	struct store_obj *obj = &w->objs[k];
	struct obj_job *j = &w->jobs[k];
	*j = (struct obj_job){.st = st, .e = e, .obj = obj, .o = o, .slot = slot,
			      .block = w->trailers + k * FORMAT_BLOCK};
	if (c->marker) {
		w->iov[k][0] = (struct iovec){j->block, FORMAT_BLOCK};
		obj->iovcnt = 1;
	} else if (c->zero_copy) {
		j->seg = segs[o];
		obj->iovcnt = zero_copy_iov(w->iov[k], &segs[o], obj->len, pad, j->block);
	} else {
		j->block = slot + obj->len - FORMAT_BLOCK;
		w->iov[k][0] = (struct iovec){slot, obj->len};
		obj->iovcnt = 1;
	}
}

/* The images and the objects to write of entries [from, to) into w:
 * w->batch[0..w->ntodo). */
static int set_chunk_build(struct hc_store *st, struct work *w, struct entry *e, size_t from,
			   size_t to, size_t bounce_bytes)
{
	size_t nobj = name_chunk(w, e, from, to);
	int rc = work_bounce(st, w, bounce_bytes);
	if (rc)
		return rc;
	bool hooks = st->ops->object_hooks;
	/* Objects already stored are not rewritten: looked up in set_prepare,
	 * or here for the whole chunk when the backend has no hooks (small
	 * ones are not looked up: the put refuses them). */
	bool looked[CHUNK_OBJS] = {false};
	if (!hooks) {
		struct store_obj *big[CHUNK_OBJS];
		bool found[CHUNK_OBJS];
		size_t nbig = 0;
		for (size_t b = 0; b < nobj; b++)
			if ((looked[b] = set_looks_up(st, w->objs[b].len)))
				big[nbig++] = &w->objs[b];
		set_lookup_first(st, big, nbig, found);
		for (size_t b = 0; b < nbig; b++)
			big[b]->result = found[b] ? 0 : -ENOENT;
	}
	struct store_obj **todo = w->todo;
	size_t ntodo = 0, k = 0, slot_off = 0;
	for (size_t i = from; i < to; i++) {
		struct store_ctx *c = e[i].ctx;
		struct hc_segment segs[STORE_MAX_OBJS];
		uint8_t *slot = entry_page(&e[i], w, &slot_off, segs);
		for (unsigned o = 0; o < c->nobj; o++, k++) {
			struct store_obj *obj = &w->objs[k];
			struct obj_job *j = &w->jobs[k];
			obj_job_init(st, w, &e[i], o, k, slot, segs, zero_block);
			if (looked[k]) {
				j->looked_up = true;
				stat_add(c, st, STAT(set_lookups), 1);
			}
			if (!hooks && obj->result == 0) {
				j->existed = true;
				continue;
			}
			if (hooks) {
				obj->prepare = set_prepare;
				obj->hook_arg = j;
			} else {
				build_image(j);
			}
			todo[ntodo++] = obj;
		}
	}
	/* The backend takes a contiguous array: compact the ones to write. */
	for (size_t j = 0; j < ntodo; j++)
		w->batch[j] = *todo[j];
	w->ntodo = ntodo;
	return 0;
}

/* After the put of w->batch: the pages' results and statistics. */
static void set_chunk_finish(struct hc_store *st, struct work *w, struct entry *e)
{
	struct store_obj **todo = w->todo;
	size_t ntodo = w->ntodo, from = w->from, to = w->to, k;
	for (size_t j = 0; j < ntodo; j++) {
		int r = todo[j]->result = w->batch[j].result;
		/* Written without a lookup: whether one would have paid. */
		const struct obj_job *job = &w->jobs[todo[j] - w->objs];
		if (todo[j]->len >= SET_LOOKUP_MIN_BYTES && !job->looked_up && (r == 0 || r == -EEXIST))
			set_note_existing(st, r == -EEXIST);
	}
	/* A small object written without a lookup that failed may exist all
	 * the same (a read-only store, a full disk): that is no failure. */
	struct store_obj *failed[CHUNK_OBJS];
	bool found[CHUNK_OBJS];
	size_t nfailed = 0;
	for (size_t j = 0; j < ntodo; j++) {
		int r = todo[j]->result;
		if (r && r != -EEXIST && todo[j]->len < SET_LOOKUP_MIN_BYTES &&
		    set_failure_worth_lookup(r))
			failed[nfailed++] = todo[j];
	}
	set_lookup(st, failed, nfailed, found);
	for (size_t j = 0; j < nfailed; j++)
		if (found[j])
			failed[j]->result = -EEXIST;

	k = 0;
	for (size_t i = from; i < to; i++) {
		struct store_ctx *c = e[i].ctx;
		int page_rc = 0;
		bool wrote = false, all_existed = true;
		uint64_t bytes = 0;
		for (unsigned o = 0; o < c->nobj; o++, k++) {
			int r = w->objs[k].result;
			if (w->jobs[k].existed || r == -EEXIST)
				continue;
			all_existed = false;
			if (r == 0) {
				wrote = true;
				bytes += c->obj[o].payload;
			} else if (!page_rc) {
				page_rc = r;
			}
		}
		set_result(&e[i], page_rc);
		stat_add(c, st, page_rc ? STAT(failures) : all_existed ? STAT(pages_existing)
								    : STAT(pages_written), 1);
		if (wrote)
			stat_add(c, st, STAT(bytes_written), bytes);
	}
}

/* Check a fetched object; returns 0 or -EBADMSG. *damaged is set when the
 * object is broken (torn or flipped: no valid trailer, or a checksum that
 * does not match) rather than a whole object of another geometry, which
 * another writer may legitimately use. */
static int verify_trailer(const struct store_ctx *c, unsigned o, const uint8_t *block,
			  struct store_trailer *got, bool *damaged)
{
	struct store_trailer want;
	*damaged = false;
	if (format_trailer_read(block, got)) {
		*damaged = true;
		return -EBADMSG;
	}
	trailer_for(c, o, got->checksum, &want);
	want.magic = got->magic;
	want.version = got->version;
	want.self_check = got->self_check;
	want.reserved = got->reserved;
	return memcmp(got, &want, sizeof(*got)) ? -EBADMSG : 0;
}

static int verify_sum(uint64_t sum, const struct store_trailer *got, bool *damaged)
{
	*damaged = sum != got->checksum;
	return *damaged ? -EBADMSG : 0;
}

static int verify_object(const struct hc_store *st, const struct store_ctx *c, unsigned o,
			 const uint8_t *block, const void *payload, bool *damaged)
{
	struct store_trailer got;
	int rc = verify_trailer(c, o, block, &got, damaged);
	if (rc || !st->verify || !c->obj[o].payload)
		return rc;
	return verify_sum(util_checksum(payload, c->obj[o].payload), &got, damaged);
}

/* A verified bounce page of BOUNCE_SUMMED_MIN_BYTES or more. A page that
 * fails has been copied all the same; its pool page holds what was read,
 * as a zero-copy page that fails does. */
static int get_bounce_verified(struct obj_job *j)
{
	const struct store_ctx *c = j->e->ctx;
	struct store_trailer got;
	int rc = verify_trailer(c, j->o, j->block, &got, &j->damaged);
	if (rc)
		return rc;
	return verify_sum(pool_scatter_summed(c->pool, j->e->page, j->slot), &got, &j->damaged);
}

/* Check an object that was read whole. A bounce page that passes goes into
 * the pool at once (bounce pages are one object). */
static void get_check(struct obj_job *j)
{
	const struct store_ctx *c = j->e->ctx;
	j->checked = true;
	if (!c->zero_copy && !c->marker && j->st->verify && c->page_bytes >= BOUNCE_SUMMED_MIN_BYTES) {
		j->verdict = get_bounce_verified(j);
		return;
	}
	const void *payload = c->marker ? NULL : c->zero_copy ? j->seg.addr : j->slot;
	j->verdict = verify_object(j->st, c, j->o, j->block, payload, &j->damaged);
	if (!j->verdict && !c->zero_copy && !c->marker)
		hc_pool_scatter(c->pool, j->e->page, j->slot, c->page_bytes);
}

/* store_obj.arrived of a get: the checksum of this object is taken while
 * the rest of the chunk is still being read. */
static void get_arrived(void *arg)
{
	get_check(arg);
}

/* The objects of entries [from, to) into w->objs[0..w->nobj), each
 * checked by its arrived hook (backends with hooks) or by the finish. */
static int get_chunk_build(struct hc_store *st, struct work *w, struct entry *e, size_t from,
			   size_t to, size_t bounce_bytes)
{
	size_t nobj = name_chunk(w, e, from, to);
	int rc = work_bounce(st, w, bounce_bytes);
	if (rc)
		return rc;
	bool hooks = st->ops->object_hooks;
	size_t k = 0, slot_off = 0;
	for (size_t i = from; i < to; i++) {
		struct store_ctx *c = e[i].ctx;
		struct hc_segment segs[STORE_MAX_OBJS];
		uint8_t *slot = entry_page(&e[i], w, &slot_off, segs);
		for (unsigned o = 0; o < c->nobj; o++, k++) {
			struct store_obj *obj = &w->objs[k];
			struct obj_job *j = &w->jobs[k];
			obj_job_init(st, w, &e[i], o, k, slot, segs, w->discard);
			if (hooks) {
				obj->arrived = get_arrived;
				obj->hook_arg = j;
			}
		}
	}
	w->nobj = nobj;
	return 0;
}

/* After the get of w->objs: checks left, results, statistics, healing. */
static void get_chunk_finish(struct hc_store *st, struct work *w, struct entry *e)
{
	size_t from = w->from, to = w->to, k;
	/* Broken objects are removed, so the next set of the page heals it
	 * (objects are never overwritten in place). */
	struct store_obj heal[CHUNK_OBJS];
	size_t nheal = 0;
	k = 0;
	for (size_t i = from; i < to; i++) {
		struct store_ctx *c = e[i].ctx;
		int page_rc = 0;
		for (unsigned o = 0; o < c->nobj; o++, k++) {
			struct obj_job *j = &w->jobs[k];
			int r = w->objs[k].result;
			if (r == -ENODATA || r == -EFBIG)
				r = -EBADMSG; /* wrong size: not an object of this geometry */
			if (r == 0) {
				if (!j->checked)
					get_check(j);
				r = j->verdict;
				if (j->damaged && st->ops->remove)
					heal[nheal++] = w->objs[k];
			}
			if (r == -EBADMSG) {
				stat_add(c, st, STAT(corrupt), 1);
				log_warn("store: object %s is corrupt or of another geometry; "
					 "treated as a miss", w->objs[k].name);
			}
			if (r && !page_rc)
				page_rc = r;
		}
		set_result(&e[i], page_rc);
		if (!page_rc) {
			stat_add(c, st, STAT(hits), 1);
			stat_add(c, st, STAT(pages_read), 1);
			stat_add(c, st, STAT(bytes_read), c->page_bytes);
		} else if (page_rc == -ENOENT || page_rc == -EBADMSG) {
			stat_add(c, st, STAT(misses), 1);
		} else {
			stat_add(c, st, STAT(failures), 1);
		}
	}
	if (nheal)
		st->ops->remove(st->be, heal, nheal);
}

enum transfer_op { OP_SET, OP_GET };

/* MLA: rank 0 writes for every rank; the others report success. Returns
 * how many entries are left to write. */
static size_t drop_skipped_writes(struct entry *e, size_t n)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (e[i].ctx->skip_writes)
			set_result(&e[i], 0);
		else
			e[m++] = e[i];
	}
	return m;
}

static void stat_call(struct hc_store *st, struct store_ctx *const *ctxs, size_t nctx,
		      enum transfer_op op, uint64_t t0)
{
	if (op == OP_SET)
		stat_batch(st, ctxs, nctx, STAT(set_batches), STAT(set_latency_us), t0);
	else
		stat_batch(st, ctxs, nctx, STAT(get_batches), STAT(get_latency_us), t0);
}

/* Plans, moves and counts a call on this thread (after the started
 * operations below, which share the plan and the outcome). */
static int64_t run_now(struct hc_store *st, struct hc_pool_transfer *t, size_t nt,
		       enum transfer_op dir, const char *what);

static int check_v1(struct hc_store *st, const struct hc_key *keys, size_t n,
		    const uint64_t *pages, const char *what)
{
	if (!st)
		return util_fail(-EINVAL, "%s: store is NULL", what);
	if (!st->anchor)
		return util_fail(-EINVAL, "%s: no anchor pool is registered", what);
	if (n && (!keys || !pages))
		return util_fail(-EINVAL, "%s: NULL keys or pages", what);
	return 0;
}

/* What a set returns: a whole-call error, else the first failed page's. */
static int set_outcome(int rc, const int *results, size_t n)
{
	for (size_t i = 0; !rc && i < n; i++)
		if (results[i])
			rc = results[i];
	return rc;
}

int hc_store_set(struct hc_store *st, const struct hc_key *keys, size_t n, const uint64_t *pages,
		 int *results)
{
	int rc = check_v1(st, keys, n, pages, "hc_store_set");
	if (rc)
		return rc;
	struct hc_pool_transfer t = {st->anchor->name, keys, n, pages, HC_HIT_ALL_PAGES, results};
	return (int)run_now(st, &t, 1, OP_SET, "hc_store_set");
}

static int64_t leading(const int *results, size_t n)
{
	size_t i = 0;
	while (i < n && results[i] == 0)
		i++;
	return (int64_t)i;
}

int64_t hc_store_get(struct hc_store *st, const struct hc_key *keys, size_t n,
		     const uint64_t *pages, int *results)
{
	int rc = check_v1(st, keys, n, pages, "hc_store_get");
	if (rc)
		return rc;
	if (st->anchor->marker)
		return util_fail(-EINVAL, "hc_store_get: the anchor '%s' is a logical pool with no "
				 "data; use hc_store_get_v2", st->anchor->name);
	struct hc_pool_transfer t = {st->anchor->name, keys, n, pages, HC_HIT_ALL_PAGES, results};
	return run_now(st, &t, 1, OP_GET, "hc_store_get");
}

/* ---- streams, and the started operations ----
 *
 * Every call, synchronous or started, is moved by a stream: chunks of its
 * entries (a work area each) fed to the backend, which (put_feed/get_feed)
 * keeps io_depth pages in flight across chunks, so the disk does not idle
 * while a chunk's last pages are checked and the next chunk is made.
 *
 * hc_store_*_start plans the call on the caller's thread (so a bad call
 * fails there, as the synchronous one would) and queues it. One thread per
 * store runs a stream that takes the queued ops in order while they go the
 * same way; an op is over (and its waiter woken) as soon as its own pages
 * are, while the stream goes on with the ops behind it. The caller
 * meanwhile prepares and starts the next ones. */

/* The outcome of one transfer of an op: its results, the caller's or ours. */
struct op_out {
	int *results;
	size_t n;
};

struct hc_store_op {
	struct hc_store_op *next; /* the queue */
	struct hc_store_op *live_next; /* a stream's ops not over yet */
	struct hc_store *st;
	enum transfer_op dir;
	struct entry *e; /* what is left to move (MLA skips taken out) */
	size_t ne;
	size_t left;     /* entries not over yet */
	struct op_out *out; /* one per transfer */
	size_t nout;
	int *own;           /* results of the transfers that brought none */
	struct store_ctx *touched[STORE_MAX_POOLS];
	size_t ntouched;
	uint64_t t0;
	int rc; /* whole-call error */
	bool done;
};

struct stream {
	struct store_feed feed;
	struct hc_store *st;
	enum transfer_op dir;
	struct hc_store_op *cur; /* the op being cut into chunks */
	size_t pos;              /* its next entry */
	bool queue;              /* takes more ops from the store's queue */
	struct hc_store_op *live; /* ops taken and not over */
	unsigned bounced_live;   /* its chunks with bounce slots not over */
	bool paused;             /* the last next() waited for one to be over */
};

/* Op o's entries are all over: counted, and its waiter (if any) woken; o
 * may be freed by the waiter from then on. */
static void op_over(struct stream *s, struct hc_store_op *o)
{
	stat_call(s->st, o->touched, o->ntouched, o->dir, o->t0);
	if (s->cur == o)
		s->cur = NULL;
	if (!s->queue)
		return;
	for (struct hc_store_op **p = &s->live; *p; p = &(*p)->live_next) {
		if (*p == o) {
			*p = o->live_next;
			break;
		}
	}
	pthread_mutex_lock(&s->st->async_lock);
	o->done = true;
	pthread_cond_broadcast(&s->st->async_done);
	pthread_mutex_unlock(&s->st->async_lock);
}

static void op_entries_over(struct stream *s, struct hc_store_op *o, size_t k)
{
	o->left -= k;
	if (!o->left)
		op_over(s, o);
}

static bool same_page(const struct entry *a, const struct entry *b)
{
	return a->ctx == b->ctx && !memcmp(a->key, b->key, sizeof(*a->key));
}

/* Whether op o sets a page (pool and key) that a live op sets too. Both
 * objects would be written at once, and which one stays (page by page,
 * even object by object) would be the race's: o waits for a stream after
 * theirs instead, as if their calls had returned. */
static bool keys_overlap(const struct hc_store_op *live, const struct hc_store_op *o)
{
	size_t before = 0;
	for (const struct hc_store_op *p = live; p; p = p->live_next)
		before += p->ne;
	if (!before)
		return false;
	/* Open addressing over the live keys; 2x room, at least 64 slots. */
	size_t cap = 64;
	while (cap < 2 * before)
		cap <<= 1;
	const struct entry **slot = calloc(cap, sizeof(*slot));
	if (!slot)
		return true; /* waiting is always correct */
	bool hit = false;
	for (const struct hc_store_op *p = live; p; p = p->live_next)
		for (size_t i = 0; i < p->ne; i++) {
			size_t h;
			memcpy(&h, p->e[i].key->bytes, sizeof(h));
			for (h &= cap - 1; slot[h] && !same_page(slot[h], &p->e[i]); h = (h + 1) & (cap - 1))
				;
			slot[h] = &p->e[i];
		}
	for (size_t i = 0; i < o->ne && !hit; i++) {
		size_t h;
		memcpy(&h, o->e[i].key->bytes, sizeof(h));
		for (h &= cap - 1; slot[h] && !hit; h = (h + 1) & (cap - 1))
			hit = same_page(slot[h], &o->e[i]);
	}
	free(slot);
	return hit;
}

/* The queue's head becomes the stream's op if it goes the stream's way
 * (and, for a set, writes no page a live op writes); false if not. */
static bool stream_take_op(struct stream *s)
{
	s->cur = NULL;
	if (!s->queue)
		return false;
	struct hc_store *st = s->st;
	pthread_mutex_lock(&st->async_lock);
	struct hc_store_op *o = st->async_head;
	pthread_mutex_unlock(&st->async_lock);
	/* Only this thread takes ops off the queue, and a queued op does not
	 * change: the head stays, and its keys are checked without the lock
	 * that callers starting ops wait for. */
	if (!o || o->dir != s->dir || (o->dir == OP_SET && keys_overlap(s->live, o)))
		return false;
	pthread_mutex_lock(&st->async_lock);
	st->async_head = o->next;
	if (!st->async_head)
		st->async_tail = NULL;
	o->next = NULL;
	pthread_mutex_unlock(&st->async_lock);
	o->left = o->ne;
	o->live_next = s->live;
	s->live = o;
	s->cur = o;
	s->pos = 0;
	if (!o->ne)
		op_over(s, o);
	return true;
}

/* The entries of op o from `from` on fail with rc (a whole-chunk error,
 * no memory): the call's outcome, and every page's that had none. */
static void op_fail_rest(struct stream *s, struct hc_store_op *o, size_t from, int rc)
{
	for (size_t j = from; j < o->ne; j++)
		if (o->e[j].result && *o->e[j].result == -ENOENT)
			*o->e[j].result = rc;
	o->rc = rc;
	s->pos = o->ne;
	op_entries_over(s, o, o->ne - from);
}

static struct work *work_of(struct store_obj *objs, enum transfer_op dir)
{
	size_t off = dir == OP_SET ? offsetof(struct work, batch) : offsetof(struct work, objs);
	return (struct work *)((char *)objs - off);
}

static void stream_done(struct store_feed *f, struct store_obj *objs, size_t n)
{
	(void)n;
	struct stream *s = (struct stream *)f;
	struct work *w = work_of(objs, s->dir);
	struct hc_store_op *o = w->op;
	if (s->dir == OP_SET)
		set_chunk_finish(s->st, w, o->e);
	else
		get_chunk_finish(s->st, w, o->e);
	size_t k = w->to - w->from;
	s->bounced_live -= w->bounced;
	work_put(s->st, w);
	op_entries_over(s, o, k);
}

/* The next chunk: of the current op, else of the next op it may take. */
static size_t stream_next(struct store_feed *f, struct store_obj **objs)
{
	struct stream *s = (struct stream *)f;
	struct hc_store *st = s->st;
	s->paused = false;
	for (;;) {
		struct hc_store_op *o = s->cur;
		if (!o || s->pos == o->ne) {
			if (!stream_take_op(s))
				return 0;
			continue;
		}
		size_t bounce, from = s->pos, end = chunk_end(o->e, from, o->ne, &bounce);
		/* No more chunks with bounce slots on their way than were
		 * reserved: a work area made inside a stream costs its first
		 * touch. The feed is asked again as each chunk is over (only a
		 * stream fed to the engine has chunks on their way here). */
		if (bounce && s->bounced_live >= BOUNCE_RESERVED_WORKS) {
			s->paused = true;
			return 0;
		}
		struct work *w = work_get(st);
		int rc = !w ? util_fail(-ENOMEM, "store: no memory for a transfer")
		       : s->dir == OP_SET ? set_chunk_build(st, w, o->e, from, end, bounce)
					  : get_chunk_build(st, w, o->e, from, end, bounce);
		if (rc) {
			if (w)
				work_put(st, w);
			op_fail_rest(s, o, from, rc);
			continue;
		}
		w->op = o;
		w->from = from;
		w->to = end;
		w->bounced = bounce > 0;
		s->bounced_live += w->bounced;
		s->pos = end;
		size_t n = s->dir == OP_SET ? w->ntodo : w->nobj;
		struct store_obj *arr = s->dir == OP_SET ? w->batch : w->objs;
		if (!n) { /* every object of the chunk exists already */
			stream_done(f, arr, 0);
			continue;
		}
		*objs = arr;
		return n;
	}
}

/* Moves the stream's ops (one direction) until it has none left. */
static void stream_run(struct stream *s)
{
	const struct store_backend_ops *ops = s->st->ops;
	s->feed = (struct store_feed){stream_next, stream_done};
	int (*feed)(void *, struct store_feed *) = s->dir == OP_SET ? ops->put_feed : ops->get_feed;
	if (feed) {
		/* A feed that ended just after it paused goes on: a read stream
		 * may see nothing in flight once its last arrivals' hooks have
		 * run, and those hooks are what ended the chunks it waited for. */
		do
			feed(s->st->be, &s->feed);
		while (s->paused);
		return;
	}
	struct store_obj *objs;
	size_t n;
	while ((n = stream_next(&s->feed, &objs))) {
		if (s->dir == OP_SET)
			ops->put(s->st->be, objs, n);
		else
			ops->get(s->st->be, objs, n);
		stream_done(&s->feed, objs, n);
	}
}

static void *async_main(void *arg)
{
	struct hc_store *st = arg;
	pthread_mutex_lock(&st->async_lock);
	for (;;) {
		while (!st->async_head && !st->async_stop)
			pthread_cond_wait(&st->async_work, &st->async_lock);
		if (!st->async_head)
			break;
		struct stream s = {.st = st, .dir = st->async_head->dir, .queue = true};
		pthread_mutex_unlock(&st->async_lock);
		stream_run(&s);
		pthread_mutex_lock(&st->async_lock);
	}
	pthread_mutex_unlock(&st->async_lock);
	return NULL;
}

static void op_free(struct hc_store_op *o)
{
	free(o->e);
	free(o->out);
	free(o->own);
	free(o);
}

/* Plan transfers t[0..nt) into a new op (a started one, or run_now's);
 * the caller checked them. Transfers without results get ours: the
 * outcome needs every page's. */
static int op_plan(struct hc_store *st, struct hc_pool_transfer *t, size_t nt,
		   enum transfer_op dir, struct hc_store_op **out, const char *what)
{
	*out = NULL;
	size_t extra = 0;
	for (size_t i = 0; i < nt; i++)
		if (!t[i].results)
			extra += t[i].n;
	struct hc_store_op *o = calloc(1, sizeof(*o));
	struct hc_pool_transfer *c = malloc((nt ? nt : 1) * sizeof(*c));
	if (o) {
		o->out = malloc((nt ? nt : 1) * sizeof(*o->out));
		o->own = malloc((extra ? extra : 1) * sizeof(*o->own));
	}
	if (!o || !c || !o->out || !o->own) {
		if (o)
			op_free(o);
		free(c);
		return util_fail(-ENOMEM, "%s: no memory", what);
	}
	o->st = st;
	o->dir = dir;
	o->nout = nt;
	for (size_t i = 0, off = 0; i < nt; i++) {
		c[i] = t[i];
		if (!c[i].results) {
			c[i].results = o->own + off;
			off += c[i].n;
		}
		o->out[i] = (struct op_out){c[i].results, c[i].n};
		if (o->ntouched < STORE_MAX_POOLS)
			o->touched[o->ntouched++] = find_ctx(st, c[i].pool);
	}
	int rc = plan(st, c, nt, true, &o->e, &o->ne);
	free(c);
	if (rc) {
		op_free(o);
		return rc;
	}
	o->t0 = now_us();
	if (dir == OP_SET)
		o->ne = drop_skipped_writes(o->e, o->ne);
	*out = o;
	return 0;
}

/* What a started op returns, as its synchronous call would. */
static int64_t op_outcome(const struct hc_store_op *o)
{
	if (o->dir == OP_GET)
		return o->rc ? o->rc : o->nout ? leading(o->out[0].results, o->out[0].n) : 0;
	int rc = o->rc;
	for (size_t i = 0; !rc && i < o->nout; i++)
		rc = set_outcome(0, o->out[i].results, o->out[i].n);
	return rc;
}

static int64_t run_now(struct hc_store *st, struct hc_pool_transfer *t, size_t nt,
		       enum transfer_op dir, const char *what)
{
	struct hc_store_op *o;
	int rc = op_plan(st, t, nt, dir, &o, what);
	if (rc)
		return rc;
	struct stream s = {.st = st, .dir = dir, .cur = o};
	o->left = o->ne;
	if (o->ne)
		stream_run(&s);
	else
		op_over(&s, o);
	int64_t ret = op_outcome(o);
	op_free(o);
	return ret;
}

/* Queue a planned op, starting the store's thread on first use. */
static int op_queue(struct hc_store *st, struct hc_store_op *o, const char *what)
{
	int rc;
	pthread_mutex_lock(&st->async_lock);
	if (!st->async_started) {
		/* Every signal blocked: the embedding program's handlers must not
		 * run on a thread it does not know about. */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		rc = pthread_create(&st->async_thread, NULL, async_main, st);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (rc) {
			pthread_mutex_unlock(&st->async_lock);
			return util_fail(-rc, "%s: cannot start the store's thread: %s", what,
					 strerror(rc));
		}
		st->async_started = true;
	}
	if (st->async_tail)
		st->async_tail->next = o;
	else
		st->async_head = o;
	st->async_tail = o;
	pthread_cond_signal(&st->async_work);
	pthread_mutex_unlock(&st->async_lock);
	return 0;
}

static int op_start(struct hc_store *st, struct hc_pool_transfer *t, size_t nt,
		    enum transfer_op dir, struct hc_store_op **out, const char *what)
{
	struct hc_store_op *o;
	int rc = op_plan(st, t, nt, dir, &o, what);
	if (!rc && (rc = op_queue(st, o, what)))
		op_free(o);
	*out = rc ? NULL : o;
	return rc;
}

static int op_start_v1(struct hc_store *st, const struct hc_key *keys, size_t n,
		       const uint64_t *pages, int *results, enum transfer_op dir,
		       struct hc_store_op **out, const char *what)
{
	if (!out)
		return util_fail(-EINVAL, "%s: op is NULL", what);
	*out = NULL;
	int rc = check_v1(st, keys, n, pages, what);
	if (rc)
		return rc;
	if (dir == OP_GET && st->anchor->marker)
		return util_fail(-EINVAL, "%s: the anchor '%s' is a logical pool with no data",
				 what, st->anchor->name);
	struct hc_pool_transfer t = {st->anchor->name, keys, n, pages, HC_HIT_ALL_PAGES, results};
	return op_start(st, &t, 1, dir, out, what);
}

static int op_start_v2(struct hc_store *st, struct hc_pool_transfer *t, size_t nt,
		       enum transfer_op dir, struct hc_store_op **out, const char *what)
{
	if (!out)
		return util_fail(-EINVAL, "%s: op is NULL", what);
	*out = NULL;
	if (!st || (nt && !t))
		return util_fail(-EINVAL, "%s: NULL argument", what);
	return op_start(st, t, nt, dir, out, what);
}

int hc_store_set_start(struct hc_store *st, const struct hc_key *keys, size_t n,
		       const uint64_t *pages, int *results, struct hc_store_op **op)
{
	return op_start_v1(st, keys, n, pages, results, OP_SET, op, "hc_store_set_start");
}

int hc_store_get_start(struct hc_store *st, const struct hc_key *keys, size_t n,
		       const uint64_t *pages, int *results, struct hc_store_op **op)
{
	return op_start_v1(st, keys, n, pages, results, OP_GET, op, "hc_store_get_start");
}

int hc_store_set_v2_start(struct hc_store *st, struct hc_pool_transfer *t, size_t nt,
			  struct hc_store_op **op)
{
	return op_start_v2(st, t, nt, OP_SET, op, "hc_store_set_v2_start");
}

int hc_store_get_v2_start(struct hc_store *st, struct hc_pool_transfer *t, size_t nt,
			  struct hc_store_op **op)
{
	return op_start_v2(st, t, nt, OP_GET, op, "hc_store_get_v2_start");
}

int64_t hc_store_op_wait(struct hc_store_op *o)
{
	if (!o)
		return util_fail(-EINVAL, "hc_store_op_wait: op is NULL");
	struct hc_store *st = o->st;
	pthread_mutex_lock(&st->async_lock);
	while (!o->done)
		pthread_cond_wait(&st->async_done, &st->async_lock);
	pthread_mutex_unlock(&st->async_lock);
	int64_t ret = op_outcome(o);
	op_free(o);
	return ret;
}

int hc_store_set_v2(struct hc_store *st, struct hc_pool_transfer *t, size_t nt)
{
	if (!st || (nt && !t))
		return util_fail(-EINVAL, "hc_store_set_v2: NULL argument");
	return (int)run_now(st, t, nt, OP_SET, "hc_store_set_v2");
}

int hc_store_get_v2(struct hc_store *st, struct hc_pool_transfer *t, size_t nt)
{
	if (!st || (nt && !t))
		return util_fail(-EINVAL, "hc_store_get_v2: NULL argument");
	return (int)run_now(st, t, nt, OP_GET, "hc_store_get_v2");
}

/* ---- exists ---- */

/* Which of pages [0, n) of ctx exist (all their objects, right size).
 * With stop_at_miss, stops at the first missing page. Returns the leading
 * run of existing pages, or -errno; hit[i] is filled for pages looked at. */
static int64_t exists_pages(struct hc_store *st, struct store_ctx *c, const struct hc_key *keys,
			    size_t n, bool stop_at_miss, bool *hit)
{
	struct work *w = work_get(st);
	if (!w)
		return util_fail(-ENOMEM, "store: no memory for exists");
	size_t per_chunk = CHUNK_OBJS / c->nobj;
	int64_t lead = 0;
	bool in_lead = true;
	for (size_t from = 0; from < n; from += per_chunk) {
		size_t to = from + per_chunk < n ? from + per_chunk : n;
		size_t k = 0;
		for (size_t i = from; i < to; i++) {
			for (unsigned o = 0; o < c->nobj; o++, k++) {
				hc_key_name(&keys[i], c->suffix, c->obj[o].component, w->names[k],
					    HC_NAME_MAX);
				w->objs[k] = (struct store_obj){
					.name = w->names[k],
					.route = hc_key_route_hash(w->names[k]),
					.len = c->obj[o].len,
					.result = -ENOENT,
				};
			}
		}
		st->ops->exists(st->be, w->objs, k, stop_at_miss);
		bool miss = false;
		for (size_t i = from, o = 0; i < to; i++) {
			bool all = true;
			for (unsigned j = 0; j < c->nobj; j++, o++)
				all = all && w->objs[o].result == 0;
			if (hit)
				hit[i] = all;
			stat_add(c, st, all ? STAT(hits) : STAT(misses), 1);
			if (all && in_lead)
				lead++;
			if (!all) {
				in_lead = false;
				miss = true;
				if (stop_at_miss)
					break;
			}
		}
		if (miss && stop_at_miss)
			break;
	}
	work_put(st, w);
	return lead;
}

int64_t hc_store_exists(struct hc_store *st, const struct hc_key *keys, size_t n)
{
	if (!st || (n && !keys))
		return util_fail(-EINVAL, "hc_store_exists: NULL argument");
	if (!st->anchor)
		return util_fail(-EINVAL, "hc_store_exists: no anchor pool is registered");
	uint64_t t0 = now_us();
	int64_t r = exists_pages(st, st->anchor, keys, n, true, NULL);
	stat_batch(st, &st->anchor, 1, STAT(exists_batches), STAT(exists_latency_us), t0);
	return r;
}

int64_t hc_store_exists_v2(struct hc_store *st, const struct hc_key *keys, size_t n,
			   const struct hc_pool_transfer *t, size_t nt, uint64_t *kv_hit_pages,
			   uint64_t *pool_hits)
{
	if (!st || (n && !keys) || (nt && (!t || !pool_hits)))
		return util_fail(-EINVAL, "hc_store_exists_v2: NULL argument");
	if (!st->anchor)
		return util_fail(-EINVAL, "hc_store_exists_v2: no anchor pool is registered");
	uint64_t t0 = now_us();
	int64_t kv = exists_pages(st, st->anchor, keys, n, true, NULL);
	if (kv < 0)
		return kv;
	if (kv_hit_pages)
		*kv_hit_pages = (uint64_t)kv;
	int64_t result = kv;
	bool *hit = NULL;
	for (size_t i = 0; i < nt; i++)
		pool_hits[i] = 0;
	for (size_t i = 0; i < nt && result > 0; i++) {
		struct store_ctx *c = find_ctx(st, t[i].pool);
		if (!c) {
			result = 0; /* an unregistered pool gives 0, and stops the rest */
			break;
		}
		int64_t hits;
		if (t[i].policy == HC_HIT_ALL_PAGES) {
			hits = exists_pages(st, c, keys, (size_t)kv, true, NULL);
		} else {
			/* trailing_pages: the largest p in (0, kv] whose last N
			 * pages [max(0, p - N), p) all exist. */
			size_t want = t[i].n ? t[i].n : 1;
			if (!hit && !(hit = malloc((size_t)kv * sizeof(*hit)))) {
				result = -ENOMEM;
				break;
			}
			hits = exists_pages(st, c, keys, (size_t)kv, false, hit);
			if (hits >= 0) {
				hits = 0;
				size_t run = 0; /* existing pages ending at p - 1 */
				for (size_t p = 1; p <= (size_t)kv; p++) {
					run = hit[p - 1] ? run + 1 : 0;
					if (run >= want || (run == p && run > 0))
						hits = (int64_t)p;
				}
			}
		}
		if (hits < 0) {
			result = hits;
			break;
		}
		pool_hits[i] = (uint64_t)hits;
		if (hits < result)
			result = hits;
	}
	free(hit);
	struct store_ctx *touched[STORE_MAX_POOLS + 1] = {st->anchor};
	size_t ntouched = 1;
	for (size_t i = 0; i < nt && ntouched <= STORE_MAX_POOLS; i++)
		touched[ntouched++] = find_ctx(st, t[i].pool);
	stat_batch(st, touched, ntouched, STAT(exists_batches), STAT(exists_latency_us), t0);
	return result;
}
