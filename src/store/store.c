/*
 * The store core: opening and closing a store over a backend ops table
 * (found by name in store/backend.c).
 * The rest of the core is in the files store_types.h lists; this
 * comment is the data path through them.
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
#include "store/registry.h"
#include "store/store_meta.h"
#include "store/store_work.h"
#include "util/opts.h"
#include "util/util.h"

#include <hicache/config.h>
#include <hicache/mem.h>
#include <hicache/store.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

void hc_store_opts_init(struct hc_store_opts *o, size_t size)
{
	static const struct hc_store_opts d = {.struct_size = sizeof(d),
					       .backend = "file",
					       .tp_size = 1};
	util_opts_init(o, size, &d, sizeof(d));
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
	store_meta_stop(st);
	pthread_cond_destroy(&st->meta_work);
	pthread_cond_destroy(&st->async_done);
	pthread_cond_destroy(&st->async_work);
	pthread_mutex_destroy(&st->async_lock);
	if (st->be)
		st->ops->close(st->be);
	store_registry_free(st);
	pthread_cond_destroy(&st->reg_cond);
	pthread_mutex_destroy(&st->reg_lock);
	while (st->free_work) {
		struct work *w = st->free_work;
		st->free_work = w->next;
		work_free(w);
	}
	pthread_mutex_destroy(&st->work_lock);
	free(st);
}

/* The object block: the config's, else the backend's. Under direct I/O
 * objects must stay aligned to the file system's block, so a configured
 * block below it is refused rather than left to fail every write. */
static int object_block_set(struct hc_store *st, size_t block)
{
	size_t own = st->ops->object_block ? st->ops->object_block(st->be) : FORMAT_BLOCK_MIN;
	if (!block)
		block = own;
	else if (block < own && hc_store_direct_io(st))
		return util_fail(-EINVAL,
				 "store: object_block %zu is below the direct-I/O alignment %zu of "
				 "the store's file system; set object_block to %zu (or 0), or "
				 "use_direct_io to false",
				 block, own, own);
	st->block = block;
	return 0;
}

int hc_store_open(const struct hc_store_opts *opts, struct hc_store **out)
{
	if (!out)
		return util_fail(-EINVAL, "hc_store_open: out is NULL");
	*out = NULL;
	/* A caller's struct of any older size: the fields it lacks keep their
	 * defaults (util/opts.h). */
	struct hc_store_opts loaded;
	hc_store_opts_init(&loaded, sizeof(loaded));
	int lrc = util_opts_load(&loaded, sizeof(loaded), opts, "hc_store_open: opts");
	if (lrc)
		return lrc;
	const struct hc_store_opts *o = &loaded;
	const struct store_backend_ops *ops = NULL;
	int rc = store_backend_by_name(o->backend, &ops);
	if (rc)
		return rc;
	if (o->tp_size == 0 || o->tp_rank >= o->tp_size)
		return util_fail(-EINVAL, "store: tp_rank %u must be below tp_size %u", o->tp_rank,
				 o->tp_size);

	struct hc_store *st = util_fault_calloc(1, sizeof(*st));
	if (!st)
		return util_fail(-ENOMEM, "hc_store_open: no memory");
	pthread_mutex_init(&st->work_lock, NULL);
	pthread_mutex_init(&st->reg_lock, NULL);
	pthread_cond_init(&st->reg_cond, NULL);
	pthread_mutex_init(&st->async_lock, NULL);
	pthread_cond_init(&st->async_work, NULL);
	pthread_cond_init(&st->async_done, NULL);
	pthread_cond_init(&st->meta_work, NULL);
	st->ops = ops;
	st->bad_get.limit.interval_ns = (uint64_t)HC_LOG_INTERVAL_S * 1000000000ull;
	st->bad_exists.limit.interval_ns = st->bad_get.limit.interval_ns;
	st->tp_rank = o->tp_rank;
	st->force_bounce = o->force_bounce;
	rc = hc_key_suffix(o->model, o->tp_rank, o->tp_size, false, st->suffix_rank,
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
	int64_t one_object_max = 0;
	if (!rc)
		rc = hc_config_get_int(cfg, "kv_one_object_max_bytes", &one_object_max);
	st->kv_one_object_max = (uint64_t)one_object_max; /* the table's bounds: >= 0 */
	/* Bounce slots are host memory like the pools: the same huge page
	 * mode and mlock. */
	hc_mem_opts_init(&st->bounce_mem, sizeof(st->bounce_mem));
	if (!rc)
		rc = hc_mem_opts_from_config(&st->bounce_mem, cfg);
	int64_t block = 0;
	if (!rc)
		rc = hc_config_get_int(cfg, "object_block", &block);
	if (!rc && block && !format_block_valid((uint64_t)block))
		rc = util_fail(
			-EINVAL,
			"store: object_block %lld must be 0 (the backend's) or a power of two "
			"from %u to %u",
			(long long)block, FORMAT_BLOCK_MIN, FORMAT_BLOCK_MAX);
	if (!rc)
		rc = ops->open(cfg, &st->be);
	hc_config_destroy(own_cfg);
	if (!rc)
		rc = object_block_set(st, (size_t)block);
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

size_t hc_store_object_block(const struct hc_store *st)
{
	return st ? st->block : 0;
}

bool hc_store_direct_io(const struct hc_store *st)
{
	return st && st->ops->direct && st->ops->direct(st->be);
}

const char *hc_store_io_engine(const struct hc_store *st)
{
	return st && st->ops->engine ? st->ops->engine(st->be) : "none";
}
