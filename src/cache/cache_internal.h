/*
 * Private to src/cache: the cache and request structs and the functions
 * the controller's files share.
 *
 *   cache.c           open/close, flush, evict, stats (and the rules)
 *   cache_req.c       match, load, alloc, insert, release, abort
 *   cache_prefetch.c  the query and I/O threads of a prefetch
 *   cache_backup.c    device-to-host and host-to-L3 queues and threads,
 *                     write_back's pages, write-back-ahead
 *   cache_slots.c     host and device KV slots
 *   cache_mamba.c     hybrid models: state slots, states, their backup;
 *                     the tree's write_back (pages, then the state)
 *   cache_l3.c        L3 access (store, or the no_data key sets)
 *   keyset.c          the no_data key set
 */
#ifndef HC_SRC_CACHE_INTERNAL_H
#define HC_SRC_CACHE_INTERNAL_H

#include "cache/controller.h"
#include "cache/device.h"
#include "cache/radix.h"

#include <hicache/store.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

enum pf_state { PF_NONE, PF_QUERY, PF_IO, PF_DONE };

struct cache_job {
	struct cache_job *next;
	bool l3_only;
	bool mamba; /* l3_only: one host Mamba state (host[0]) under keys[0] */
	/* device -> host: npages ending at node (locked), their device slots */
	struct radix_node *node;
	size_t n;
	uint64_t *dev;
	/* host -> L3 */
	struct hc_key *keys;
	uint64_t *host;
};

struct cache_queue {
	struct cache_job *head, *tail;
};

struct hc_cache_req {
	struct hc_cache *c;
	uint32_t *tokens;
	size_t ntokens, npages;
	int refs; /* under c->lock */
	struct hc_cache_req *qnext;
	struct radix_node *lock_node; /* device lock, NULL for none */
	struct radix_node *pin_node;  /* host pin, NULL for none */
	size_t dev_pages, host_end;   /* device prefix; end of the host prefix */
	struct hc_cache_req_info info;
	uint64_t start_ns; /* util_mono_ns() at match */
	/* prefetch */
	enum pf_state pf;
	bool revoked;
	bool has_prior;
	struct hc_key prior;
	size_t pf_first, pf_pages, pf_done;
	uint64_t *pf_slots;
	struct hc_key *pf_keys;
	/* load */
	struct dev_copy *load;
	uint64_t *load_dev;
	size_t load_pages;
	struct radix_node *load_node;
	/* alloc */
	uint64_t *new_slots;
	size_t new_first, new_n;
	bool allocated;
	/* hybrid */
	struct radix_node *mnode; /* Mamba boundary (pinned or locked), NULL: none */
	uint8_t *mstate;          /* hc_cache_mamba_write()'s copy */
	bool has_mstate;
	bool pf_mamba; /* pf_mslot is reserved and not yet in the tree */
	uint64_t pf_mslot;
	struct radix_node *pf_pin; /* hybrid prefetch: pin on the chunks inserted so far */
};

/* The request's reference count, shared by its owner and a prefetch
 * worker: here, below both cache_req.c and cache_prefetch.c. */
static inline void cache_req_free(struct hc_cache_req *r)
{
	free(r->tokens);
	free(r->pf_slots);
	free(r->pf_keys);
	free(r->load_dev);
	free(r->new_slots);
	free(r->mstate);
	free(r);
}

/* Drop a reference (c->lock held); true when the caller must free r. */
static inline bool cache_req_put(struct hc_cache_req *r)
{
	return --r->refs == 0;
}

struct hc_cache {
	struct hc_cache_opts o;
	uint32_t ps;
	uint64_t host_pages;
	size_t page_bytes;
	struct hc_pool *host_pool;
	struct hc_slots *host_slots; /* the pool's, or own in no_data mode */
	struct hc_slots *own_slots;
	struct dev_tier *dev;
	struct hc_store *store;
	struct cache_keyset *keyset; /* no_data L3 */
	bool l3;
	/* Pools this cache registered with o.store, unregistered at close. */
	bool reg_kv, reg_mamba;
	/* hybrid */
	bool hybrid;
	size_t mbytes;
	struct hc_slots *mdev_slots;
	uint8_t *mdev_mem; /* NULL in no_data mode */
	struct hc_pool *mhost_pool;
	struct hc_slots *mhost_slots; /* the pool's, or own in no_data mode */
	struct hc_slots *own_mhost_slots;
	uint64_t mhost_n;
	uint16_t *mhost_busy;
	bool *mhost_deferred;
	struct cache_keyset *mkeyset; /* no_data L3 states */

	pthread_mutex_t lock;
	pthread_cond_t cond; /* state changes callers wait for: backups, prefetches */
	/* Work for one background thread each: a push wakes only its thread. */
	pthread_cond_t wake_d2h, wake_l3, wake_query, wake_io;
	struct radix_tree *tree;
	struct radix_evict_ops ops;
	uint16_t *host_busy;
	bool *host_deferred;
	uint64_t host_deferred_n; /* slots freed by the tree that an L3 set still reads */
	uint64_t reserved;
	struct radix_node **pend; /* nodes with a device->host backup queued */
	size_t npend, cap_pend;
	uint64_t pend_pages;

	struct cache_queue q_d2h, q_l3;
	size_t backups_running;
	bool d2h_done; /* the backup thread has exited: nothing more for the L3 queue */
	struct hc_cache_req *q_query, *q_io;
	size_t pf_running;
	bool stop;
	bool query_done; /* the query thread has exited: no more I/O work */
	pthread_t th_backup, th_l3, th_query, th_io;
	unsigned nthreads;
	struct hc_cache_stats st;
};

/* ---- cache_l3.c ---- */

int64_t cache_l3_exists(struct hc_cache *c, const struct hc_key *keys, size_t n);
/* Hybrid: the usable L3 prefix of keys[0..n): KV pages that exist, cut at
 * the last page with a state (exists_v2, trailing_pages with N = 1). */
int64_t cache_l3_exists_mamba(struct hc_cache *c, const struct hc_key *keys, size_t n);
/* Hybrid: read the state stored under key into host state slot. */
int cache_l3_get_mamba(struct hc_cache *c, const struct hc_key *key, uint64_t slot);
int64_t cache_l3_get(struct hc_cache *c, const struct hc_key *keys, size_t n, const uint64_t *host);
int cache_l3_set(struct hc_cache *c, const struct hc_key *keys, size_t n, const uint64_t *host);

/* ---- cache_slots.c ---- */

void cache_host_free(struct hc_cache *c, size_t n, const uint64_t *slots);
void cache_free_slots(void *arg, enum radix_tier tier, const uint64_t *slots, size_t n);
/* Evict host pages until n slots are free or nothing more can go; pages
 * an L3 set still reads give their slots back only when the set ends, so
 * one round of eviction may not be enough. Returns the free slots. */
uint64_t cache_host_room(struct hc_cache *c, size_t n);
int cache_host_alloc(struct hc_cache *c, size_t n, uint64_t *out);
/* Host room for a device->host backup (backup thread, c->lock held). When
 * the only slots to be had are ones an L3 set still reads, wait for the
 * sets: otherwise device copies outrun a slow store and the pages they
 * back up are dropped. */
int cache_host_alloc_backup(struct hc_cache *c, size_t n, uint64_t *out);
/* c->lock held; dropped while waiting for backups (callers hold pins and
 * locks on what they need, nothing else). */
int cache_dev_alloc(struct hc_cache *c, size_t n, uint64_t *out);

/* ---- cache_mamba.c ---- */

void cache_mhost_free(struct hc_cache *c, uint64_t s);
void cache_free_mamba(void *arg, enum radix_tier tier, uint64_t slot);
/* One host state slot; the host state LRU makes room. */
int cache_mhost_alloc(struct hc_cache *c, uint64_t *out);
/* A new host state for node from src (NULL: no bytes), backed up to L3.
 * Returns the slot or RADIX_NO_SLOT (no room). */
uint64_t cache_mamba_host_new(struct hc_cache *c, const struct radix_node *node, const void *src);
/* Host copy of node's device state (write_through at insert, selective once
 * hot): the state's L2 copy is what survives device eviction. */
void cache_mamba_to_host(struct hc_cache *c, struct radix_node *node);
/* RADIX_WRITE_BACK, the tree's callback: the node's pages to host and L3
 * (cache_write_back_pages), then, for a hybrid model, its state. */
int cache_write_back(void *arg, const struct radix_node *node, uint64_t *host_out,
		     uint64_t *mamba_host);
/* Hybrid: device and host state pools; the host one registered as "mamba". */
int cache_open_mamba(struct hc_cache *c, uint64_t dev_pages, uint64_t host_pages);
/* Hybrid: give node (just inserted, on device) the request's state: a
 * device state, and for write_through (or when the device has no room) a
 * host one backed up to L3. The lock keeps node on device meanwhile. */
void cache_mamba_attach(struct hc_cache *c, struct radix_node *node, const uint8_t *src);

/* ---- cache_backup.c ---- */

/* Queue an L3 set of one host Mamba state under key (busy until it ends). */
void cache_queue_l3_mamba(struct hc_cache *c, const struct hc_key *key, uint64_t slot);
/* write_back's pages: copy the unbacked device node to host now
 * (synchronously: the tree needs the slots), then back it up to L3. 0,
 * -ENOSPC (no host room) or the copy's -errno. */
int cache_write_back_pages(struct hc_cache *c, const struct radix_node *node, uint64_t *host_out);
/* Queue a device -> host backup of the npages ending at node; the job
 * holds a device lock on node until the copy is acknowledged. */
void cache_queue_backup(struct hc_cache *c, struct radix_node *node, size_t npages);
/* write_back (c->lock held): while fewer than an eighth of the device
 * pages are free or on their way to host, copy the least recently used
 * device leaf to host in the background. The eviction that comes next
 * then drops a page that is on host already instead of copying it under
 * the lock. */
void cache_write_back_ahead(struct hc_cache *c);
void *cache_backup_thread(void *arg);
void *cache_l3_thread(void *arg);

/* ---- cache_prefetch.c ---- */

/* The query step of r's prefetch (c->lock held; dropped while hashing and
 * asking the store): reserve host slots for the L3 prefix and hand r to
 * the I/O step, or finish the prefetch. */
void cache_pf_query(struct hc_cache *c, struct hc_cache_req *r);
void *cache_query_thread(void *arg);
void *cache_io_thread(void *arg);

#endif
