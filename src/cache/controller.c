/*
 * cache/controller — the hierarchy controller: one radix tree over L1/L2,
 * one mutex for it, and three background threads.
 *
 *   match --(tail >= threshold)--> query thread: hash tail, exists (chunks)
 *                                      | hits >= threshold: reserve host slots
 *                                      v
 *                                  I/O thread: get (chunks) -> insert_host
 *   insert --(write policy)------> backup thread: device -> host copy
 *                                      |
 *                                      v
 *                                  L3 thread: host -> L3 set
 *   load ------------------------> copy thread (device.c): host -> device,
 *                                      per-layer counters
 *
 * Ownership rules that keep the accounting exact:
 *   - a prefetch's reservation (host slots + ctl->reserved) belongs to the
 *     worker holding the request; only the I/O thread (or the query thread
 *     when it never reached I/O) releases it, once, whatever stopped it:
 *     completion, a stop policy's revoke, or an abort;
 *   - a device->host backup holds a device lock on its node until the
 *     copy is acknowledged (radix_set_slots), so the node cannot go away;
 *     device copies have their own thread so that they never queue behind
 *     slow L3 writes, and a device allocation that finds only such locked
 *     pages waits for the backups instead of failing;
 *   - a host->L3 set holds no tree reference: it keeps the page keys and
 *     marks its host slots busy; if the tree frees a busy slot meanwhile,
 *     freeing is deferred until the set ends (never a reused slot's bytes
 *     under an old key);
 *   - a request is reference-counted (owner + prefetch worker) and freed
 *     by whoever drops the last reference.
 *
 * Hybrid (Mamba) models (opts.mamba_bytes > 0): each node may hold a
 * recurrent state per tier. A match is cut at the deepest node holding a
 * state (the Mamba boundary): KV past it is useless without the state.
 * Device states are slots of c->mdev_mem; host states are slots of an
 * HC_POOL_MAMBA pool with their own LRU (radix_evict_mamba_host). A host
 * state is backed up to L3 (pool "mamba") under the key of its node's last
 * page; a prefetch asks exists_v2 with trailing_pages N = 1, so the usable
 * L3 prefix ends at a page that has a state, and reads that one state
 * before the KV pages. Host state slots an L3 set still reads are freed
 * late, as KV host slots are.
 *
 * Caveats: backed-up state is not recorded in the tree (host eviction may
 * drop pages whether or not they reached L3; they are found again through
 * exists). In hybrid mode a prefetch that cannot reserve the whole L3
 * prefix asks the store again within what fits, so that the shorter one
 * still ends at a page with a state.
 */
#define _GNU_SOURCE
#include "cache/controller.h"
#include "cache/device.h"
#include "cache/radix.h"
#include "util/util.h"

#include <hicache/store.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum pf_state { PF_NONE, PF_QUERY, PF_IO, PF_DONE };

struct ctl_job {
	struct ctl_job *next;
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

struct ctl_queue {
	struct ctl_job *head, *tail;
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
	struct timespec start;
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
	bool pf_mamba;            /* pf_mslot is reserved and not yet in the tree */
	uint64_t pf_mslot;
	struct radix_node *pf_pin; /* hybrid prefetch: pin on the chunks inserted so far */
};

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
	struct ctl_keyset *keyset; /* no_data L3 */
	bool l3;
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
	struct ctl_keyset *mkeyset; /* no_data L3 states */

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

	struct ctl_queue q_d2h, q_l3;
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

/* ---- key set (no_data L3) ---- */

struct ctl_keyset {
	pthread_mutex_t lock;
	struct hc_key *keys;
	bool *used;
	size_t cap, n;
};

int ctl_keyset_create(struct ctl_keyset **out)
{
	struct ctl_keyset *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cap = 1024;
	s->keys = calloc(s->cap, sizeof(*s->keys));
	s->used = calloc(s->cap, sizeof(*s->used));
	if (!s->keys || !s->used) {
		free(s->keys);
		free(s->used);
		free(s);
		return -ENOMEM;
	}
	pthread_mutex_init(&s->lock, NULL);
	*out = s;
	return 0;
}

void ctl_keyset_destroy(struct ctl_keyset *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s->keys);
	free(s->used);
	free(s);
}

static size_t keyset_slot(const struct hc_key *keys, const bool *used, size_t cap,
			  const struct hc_key *k)
{
	uint64_t h;
	memcpy(&h, k->bytes, sizeof(h)); /* SHA-256 bytes: already uniform */
	size_t i = h & (cap - 1);
	while (used[i] && memcmp(&keys[i], k, sizeof(*k)))
		i = (i + 1) & (cap - 1);
	return i;
}

int ctl_keyset_add(struct ctl_keyset *s, const struct hc_key *k)
{
	pthread_mutex_lock(&s->lock);
	if (2 * (s->n + 1) > s->cap) {
		size_t cap = s->cap * 2;
		struct hc_key *keys = calloc(cap, sizeof(*keys));
		bool *used = calloc(cap, sizeof(*used));
		if (!keys || !used) {
			free(keys);
			free(used);
			pthread_mutex_unlock(&s->lock);
			return -ENOMEM;
		}
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->used[i])
				continue;
			size_t j = keyset_slot(keys, used, cap, &s->keys[i]);
			keys[j] = s->keys[i];
			used[j] = true;
		}
		free(s->keys);
		free(s->used);
		s->keys = keys;
		s->used = used;
		s->cap = cap;
	}
	size_t i = keyset_slot(s->keys, s->used, s->cap, k);
	if (!s->used[i]) {
		s->keys[i] = *k;
		s->used[i] = true;
		s->n++;
	}
	pthread_mutex_unlock(&s->lock);
	return 0;
}

bool ctl_keyset_has(struct ctl_keyset *s, const struct hc_key *k)
{
	pthread_mutex_lock(&s->lock);
	bool has = s->used[keyset_slot(s->keys, s->used, s->cap, k)];
	pthread_mutex_unlock(&s->lock);
	return has;
}

/* ---- L3 access (store, or the key set in no_data mode); no lock held ---- */

static int64_t ctl_l3_exists(struct hc_cache *c, const struct hc_key *keys, size_t n)
{
	if (c->keyset) {
		size_t i = 0;
		while (i < n && ctl_keyset_has(c->keyset, &keys[i]))
			i++;
		return (int64_t)i;
	}
	return hc_store_exists(c->store, keys, n);
}

/* Hybrid: the usable L3 prefix of keys[0..n): KV pages that exist, cut at
 * the last page with a state (exists_v2, trailing_pages with N = 1). */
static int64_t ctl_l3_exists_mamba(struct hc_cache *c, const struct hc_key *keys, size_t n)
{
	if (c->mkeyset) {
		int64_t kv = ctl_l3_exists(c, keys, n);
		while (kv > 0 && !ctl_keyset_has(c->mkeyset, &keys[kv - 1]))
			kv--;
		return kv;
	}
	struct hc_pool_transfer t = {.pool = "mamba", .keys = keys, .n = 1,
				     .policy = HC_HIT_TRAILING_PAGES};
	uint64_t kv, hits;
	return hc_store_exists_v2(c->store, keys, n, &t, 1, &kv, &hits);
}

/* Hybrid: read the state stored under key into host state slot. */
static int ctl_l3_get_mamba(struct hc_cache *c, const struct hc_key *key, uint64_t slot)
{
	if (c->mkeyset)
		return ctl_keyset_has(c->mkeyset, key) ? 0 : -ENOENT;
	struct hc_pool_transfer t = {.pool = "mamba", .keys = key, .n = 1, .pages = &slot};
	int rc = hc_store_get_v2(c->store, &t, 1);
	return rc < 0 ? rc : rc == 1 ? 0 : -ENOENT;
}

static int64_t ctl_l3_get(struct hc_cache *c, const struct hc_key *keys, size_t n,
			  const uint64_t *host)
{
	if (c->keyset)
		return ctl_l3_exists(c, keys, n);
	return hc_store_get(c->store, keys, n, host, NULL);
}

static int ctl_l3_set(struct hc_cache *c, const struct hc_key *keys, size_t n,
		      const uint64_t *host)
{
	if (c->keyset) {
		for (size_t i = 0; i < n; i++) {
			int rc = ctl_keyset_add(c->keyset, &keys[i]);
			if (rc)
				return rc;
		}
		return 0;
	}
	return hc_store_set(c->store, keys, n, host, NULL);
}

/* ---- slots (c->lock held) ---- */

static void ctl_host_free(struct hc_cache *c, size_t n, const uint64_t *slots)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t s = slots[i];
		if (s == RADIX_NO_SLOT)
			continue;
		if (c->host_busy[s]) {
			/* An L3 set still reads it. */
			c->host_deferred_n += !c->host_deferred[s];
			c->host_deferred[s] = true;
		} else if (hc_slots_free(c->host_slots, 1, &s))
			log_error("cache: host slot %llu freed twice", (unsigned long long)s);
	}
}

static void ctl_free_slots(void *arg, enum radix_tier tier, const uint64_t *slots, size_t n)
{
	struct hc_cache *c = arg;
	if (tier == RADIX_DEV) {
		c->st.evicted_dev_pages += n;
		if (dev_free(c->dev, n, slots))
			log_error("cache: device slots freed twice");
	} else {
		c->st.evicted_host_pages += n;
		ctl_host_free(c, n, slots);
	}
}

static void ctl_mhost_free(struct hc_cache *c, uint64_t s)
{
	if (c->mhost_busy[s])
		c->mhost_deferred[s] = true; /* an L3 set still reads it */
	else if (hc_slots_free(c->mhost_slots, 1, &s))
		log_error("cache: host Mamba slot %llu freed twice", (unsigned long long)s);
}

static void ctl_free_mamba(void *arg, enum radix_tier tier, uint64_t slot)
{
	struct hc_cache *c = arg;
	if (tier == RADIX_DEV) {
		if (hc_slots_free(c->mdev_slots, 1, &slot))
			log_error("cache: device Mamba slot freed twice");
	} else {
		ctl_mhost_free(c, slot);
	}
}

/* One host state slot; the host state LRU makes room. */
static int ctl_mhost_alloc(struct hc_cache *c, uint64_t *out)
{
	/* A state an L3 set still reads frees its slot only when the set
	 * ends: evict the next one rather than lose the new state. */
	while (hc_slots_available(c->mhost_slots) == 0)
		if (radix_evict_mamba_host(c->tree, 1, &c->ops) <= 0)
			break;
	return hc_slots_alloc(c->mhost_slots, 1, out);
}

/* One device state slot: device states leave with their device pages. */
static int ctl_mdev_alloc(struct hc_cache *c, uint64_t *out)
{
	while (hc_slots_available(c->mdev_slots) == 0)
		if (radix_evict_device(c->tree, 1, &c->ops) <= 0)
			break;
	return hc_slots_alloc(c->mdev_slots, 1, out);
}

static void ctl_mhost_put(struct hc_cache *c, uint64_t slot, const void *src)
{
	if (c->mhost_pool && src)
		hc_pool_scatter(c->mhost_pool, slot, src, c->mbytes);
}

/* Evict host pages until n slots are free or nothing more can go; pages
 * an L3 set still reads give their slots back only when the set ends, so
 * one round of eviction may not be enough. Returns the free slots. */
static uint64_t ctl_host_room(struct hc_cache *c, size_t n)
{
	uint64_t avail;
	while ((avail = hc_slots_available(c->host_slots)) < n)
		if (radix_evict_host(c->tree, n - avail, &c->ops) <= 0)
			break;
	return avail;
}

static int ctl_host_alloc(struct hc_cache *c, size_t n, uint64_t *out)
{
	ctl_host_room(c, n);
	return hc_slots_alloc(c->host_slots, n, out);
}

/* Host room for a device->host backup (backup thread, c->lock held). When
 * the only slots to be had are ones an L3 set still reads, wait for the
 * sets: otherwise device copies outrun a slow store and the pages they
 * back up are dropped. */
static int ctl_host_alloc_backup(struct hc_cache *c, size_t n, uint64_t *out)
{
	int rc;
	while ((rc = ctl_host_alloc(c, n, out)) == -ENOSPC && c->host_deferred_n > 0)
		pthread_cond_wait(&c->cond, &c->lock);
	return rc;
}

static void ctl_job_free(struct ctl_job *j)
{
	if (!j)
		return;
	free(j->dev);
	free(j->keys);
	free(j->host);
	free(j);
}

static void ctl_run_l3(struct hc_cache *c, struct ctl_job *j, bool held);
static void ctl_run_d2h(struct hc_cache *c, struct ctl_job *j, bool held);

static void ctl_job_push(struct hc_cache *c, struct ctl_job *j)
{
	if (c->o.no_data) {
		/* Nothing to copy or write: the job's effects happen now, so a
		 * metadata-only run does not depend on how threads are scheduled
		 * (and pays no hand-off). */
		if (j->l3_only)
			ctl_run_l3(c, j, true);
		else
			ctl_run_d2h(c, j, true);
		ctl_job_free(j);
		return;
	}
	struct ctl_queue *q = j->l3_only ? &c->q_l3 : &c->q_d2h;
	j->next = NULL;
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
	c->st.backups_pending++;
	pthread_cond_signal(j->l3_only ? &c->wake_l3 : &c->wake_d2h);
}

/* Queue an L3 set of n host pages (busy until it ends). */
static void ctl_queue_l3(struct hc_cache *c, const struct hc_key *keys, const uint64_t *host,
			 size_t n)
{
	if (!c->l3 || n == 0)
		return;
	struct ctl_job *j = calloc(1, sizeof(*j));
	if (j) {
		j->keys = malloc(n * sizeof(*keys));
		j->host = malloc(n * sizeof(*host));
	}
	if (!j || !j->keys || !j->host) {
		ctl_job_free(j);
		log_warn("cache: out of memory, L3 backup skipped");
		return;
	}
	memcpy(j->keys, keys, n * sizeof(*keys));
	memcpy(j->host, host, n * sizeof(*host));
	j->n = n;
	j->l3_only = true;
	for (size_t i = 0; i < n; i++)
		c->host_busy[host[i]]++;
	ctl_job_push(c, j);
}

/* Queue an L3 set of one host Mamba state under key (busy until it ends). */
static void ctl_queue_l3_mamba(struct hc_cache *c, const struct hc_key *key, uint64_t slot)
{
	if (!c->l3)
		return;
	struct ctl_job *j = calloc(1, sizeof(*j));
	if (j) {
		j->keys = malloc(sizeof(*key));
		j->host = malloc(sizeof(slot));
	}
	if (!j || !j->keys || !j->host) {
		ctl_job_free(j);
		log_warn("cache: out of memory, L3 Mamba backup skipped");
		return;
	}
	j->keys[0] = *key;
	j->host[0] = slot;
	j->n = 1;
	j->l3_only = true;
	j->mamba = true;
	c->mhost_busy[slot]++;
	ctl_job_push(c, j);
}

/* A new host state for node from src (NULL: no bytes), backed up to L3.
 * Returns the slot or RADIX_NO_SLOT (no room). */
static uint64_t ctl_mamba_host_new(struct hc_cache *c, const struct radix_node *node,
				   const void *src)
{
	uint64_t slot;
	if (ctl_mhost_alloc(c, &slot))
		return RADIX_NO_SLOT;
	ctl_mhost_put(c, slot, src);
	struct radix_node_info ni;
	radix_node_info(node, &ni);
	ctl_queue_l3_mamba(c, &ni.keys[ni.pages - 1], slot);
	return slot;
}

/* Host copy of node's device state (write_through at insert, selective once
 * hot): the state's L2 copy is what survives device eviction. */
static void ctl_mamba_to_host(struct hc_cache *c, struct radix_node *node)
{
	struct radix_node_info ni;
	radix_node_info(node, &ni);
	if (ni.mamba[RADIX_DEV] == RADIX_NO_SLOT || ni.mamba[RADIX_HOST] != RADIX_NO_SLOT)
		return;
	const void *src = c->mdev_mem ? c->mdev_mem + ni.mamba[RADIX_DEV] * c->mbytes : NULL;
	uint64_t slot = ctl_mamba_host_new(c, node, src);
	if (slot != RADIX_NO_SLOT && radix_mamba_set(c->tree, node, RADIX_HOST, slot))
		ctl_mhost_free(c, slot);
}

/* RADIX_WRITE_BACK: the tree evicts an unbacked device node; copy it to host
 * now (synchronously: the tree needs the slots), then back it up to L3. */
static int ctl_write_back(void *arg, const struct radix_node *node, uint64_t *host_out,
			  uint64_t *mamba_host)
{
	struct hc_cache *c = arg;
	struct radix_node_info ni;
	struct dev_copy *ev;

	radix_node_info(node, &ni);
	if (ctl_host_alloc(c, ni.pages, host_out))
		return -ENOSPC;
	int rc = dev_copy_submit(c->dev, HC_COPY_D2H, ni.dev, host_out, ni.pages, &ev);
	if (!rc) {
		rc = dev_copy_wait(ev, UINT32_MAX);
		dev_copy_free(ev);
	}
	if (rc) {
		hc_slots_free(c->host_slots, ni.pages, host_out);
		return rc;
	}
	c->st.bytes_d2h += ni.pages * c->page_bytes;
	c->st.write_back_sync_pages += ni.pages;
	ctl_queue_l3(c, ni.keys, host_out, ni.pages);
	if (mamba_host && c->hybrid) {
		/* Only once the pages made it: the tree drops the state of a
		 * failed write-back without telling us. */
		const void *src = c->mdev_mem ? c->mdev_mem + ni.mamba[RADIX_DEV] * c->mbytes
					      : NULL;
		*mamba_host = ctl_mamba_host_new(c, node, src);
	}
	return 0;
}

/* c->lock held; dropped while waiting for backups (callers hold pins and
 * locks on what they need, nothing else). */
static int ctl_dev_alloc(struct hc_cache *c, size_t n, uint64_t *out)
{
	for (;;) {
		uint64_t avail = dev_available(c->dev);
		if (avail < n)
			radix_evict_device(c->tree, n - avail, &c->ops);
		int rc = dev_alloc(c->dev, n, out);
		/* Pages whose host copy is still in flight are locked until it
		 * is acknowledged: once it is they can go. */
		if (rc != -ENOSPC || c->npend == 0 || c->stop)
			return rc;
		pthread_cond_wait(&c->cond, &c->lock);
	}
}

static bool ctl_pending(struct hc_cache *c, const struct radix_node *n)
{
	for (size_t i = 0; i < c->npend; i++)
		if (c->pend[i] == n)
			return true;
	return false;
}

static void ctl_unpend(struct hc_cache *c, const struct radix_node *n)
{
	for (size_t i = 0; i < c->npend; i++) {
		if (c->pend[i] == n) {
			c->pend[i] = c->pend[--c->npend];
			return;
		}
	}
}

/* Queue a device -> host backup of the npages ending at node; the job
 * holds a device lock on node until the copy is acknowledged. */
static void ctl_queue_backup(struct hc_cache *c, struct radix_node *node, size_t npages)
{
	struct radix_node_info ni;
	radix_node_info(node, &ni);
	if (npages == 0 || ctl_pending(c, node))
		return;
	if (c->npend == c->cap_pend) {
		size_t cap = c->cap_pend ? 2 * c->cap_pend : 16;
		struct radix_node **p = realloc(c->pend, cap * sizeof(*p));
		if (!p)
			return;
		c->pend = p;
		c->cap_pend = cap;
	}
	struct ctl_job *j = calloc(1, sizeof(*j));
	if (j)
		j->dev = malloc(npages * sizeof(*j->dev));
	if (!j || !j->dev ||
	    radix_path_slots(node, ni.end - npages, RADIX_DEV, j->dev) != (int64_t)npages) {
		ctl_job_free(j);
		return;
	}
	j->node = node;
	j->n = npages;
	radix_lock(c->tree, node);
	c->pend[c->npend++] = node;
	c->pend_pages += npages;
	ctl_job_push(c, j);
}

/* write_back (c->lock held): while fewer than an eighth of the device
 * pages are free or on their way to host, copy the least recently used
 * device leaf to host in the background. The eviction that comes next
 * then drops a page that is on host already instead of copying it under
 * the lock. */
static void ctl_write_back_ahead(struct hc_cache *c)
{
	uint64_t low = (dev_pages(c->dev) + 7) / 8;
	struct radix_node_info ni;
	while (dev_available(c->dev) + c->pend_pages < low) {
		struct radix_node *x = radix_dev_lru(c->tree);
		if (!x)
			return;
		radix_node_info(x, &ni);
		/* A leaf on host already costs eviction nothing. */
		if (ni.host)
			return;
		uint64_t before = c->pend_pages;
		ctl_queue_backup(c, x, ni.pages); /* locks x: the next one comes up */
		if (c->pend_pages == before)
			return;
		c->st.write_back_ahead_pages += ni.pages;
	}
}

/* Keys of the npages ending at node (walks up across node boundaries). */
static void ctl_range_keys(const struct radix_node *node, size_t npages, struct hc_key *out)
{
	struct radix_node_info ni;
	size_t left = npages;
	while (left > 0 && node) {
		radix_node_info(node, &ni);
		size_t take = ni.pages < left ? ni.pages : left;
		memcpy(out + left - take, ni.keys + ni.pages - take, take * sizeof(*out));
		left -= take;
		node = ni.parent;
	}
}

/* ---- backup thread ---- */

/* Background jobs run on their threads, or inline with c->lock held
 * (held: no_data, where nothing moves and nothing is worth waiting for). */
static void ctl_lock_bg(struct hc_cache *c, bool held)
{
	if (!held)
		pthread_mutex_lock(&c->lock);
}

static void ctl_unlock_bg(struct hc_cache *c, bool held)
{
	if (!held)
		pthread_mutex_unlock(&c->lock);
}

/* An L3 job on its way: the store's started op (NULL once over, or when
 * there was nothing to start) and the job's outcome so far. */
struct ctl_l3_run {
	struct ctl_job *j;
	size_t jobs; /* queued jobs it stands for */
	struct hc_store_op *op;
	int rc;
};

/* Start job x->j's write to L3 (no_data: the key sets, at once). */
static void ctl_l3_start(struct hc_cache *c, struct ctl_l3_run *x)
{
	struct ctl_job *j = x->j;
	x->op = NULL;
	x->rc = 0;
	if (j->mamba && c->mkeyset) {
		x->rc = ctl_keyset_add(c->mkeyset, &j->keys[0]);
	} else if (j->mamba) {
		struct hc_pool_transfer t = {.pool = "mamba", .keys = j->keys, .n = 1,
					     .pages = j->host};
		x->rc = hc_store_set_v2_start(c->store, &t, 1, &x->op);
	} else if (c->keyset) {
		x->rc = ctl_l3_set(c, j->keys, j->n, j->host);
	} else {
		x->rc = hc_store_set_start(c->store, j->keys, j->n, j->host, NULL, &x->op);
	}
}

/* Wait for job x->j's write and account for it: the host slots it held
 * are released (freed if their pages were dropped meanwhile). */
static void ctl_l3_finish(struct hc_cache *c, struct ctl_l3_run *x, bool held)
{
	struct ctl_job *j = x->j;
	if (x->op) {
		x->rc = (int)hc_store_op_wait(x->op);
		x->op = NULL;
	}
	ctl_lock_bg(c, held);
	if (j->mamba) {
		if (x->rc)
			log_warn("cache: L3 backup of a Mamba state failed: %s", hc_strerror(x->rc));
		else
			c->st.mamba_l3_write++;
		uint64_t s = j->host[0];
		if (--c->mhost_busy[s] == 0 && c->mhost_deferred[s]) {
			c->mhost_deferred[s] = false;
			hc_slots_free(c->mhost_slots, 1, &s);
		}
		ctl_unlock_bg(c, held);
		return;
	}
	if (x->rc) {
		log_warn("cache: L3 backup of %zu pages failed: %s", j->n, hc_strerror(x->rc));
	} else {
		c->st.pages_l3_write += j->n;
		c->st.bytes_l3_write += j->n * c->page_bytes;
	}
	for (size_t i = 0; i < j->n; i++) {
		uint64_t s = j->host[i];
		if (--c->host_busy[s] == 0 && c->host_deferred[s]) {
			c->host_deferred[s] = false;
			c->host_deferred_n--;
			hc_slots_free(c->host_slots, 1, &s);
		}
	}
	ctl_unlock_bg(c, held);
}

static void ctl_run_l3(struct hc_cache *c, struct ctl_job *j, bool held)
{
	struct ctl_l3_run x = {.j = j};
	ctl_l3_start(c, &x);
	ctl_l3_finish(c, &x, held);
}

static void ctl_run_d2h(struct hc_cache *c, struct ctl_job *j, bool held)
{
	uint64_t *host = malloc(j->n * sizeof(*host));
	bool *taken = calloc(j->n, sizeof(*taken));
	struct dev_copy *ev = NULL;
	int rc = host && taken ? 0 : -ENOMEM;

	ctl_lock_bg(c, held);
	if (!rc)
		rc = held ? ctl_host_alloc(c, j->n, host) : ctl_host_alloc_backup(c, j->n, host);
	ctl_unlock_bg(c, held);
	if (!rc)
		rc = dev_copy_submit(c->dev, HC_COPY_D2H, j->dev, host, j->n, &ev);
	if (!rc) {
		rc = dev_copy_wait(ev, UINT32_MAX);
		dev_copy_free(ev);
	}

	ctl_lock_bg(c, held);
	if (!rc) {
		/* Acknowledged: the pages are on host now. */
		int64_t got = radix_set_slots(c->tree, j->node, j->n, RADIX_HOST, host, taken);
		for (size_t i = 0; i < j->n; i++)
			if (got < 0 || !taken[i])
				hc_slots_free(c->host_slots, 1, &host[i]);
		c->st.bytes_d2h += j->n * c->page_bytes;
		struct radix_node_info ni;
		radix_node_info(j->node, &ni);
		if (c->l3 && got >= 0 &&
		    radix_path_slots(j->node, ni.end - j->n, RADIX_HOST, host) == (int64_t)j->n) {
			struct hc_key *keys = malloc(j->n * sizeof(*keys));
			if (keys) {
				ctl_range_keys(j->node, j->n, keys);
				ctl_queue_l3(c, keys, host, j->n);
				free(keys);
			}
		}
	} else if (host && rc != -ENOSPC) {
		hc_slots_free(c->host_slots, j->n, host);
	}
	radix_unlock(c->tree, j->node);
	ctl_unpend(c, j->node);
	c->pend_pages -= j->n;
	ctl_unlock_bg(c, held);
	free(host);
	free(taken);
}

/* Append the KV L3 jobs queued behind j to it, up to CTL_BATCH pages in
 * all (c->lock held): inserts are often a few pages each, and one store
 * batch of many pages keeps a slow store busy where many small ones
 * would leave it waiting. Returns how many jobs j now stands for. */
static size_t ctl_merge_l3(struct ctl_queue *q, struct ctl_job *j)
{
	size_t jobs = 1;
	while (!j->mamba && q->head && !q->head->mamba && j->n + q->head->n <= CTL_BATCH) {
		struct ctl_job *x = q->head;
		struct hc_key *keys = realloc(j->keys, (j->n + x->n) * sizeof(*keys));
		if (keys)
			j->keys = keys;
		uint64_t *host = keys ? realloc(j->host, (j->n + x->n) * sizeof(*host)) : NULL;
		if (!host)
			break;
		j->host = host;
		memcpy(j->keys + j->n, x->keys, x->n * sizeof(*keys));
		memcpy(j->host + j->n, x->host, x->n * sizeof(*host));
		j->n += x->n;
		q->head = x->next;
		if (!q->head)
			q->tail = NULL;
		ctl_job_free(x);
		jobs++;
	}
	return jobs;
}

/* The next job of q, taken off it (c->lock held); NULL when empty. */
static struct ctl_job *ctl_take(struct ctl_queue *q)
{
	struct ctl_job *j = q->head;
	if (j) {
		q->head = j->next;
		if (!q->head)
			q->tail = NULL;
	}
	return j;
}

/* A job is over (c->lock held). */
static void ctl_job_over(struct hc_cache *c, size_t jobs)
{
	c->backups_running--;
	c->st.backups_pending -= jobs;
	pthread_cond_broadcast(&c->cond);
}

/* Runs the device -> host queue until stopped and drained. */
static void ctl_run_queue(struct hc_cache *c, struct ctl_queue *q)
{
	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!q->head && !c->stop)
			pthread_cond_wait(&c->wake_d2h, &c->lock);
		struct ctl_job *j = ctl_take(q);
		if (!j)
			break;
		c->backups_running++;
		pthread_mutex_unlock(&c->lock);
		ctl_run_d2h(c, j, false);
		ctl_job_free(j);
		pthread_mutex_lock(&c->lock);
		ctl_job_over(c, 1);
	}
	pthread_mutex_unlock(&c->lock);
}

/*
 * The L3 queue, until stopped and drained; it also waits for the backup
 * thread to exit, since its device copies queue L3 sets. The next job's
 * write is started before the running one is waited for, so the store
 * streams from one to the next instead of draining between them (a write
 * back is often a few pages).
 */
static void ctl_run_l3_queue(struct hc_cache *c)
{
	struct ctl_queue *q = &c->q_l3;
	struct ctl_l3_run run[2];
	unsigned nrun = 0;
	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!nrun && !q->head && !(c->stop && c->d2h_done))
			pthread_cond_wait(&c->wake_l3, &c->lock);
		struct ctl_job *j = nrun < 2 ? ctl_take(q) : NULL;
		if (j) {
			struct ctl_l3_run *x = &run[nrun++];
			*x = (struct ctl_l3_run){.j = j, .jobs = ctl_merge_l3(q, j)};
			c->backups_running++;
			pthread_mutex_unlock(&c->lock);
			ctl_l3_start(c, x);
			pthread_mutex_lock(&c->lock);
			/* One more may start before the first is waited for. */
			if (nrun < 2 && q->head)
				continue;
		}
		if (!nrun)
			break;
		pthread_mutex_unlock(&c->lock);
		ctl_l3_finish(c, &run[0], false);
		ctl_job_free(run[0].j);
		pthread_mutex_lock(&c->lock);
		ctl_job_over(c, run[0].jobs);
		run[0] = run[1];
		nrun--;
	}
	pthread_mutex_unlock(&c->lock);
}

static void *ctl_backup_thread(void *arg)
{
	struct hc_cache *c = arg;
	ctl_run_queue(c, &c->q_d2h);
	return NULL;
}

static void *ctl_l3_thread(void *arg)
{
	struct hc_cache *c = arg;
	ctl_run_l3_queue(c);
	return NULL;
}

/* ---- requests ---- */

static void ctl_req_free(struct hc_cache_req *r)
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
static bool ctl_req_put(struct hc_cache_req *r)
{
	return --r->refs == 0;
}

static void ctl_pf_finish(struct hc_cache *c, struct hc_cache_req *r)
{
	r->pf = PF_DONE;
	c->pf_running--;
	pthread_cond_broadcast(&c->cond);
}

/* Host pages a prefetch of want pages can reserve now (c->lock held):
 * at most half the host pool over all prefetches in flight, evicting
 * host pages to make room; 0 when that is under the threshold. */
static size_t ctl_pf_fit(struct hc_cache *c, size_t want)
{
	uint64_t cap = c->host_pages / 2 > c->reserved ? c->host_pages / 2 - c->reserved : 0;
	size_t h = want < cap ? want : (size_t)cap;
	if (h * c->ps < c->o.prefetch_threshold)
		return 0;
	uint64_t avail = ctl_host_room(c, h);
	if (avail < h)
		h = (size_t)avail;
	return h * c->ps < c->o.prefetch_threshold ? 0 : h;
}

static void ctl_pf_io(struct hc_cache *c, struct hc_cache_req *r);

/* The query step of r's prefetch (c->lock held; dropped while hashing and
 * asking the store): reserve host slots for the L3 prefix and hand r to
 * the I/O step, or finish the prefetch. */
static void ctl_pf_query(struct hc_cache *c, struct hc_cache_req *r)
{
	bool revoked = r->revoked;
	pthread_mutex_unlock(&c->lock);

	size_t tail = r->npages - r->pf_first;
	int64_t hits = 0;
	r->pf_keys = revoked ? NULL : malloc(tail * sizeof(*r->pf_keys));
	if (r->pf_keys &&
	    hc_key_chain(r->has_prior ? &r->prior : NULL, r->tokens + r->pf_first * c->ps,
			 tail * c->ps, c->ps, r->pf_keys, tail) == (int64_t)tail) {
		if (c->hybrid) {
			hits = ctl_l3_exists_mamba(c, r->pf_keys, tail);
			if (hits < 0)
				hits = 0;
			tail = 0; /* the loop below is for KV only */
		}
		for (size_t off = 0; off < tail; off += CTL_BATCH) {
			size_t n = tail - off < CTL_BATCH ? tail - off : CTL_BATCH;
			int64_t e = ctl_l3_exists(c, r->pf_keys + off, n);
			if (e > 0)
				hits += e;
			if (e < (int64_t)n)
				break;
		}
	}

	pthread_mutex_lock(&c->lock);
	size_t h = r->revoked ? 0 : ctl_pf_fit(c, (size_t)hits);
	if (c->hybrid && h && h < (size_t)hits) {
		/* A shorter prefetch must also end at a page with a state:
		 * ask again within what fits. */
		pthread_mutex_unlock(&c->lock);
		hits = ctl_l3_exists_mamba(c, r->pf_keys, h);
		pthread_mutex_lock(&c->lock);
		h = r->revoked || hits <= 0 ? 0 : ctl_pf_fit(c, (size_t)hits);
		if (h < (size_t)hits)
			h = 0;
	}
	if (h) {
		r->pf_slots = malloc(h * sizeof(*r->pf_slots));
		if (!r->pf_slots || hc_slots_alloc(c->host_slots, h, r->pf_slots))
			h = 0;
		if (h && c->hybrid) {
			if (ctl_mhost_alloc(c, &r->pf_mslot)) {
				hc_slots_free(c->host_slots, h, r->pf_slots);
				h = 0;
			} else {
				r->pf_mamba = true;
			}
		}
	}
	if (h) {
		r->pf_pages = h;
		c->reserved += h;
		r->info.l3_pending = h * c->ps;
		r->pf = PF_IO;
		if (c->o.no_data) {
			ctl_pf_io(c, r);
			return;
		}
		r->qnext = NULL;
		struct hc_cache_req **p = &c->q_io;
		while (*p)
			p = &(*p)->qnext;
		*p = r;
		pthread_cond_signal(&c->wake_io);
	} else {
		ctl_pf_finish(c, r);
		if (ctl_req_put(r))
			ctl_req_free(r);
	}
}

static void *ctl_query_thread(void *arg)
{
	struct hc_cache *c = arg;
	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!c->q_query && !c->stop)
			pthread_cond_wait(&c->wake_query, &c->lock);
		struct hc_cache_req *r = c->q_query;
		if (!r)
			break;
		c->q_query = r->qnext;
		ctl_pf_query(c, r);
	}
	c->query_done = true;
	pthread_cond_signal(&c->wake_io);
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* Insert pages [pf_first + off, + g) as host pages (c->lock held). */
static bool ctl_pf_insert(struct hc_cache *c, struct hc_cache_req *r, size_t off, size_t g)
{
	size_t end = r->pf_first + off + g;
	uint64_t *arr = malloc(end * sizeof(*arr));
	struct radix_insert res;
	if (!arr) {
		ctl_host_free(c, g, r->pf_slots + off);
		return false;
	}
	for (size_t i = 0; i < end; i++)
		arr[i] = i < r->pf_first + off ? RADIX_NO_SLOT : r->pf_slots[i - r->pf_first];
	int rc = radix_insert_host(c->tree, r->tokens, end * c->ps, arr, r->pf_keys, r->pf_first,
				   &res);
	/* Hybrid: the pages only become usable with the state at their end,
	 * after the last chunk; until then pf_pin keeps the chunks alive. */
	bool fin = !c->hybrid || off + g == r->pf_pages;
	if (rc) {
		ctl_host_free(c, g, r->pf_slots + off);
	} else if (!fin) {
		for (size_t i = r->pf_first + off; i < res.kept && i < end; i++)
			ctl_host_free(c, 1, &arr[i]);
		radix_pin_host(c->tree, res.node);
		if (r->pf_pin)
			radix_unpin_host(c->tree, r->pf_pin);
		r->pf_pin = res.node;
		c->st.pages_l3_read += g;
		c->st.bytes_l3_read += g * c->page_bytes;
	} else {
		/* Pages someone else brought in meanwhile stay ours to free. */
		for (size_t i = r->pf_first + off; i < res.kept && i < end; i++)
			ctl_host_free(c, 1, &arr[i]);
		if (c->hybrid) {
			int mrc = radix_mamba_set(c->tree, res.node, RADIX_HOST, r->pf_mslot);
			if (!mrc) {
				r->pf_mamba = false;
				c->st.mamba_l3_read++;
			} else if (mrc != -EEXIST) {
				free(arr);
				return false; /* no state: the pages stay, unused */
			}
			r->mnode = res.node;
			g = off + g; /* the whole prefetch became usable now */
		}
		if (res.node != r->pin_node) {
			radix_pin_host(c->tree, res.node);
			if (r->pin_node)
				radix_unpin_host(c->tree, r->pin_node);
			r->pin_node = res.node;
		}
		r->host_end = end;
		r->pf_done = end - r->pf_first;
		r->info.l3_tokens = r->pf_done * c->ps;
		c->st.hit_tokens[2] += g * c->ps;
		size_t rd = c->hybrid ? end - r->pf_first - off : g;
		c->st.pages_l3_read += rd;
		c->st.bytes_l3_read += rd * c->page_bytes;
	}
	free(arr);
	return rc == 0;
}

/* The I/O step of r's prefetch (c->lock held; dropped while reading):
 * read the reserved pages, insert them as host pages, release what was
 * not used, finish. */
static void ctl_pf_io(struct hc_cache *c, struct hc_cache_req *r)
{
	size_t off = 0;
	if (r->pf_mamba && !r->revoked) {
		/* The state first: without it the KV pages are of no use. */
		pthread_mutex_unlock(&c->lock);
		int mrc = ctl_l3_get_mamba(c, &r->pf_keys[r->pf_pages - 1], r->pf_mslot);
		pthread_mutex_lock(&c->lock);
		if (mrc)
			goto release; /* off = 0: every reserved KV slot goes back */
	}
	while (off < r->pf_pages && !r->revoked) {
		size_t n = r->pf_pages - off < CTL_BATCH ? r->pf_pages - off : CTL_BATCH;
		pthread_mutex_unlock(&c->lock);
		int64_t g = ctl_l3_get(c, r->pf_keys + off, n,
				       r->pf_slots + off);
		pthread_mutex_lock(&c->lock);
		if (g <= 0 || r->revoked)
			break;
		bool ok = ctl_pf_insert(c, r, off, (size_t)g);
		off += (size_t)g; /* inserted, or freed on failure */
		if (!ok || (size_t)g < n)
			break;
	}
release:
	/* Release the whole reservation, once: unused slots go back. */
	if (r->pf_pin) {
		radix_unpin_host(c->tree, r->pf_pin);
		r->pf_pin = NULL;
	}
	if (r->pf_mamba) {
		ctl_mhost_free(c, r->pf_mslot);
		r->pf_mamba = false;
	}
	if (r->pf_pages > off)
		ctl_host_free(c, r->pf_pages - off, r->pf_slots + off);
	c->reserved -= r->pf_pages;
	r->info.l3_pending = 0;
	ctl_pf_finish(c, r);
	if (ctl_req_put(r))
		ctl_req_free(r);
}

static void *ctl_io_thread(void *arg)
{
	struct hc_cache *c = arg;
	pthread_mutex_lock(&c->lock);
	for (;;) {
		/* Stop only once the query thread can feed nothing more. */
		while (!c->q_io && !(c->stop && c->query_done))
			pthread_cond_wait(&c->wake_io, &c->lock);
		struct hc_cache_req *r = c->q_io;
		if (!r)
			break;
		c->q_io = r->qnext;
		ctl_pf_io(c, r);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* ---- open / close ---- */

void hc_cache_opts_init(struct hc_cache_opts *o, size_t size)
{
	if (!o)
		return;
	memset(o, 0, size);
	if (size < sizeof(*o))
		return;
	o->struct_size = size;
	o->page_size = 16;
	o->kv = (struct hc_kv_geometry){.layers = 1, .heads = 1, .head_dim = 64, .elem_bytes = 2,
					.layout = HC_LAYOUT_PAGE_FIRST};
	o->write_policy = HC_WRITE_THROUGH;
	o->prefetch_threshold = 256;
	o->prefetch_timeout_base_s = 2.0;
	o->prefetch_timeout_per_ki_token_s = 0.1;
	o->prefetch_timeout_max_s = 30.0;
}

double ctl_timeout_s(const struct hc_cache_opts *o, size_t tokens)
{
	double s = o->prefetch_timeout_base_s +
		   o->prefetch_timeout_per_ki_token_s * (double)tokens / 1024.0;
	return s < o->prefetch_timeout_max_s ? s : o->prefetch_timeout_max_s;
}

static void ctl_stop_threads(struct hc_cache *c)
{
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_cond_broadcast(&c->cond);
	pthread_cond_signal(&c->wake_d2h);
	pthread_cond_signal(&c->wake_l3);
	pthread_cond_signal(&c->wake_query);
	pthread_cond_signal(&c->wake_io);
	pthread_mutex_unlock(&c->lock);
	/* Each thread drains its queue before it exits; queries feed I/O,
	 * and both may queue nothing for the backup thread, so join in order. */
	if (c->nthreads > 1) {
		pthread_join(c->th_query, NULL);
	} else {
		pthread_mutex_lock(&c->lock);
		c->query_done = true;
		pthread_mutex_unlock(&c->lock);
	}
	if (c->nthreads > 2)
		pthread_join(c->th_io, NULL);
	if (c->nthreads > 0)
		pthread_join(c->th_backup, NULL);
	pthread_mutex_lock(&c->lock);
	c->d2h_done = true;
	pthread_cond_signal(&c->wake_l3);
	pthread_mutex_unlock(&c->lock);
	if (c->nthreads > 3)
		pthread_join(c->th_l3, NULL);
	c->nthreads = 0;
}

void hc_cache_close(struct hc_cache *c)
{
	if (!c)
		return;
	ctl_stop_threads(c);
	radix_destroy(c->tree);
	dev_destroy(c->dev);
	hc_slots_destroy(c->own_slots);
	hc_pool_destroy(c->host_pool);
	ctl_keyset_destroy(c->keyset);
	hc_slots_destroy(c->mdev_slots);
	free(c->mdev_mem);
	hc_slots_destroy(c->own_mhost_slots);
	hc_pool_destroy(c->mhost_pool);
	free(c->mhost_busy);
	free(c->mhost_deferred);
	ctl_keyset_destroy(c->mkeyset);
	free(c->host_busy);
	free(c->host_deferred);
	free(c->pend);
	pthread_cond_destroy(&c->cond);
	pthread_cond_destroy(&c->wake_d2h);
	pthread_cond_destroy(&c->wake_l3);
	pthread_cond_destroy(&c->wake_query);
	pthread_cond_destroy(&c->wake_io);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Hybrid: device and host state pools; the host one registered as "mamba". */
static int ctl_open_mamba(struct hc_cache *c, uint64_t dev_pages, uint64_t host_pages)
{
	const struct hc_cache_opts *o = &c->o;
	uint64_t nd = o->mamba_dev_states ? o->mamba_dev_states : dev_pages;
	uint64_t nh = o->mamba_host_states ? o->mamba_host_states : host_pages;
	int rc;
	c->hybrid = true;
	c->mbytes = o->mamba_bytes;
	c->mhost_n = nh;
	c->mhost_busy = calloc(nh, sizeof(*c->mhost_busy));
	c->mhost_deferred = calloc(nh, sizeof(*c->mhost_deferred));
	if (!c->mhost_busy || !c->mhost_deferred)
		return util_fail(-ENOMEM, "cache: out of memory");
	if ((rc = hc_slots_create(nd, &c->mdev_slots)))
		return rc;
	if (o->no_data) {
		if ((rc = hc_slots_create(nh, &c->own_mhost_slots)))
			return rc;
		c->mhost_slots = c->own_mhost_slots;
		if (o->store && (rc = ctl_keyset_create(&c->mkeyset)))
			return util_fail(rc, "cache: out of memory");
		return 0;
	}
	if (nd > SIZE_MAX / c->mbytes || !(c->mdev_mem = malloc(nd * c->mbytes)))
		return util_fail(-ENOMEM, "cache: %llu device Mamba states: out of memory",
				 (unsigned long long)nd);
	struct hc_mamba_geometry g = {.slots = nh, .layers = 1, .temporal_bytes = c->mbytes};
	if ((rc = hc_pool_create_mamba(&g, NULL, &c->mhost_pool)))
		return rc;
	c->mhost_slots = hc_pool_slots(c->mhost_pool);
	if (o->store && (rc = hc_store_register_pool(o->store, "mamba", c->mhost_pool, false)))
		return util_fail(rc, "cache: cannot register the Mamba pool: %s", hc_last_error());
	return 0;
}

int hc_cache_open(const struct hc_cache_opts *opts, struct hc_cache **out)
{
	if (!opts || !out || opts->struct_size < sizeof(*opts))
		return util_fail(-EINVAL, "hc_cache_open: NULL argument or old opts struct");
	*out = NULL;
	const struct hc_cache_opts *o = opts;
	if (o->page_size == 0)
		return util_fail(-EINVAL, "cache: page_size must be > 0");
	if ((unsigned)o->write_policy > HC_WRITE_BACK)
		return util_fail(-EINVAL, "cache: unknown write_policy %d", (int)o->write_policy);
	uint64_t dev_pages = o->device_tokens / o->page_size;
	uint64_t host_pages = o->host_tokens / o->page_size;
	if (dev_pages == 0 || host_pages == 0)
		return util_fail(-EINVAL, "cache: device_tokens and host_tokens must hold a page");
	if (o->kv.layers == 0)
		return util_fail(-EINVAL, "cache: kv.layers must be > 0");
	/* Written so that NaN fails too. */
	if (!(o->prefetch_timeout_base_s >= 0 && o->prefetch_timeout_per_ki_token_s >= 0 &&
	      o->prefetch_timeout_max_s >= 0 && o->prefetch_timeout_max_s <= 86400))
		return util_fail(-EINVAL, "cache: prefetch_timeout_* must be in 0..86400 seconds");

	struct hc_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return util_fail(-ENOMEM, "cache: out of memory");
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	pthread_cond_init(&c->wake_d2h, NULL);
	pthread_cond_init(&c->wake_l3, NULL);
	pthread_cond_init(&c->wake_query, NULL);
	pthread_cond_init(&c->wake_io, NULL);
	c->o = *o;
	c->ps = o->page_size;
	c->host_pages = host_pages;
	c->ops = (struct radix_evict_ops){.arg = c, .free_slots = ctl_free_slots,
					  .free_mamba = ctl_free_mamba,
					  .write_back = ctl_write_back};
	int rc;
	c->host_busy = calloc(host_pages, sizeof(*c->host_busy));
	c->host_deferred = calloc(host_pages, sizeof(*c->host_deferred));
	if (!c->host_busy || !c->host_deferred) {
		rc = util_fail(-ENOMEM, "cache: out of memory");
		goto err;
	}
	if (o->no_data) {
		if ((rc = hc_slots_create(host_pages, &c->own_slots)))
			goto err;
		c->host_slots = c->own_slots;
		if (o->store) {
			if ((rc = ctl_keyset_create(&c->keyset))) {
				util_fail(rc, "cache: out of memory");
				goto err;
			}
			c->l3 = true;
		}
	} else {
		struct hc_kv_geometry g = o->kv;
		g.page_size = o->page_size;
		g.pages = host_pages;
		if ((rc = hc_pool_create_kv(&g, NULL, &c->host_pool)))
			goto err;
		c->host_slots = hc_pool_slots(c->host_pool);
		c->page_bytes = hc_pool_page_bytes(c->host_pool);
		if (o->store) {
			rc = hc_store_register_pool(o->store, "kv", c->host_pool, true);
			if (rc)
				goto err;
			c->store = o->store;
			c->l3 = true;
		}
	}
	if (o->mamba_bytes && (rc = ctl_open_mamba(c, dev_pages, host_pages)))
		goto err;
	struct dev_opts dopts = {.pages = dev_pages, .layers = o->kv.layers, .host = c->host_pool,
				 .ops = o->copy_ops, .arg = o->copy_arg, .no_data = o->no_data};
	if ((rc = dev_create(&dopts, &c->dev)))
		goto err;
	static const enum radix_write_policy wp[] = {RADIX_WRITE_THROUGH,
						     RADIX_WRITE_THROUGH_SELECTIVE,
						     RADIX_WRITE_BACK};
	struct radix_opts ro = {.page_size = o->page_size, .write_policy = wp[o->write_policy]};
	if ((rc = radix_create(&ro, &c->tree)))
		goto err;
	if ((rc = -pthread_create(&c->th_backup, NULL, ctl_backup_thread, c)))
		goto err_thread;
	c->nthreads = 1;
	if ((rc = -pthread_create(&c->th_query, NULL, ctl_query_thread, c)))
		goto err_thread;
	c->nthreads = 2;
	if ((rc = -pthread_create(&c->th_io, NULL, ctl_io_thread, c)))
		goto err_thread;
	c->nthreads = 3;
	if ((rc = -pthread_create(&c->th_l3, NULL, ctl_l3_thread, c)))
		goto err_thread;
	c->nthreads = 4;
	*out = c;
	return 0;
err_thread:
	util_fail(rc, "cache: cannot start a background thread");
err:
	hc_cache_close(c);
	return rc;
}

struct hc_pool *hc_cache_host_pool(struct hc_cache *c)
{
	return c ? c->host_pool : NULL;
}

size_t hc_cache_page_bytes(const struct hc_cache *c)
{
	return c ? c->page_bytes : 0;
}

int hc_cache_dev_write(struct hc_cache *c, uint64_t slot, const void *src, size_t len)
{
	if (!c || !src)
		return util_fail(-EINVAL, "hc_cache_dev_write: NULL argument");
	return dev_page_write(c->dev, slot, src, len);
}

int hc_cache_dev_read(struct hc_cache *c, uint64_t slot, void *dst, size_t len)
{
	if (!c || !dst)
		return util_fail(-EINVAL, "hc_cache_dev_read: NULL argument");
	return dev_page_read(c->dev, slot, dst, len);
}

/* ---- request lifecycle ---- */

/* Device-lock n instead of the request's current lock node (c->lock held). */
static void ctl_req_relock(struct hc_cache *c, struct hc_cache_req *r, struct radix_node *n)
{
	if (n == r->lock_node)
		return;
	if (n && n != radix_root(c->tree))
		radix_lock(c->tree, n);
	else
		n = NULL;
	if (r->lock_node)
		radix_unlock(c->tree, r->lock_node);
	r->lock_node = n;
}

/* write_through_selective: back up device nodes of the match hit twice. */
static void ctl_selective(struct hc_cache *c, struct radix_node *n)
{
	struct radix_node_info ni;
	for (; n && n != radix_root(c->tree); n = ni.parent) {
		radix_node_info(n, &ni);
		if (ni.dev && !ni.host && ni.hits >= 2)
			ctl_queue_backup(c, n, ni.pages);
		if (c->hybrid && ni.hits >= 2)
			ctl_mamba_to_host(c, n);
	}
}

int hc_cache_match(struct hc_cache *c, const uint32_t *tokens, size_t ntokens,
		   struct hc_cache_req **out)
{
	if (!c || !out || (!tokens && ntokens))
		return util_fail(-EINVAL, "hc_cache_match: NULL argument");
	*out = NULL;
	struct hc_cache_req *r = calloc(1, sizeof(*r));
	if (!r)
		return util_fail(-ENOMEM, "cache: out of memory");
	r->tokens = malloc((ntokens ? ntokens : 1) * sizeof(*tokens));
	if (!r->tokens) {
		free(r);
		return util_fail(-ENOMEM, "cache: out of memory");
	}
	if (ntokens)
		memcpy(r->tokens, tokens, ntokens * sizeof(*tokens));
	r->c = c;
	r->ntokens = ntokens;
	r->npages = ntokens / c->ps;
	r->refs = 1;
	clock_gettime(CLOCK_MONOTONIC, &r->start);

	struct radix_match m;
	pthread_mutex_lock(&c->lock);
	int rc = radix_match(c->tree, tokens, ntokens, &m);
	if (rc && rc != -ENOMEM) {
		pthread_mutex_unlock(&c->lock);
		ctl_req_free(r);
		return rc;
	}
	/* Hybrid: only the prefix up to the Mamba boundary is usable; the
	 * device prefix is cut there too (mamba_node is then on device). */
	size_t usable = c->hybrid ? m.mamba_pages : m.pages;
	struct radix_node *end_node = c->hybrid ? m.mamba_node : m.last_node;
	size_t devp = m.dev_pages < usable ? m.dev_pages : usable;
	ctl_req_relock(c, r, m.dev_pages <= usable ? m.dev_node : end_node);
	if (usable) {
		radix_pin_host(c->tree, end_node);
		r->pin_node = end_node;
		if (c->hybrid)
			r->mnode = end_node;
	}
	r->dev_pages = devp;
	r->host_end = usable;
	r->info.dev_tokens = devp * c->ps;
	r->info.host_tokens = (usable - devp) * c->ps;
	c->st.requests++;
	c->st.hit_tokens[0] += r->info.dev_tokens;
	c->st.hit_tokens[1] += r->info.host_tokens;
	if (c->o.write_policy == HC_WRITE_THROUGH_SELECTIVE)
		ctl_selective(c, m.dev_node);
	if (c->l3 && (r->npages - usable) * c->ps >= c->o.prefetch_threshold &&
	    r->npages > usable) {
		r->pf = PF_QUERY;
		r->pf_first = usable;
		if (usable) {
			/* Chain from the boundary's last key (m.last_key when not
			 * hybrid): pages past the boundary come again, with a state. */
			struct radix_node_info ni;
			radix_node_info(end_node, &ni);
			r->prior = ni.keys[ni.pages - 1];
			r->has_prior = true;
		}
		r->refs++;
		c->pf_running++;
		c->st.prefetches++;
		if (c->o.no_data) {
			/* Metadata only: the prefetch completes here. */
			ctl_pf_query(c, r);
		} else {
			struct hc_cache_req **p = &c->q_query;
			while (*p)
				p = &(*p)->qnext;
			*p = r;
			pthread_cond_signal(&c->wake_query);
		}
	}
	pthread_mutex_unlock(&c->lock);
	*out = r;
	return 0;
}

void hc_cache_req_info(const struct hc_cache_req *r, struct hc_cache_req_info *out)
{
	if (!r || !out)
		return;
	pthread_mutex_lock(&r->c->lock);
	*out = r->info;
	pthread_mutex_unlock(&r->c->lock);
}

bool hc_cache_prefetch_done(struct hc_cache_req *r)
{
	pthread_mutex_lock(&r->c->lock);
	bool done = r->pf == PF_NONE || r->pf == PF_DONE;
	pthread_mutex_unlock(&r->c->lock);
	return done;
}

/* c->lock held. */
static void ctl_revoke(struct hc_cache *c, struct hc_cache_req *r)
{
	if ((r->pf == PF_QUERY || r->pf == PF_IO) && !r->revoked) {
		r->revoked = true;
		c->st.prefetch_revoked++;
	}
}

int64_t hc_cache_prefetch_wait(struct hc_cache_req *r, enum hc_cache_stop_policy policy)
{
	if (!r)
		return util_fail(-EINVAL, "hc_cache_prefetch_wait: NULL request");
	struct hc_cache *c = r->c;
	pthread_mutex_lock(&c->lock);
	if (policy == HC_STOP_WAIT_COMPLETE) {
		while (r->pf == PF_QUERY || r->pf == PF_IO)
			pthread_cond_wait(&c->cond, &c->lock);
	} else if (policy == HC_STOP_TIMEOUT) {
		double secs = ctl_timeout_s(&c->o, (r->npages - r->pf_first) * c->ps);
		struct timespec dl = r->start;
		dl.tv_sec += (time_t)secs;
		dl.tv_nsec += (long)((secs - (double)(time_t)secs) * 1e9);
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
		while (r->pf == PF_QUERY || r->pf == PF_IO) {
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec > dl.tv_sec ||
			    (now.tv_sec == dl.tv_sec && now.tv_nsec >= dl.tv_nsec))
				break;
			/* The condition uses CLOCK_REALTIME: sleep in short slices. */
			struct timespec rt;
			clock_gettime(CLOCK_REALTIME, &rt);
			rt.tv_nsec += 10000000L;
			if (rt.tv_nsec >= 1000000000L) {
				rt.tv_sec++;
				rt.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&c->cond, &c->lock, &rt);
		}
	}
	ctl_revoke(c, r);
	int64_t got = (int64_t)(r->pf_done * c->ps);
	pthread_mutex_unlock(&c->lock);
	return got;
}

int64_t hc_cache_load(struct hc_cache_req *r)
{
	if (!r)
		return util_fail(-EINVAL, "hc_cache_load: NULL request");
	struct hc_cache *c = r->c;
	pthread_mutex_lock(&c->lock);
	ctl_revoke(c, r);
	if (r->load || r->allocated) {
		pthread_mutex_unlock(&c->lock);
		return util_fail(-EBUSY, "hc_cache_load: already loading or allocated");
	}
	size_t n = r->host_end - r->dev_pages;
	if (n == 0) {
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	uint64_t *host = malloc(n * sizeof(*host));
	uint64_t *dev = malloc(n * sizeof(*dev));
	int rc = host && dev ? 0 : -ENOMEM;
	if (!rc && radix_path_slots(r->pin_node, r->dev_pages, RADIX_HOST, host) != (int64_t)n) {
		/* Someone put part of the range on device meanwhile: match again
		 * (the pin keeps every page present) and load what is left. */
		struct radix_match m;
		rc = radix_match(c->tree, r->tokens, r->host_end * c->ps, &m);
		if (!rc) {
			ctl_req_relock(c, r, m.dev_node);
			r->dev_pages = m.dev_pages;
			n = r->host_end - r->dev_pages;
			if (n && radix_path_slots(m.last_node, r->dev_pages, RADIX_HOST, host) !=
					 (int64_t)n)
				rc = -EIO;
		}
	}
	if (!rc && n)
		rc = ctl_dev_alloc(c, n, dev);
	if (!rc && n) {
		rc = dev_copy_submit(c->dev, HC_COPY_H2D, dev, host, n, &r->load);
		if (rc)
			dev_free(c->dev, n, dev);
	}
	if (rc || n == 0) {
		free(dev);
		dev = NULL;
	}
	if (!rc && n) {
		r->load_dev = dev;
		r->load_pages = n;
		r->load_node = r->pin_node;
		r->info.loaded_tokens = n * c->ps;
		c->st.bytes_h2d += n * c->page_bytes;
	}
	pthread_mutex_unlock(&c->lock);
	free(host);
	if (rc)
		return util_fail(rc, "hc_cache_load: %zu pages: %s", n, hc_strerror(rc));
	return (int64_t)(n * c->ps);
}

uint32_t hc_cache_layer_ready(const struct hc_cache_req *r)
{
	if (!r)
		return 0;
	if (!r->load)
		return r->c->o.kv.layers;
	return dev_copy_layers_done(r->load);
}

/* Wait for the load and put its pages in the tree (keep) or drop them. */
static int ctl_load_finish(struct hc_cache_req *r, bool keep)
{
	struct hc_cache *c = r->c;
	if (!r->load)
		return 0;
	int rc = dev_copy_wait(r->load, UINT32_MAX);
	bool *taken = calloc(r->load_pages, sizeof(*taken));
	pthread_mutex_lock(&c->lock);
	int64_t got = -1;
	if (keep && !rc && taken)
		got = radix_set_slots(c->tree, r->load_node, r->load_pages, RADIX_DEV, r->load_dev,
				      taken);
	for (size_t i = 0; i < r->load_pages; i++)
		if (got < 0 || !taken[i])
			dev_free(c->dev, 1, &r->load_dev[i]);
	if (got >= 0) {
		ctl_req_relock(c, r, r->load_node);
		r->dev_pages += r->load_pages;
	}
	pthread_mutex_unlock(&c->lock);
	free(taken);
	dev_copy_free(r->load);
	r->load = NULL;
	free(r->load_dev);
	r->load_dev = NULL;
	if (!rc && keep && got < 0)
		rc = (int)got;
	return rc;
}

int hc_cache_layer_wait(struct hc_cache_req *r, uint32_t layer)
{
	if (!r)
		return util_fail(-EINVAL, "hc_cache_layer_wait: NULL request");
	if (!r->load)
		return 0;
	if (layer >= r->c->o.kv.layers - 1)
		return ctl_load_finish(r, true);
	return dev_copy_wait(r->load, layer);
}

int64_t hc_cache_req_dev_slots(struct hc_cache_req *r, uint64_t *slots, size_t max)
{
	if (!r)
		return util_fail(-EINVAL, "hc_cache_req_dev_slots: NULL request");
	struct hc_cache *c = r->c;
	int64_t n = (int64_t)r->dev_pages;
	if (n == 0)
		return 0;
	uint64_t *tmp = malloc((size_t)n * sizeof(*tmp));
	if (!tmp)
		return util_fail(-ENOMEM, "cache: out of memory");
	pthread_mutex_lock(&c->lock);
	int64_t got = radix_path_slots(r->lock_node, 0, RADIX_DEV, tmp);
	pthread_mutex_unlock(&c->lock);
	if (got > 0 && slots)
		memcpy(slots, tmp, ((size_t)got < max ? (size_t)got : max) * sizeof(*tmp));
	free(tmp);
	return got;
}

int64_t hc_cache_alloc(struct hc_cache_req *r, size_t ntokens, uint64_t *slots, size_t max)
{
	if (!r)
		return util_fail(-EINVAL, "hc_cache_alloc: NULL request");
	struct hc_cache *c = r->c;
	if (r->allocated)
		return util_fail(-EBUSY, "hc_cache_alloc: called twice");
	int rc = ctl_load_finish(r, true);
	if (rc)
		return util_fail(rc, "hc_cache_alloc: load failed");
	size_t pages = ntokens / c->ps;
	size_t n = pages > r->dev_pages ? pages - r->dev_pages : 0;
	uint64_t *s = malloc((n ? n : 1) * sizeof(*s));
	if (!s)
		return util_fail(-ENOMEM, "cache: out of memory");
	pthread_mutex_lock(&c->lock);
	rc = n ? ctl_dev_alloc(c, n, s) : 0;
	if (!rc) {
		r->new_slots = s;
		r->new_first = r->dev_pages;
		r->new_n = n;
		r->allocated = true;
	}
	pthread_mutex_unlock(&c->lock);
	if (rc) {
		free(s);
		return util_fail(rc, "hc_cache_alloc: %zu device pages: %s", n, hc_strerror(rc));
	}
	if (slots)
		memcpy(slots, s, (n < max ? n : max) * sizeof(*s));
	return (int64_t)n;
}

/* Hybrid: give node (just inserted, on device) the request's state: a
 * device state, and for write_through (or when the device has no room) a
 * host one backed up to L3. The lock keeps node on device meanwhile. */
static void ctl_mamba_attach(struct hc_cache *c, struct radix_node *node, const uint8_t *src)
{
	struct radix_node_info ni;
	uint64_t slot;
	radix_lock(c->tree, node);
	radix_node_info(node, &ni);
	bool dev = ni.mamba[RADIX_DEV] != RADIX_NO_SLOT;
	if (!dev && !ctl_mdev_alloc(c, &slot)) {
		if (c->mdev_mem && src)
			memcpy(c->mdev_mem + slot * c->mbytes, src, c->mbytes);
		if (radix_mamba_set(c->tree, node, RADIX_DEV, slot))
			hc_slots_free(c->mdev_slots, 1, &slot);
		else
			dev = true;
	}
	if (dev && c->o.write_policy == HC_WRITE_THROUGH) {
		ctl_mamba_to_host(c, node);
	} else if (!dev) {
		radix_node_info(node, &ni);
		if (ni.mamba[RADIX_HOST] == RADIX_NO_SLOT) {
			slot = ctl_mamba_host_new(c, node, src);
			if (slot != RADIX_NO_SLOT &&
			    radix_mamba_set(c->tree, node, RADIX_HOST, slot))
				ctl_mhost_free(c, slot);
		}
	}
	radix_unlock(c->tree, node);
}

int hc_cache_mamba_write(struct hc_cache_req *r, const void *state, size_t len)
{
	if (!r)
		return util_fail(-EINVAL, "hc_cache_mamba_write: NULL request");
	struct hc_cache *c = r->c;
	if (!c->hybrid)
		return util_fail(-EOPNOTSUPP, "hc_cache_mamba_write: not a hybrid cache");
	if (!c->o.no_data && (!state || len != c->mbytes))
		return util_fail(-EINVAL, "hc_cache_mamba_write: %zu bytes, want %zu", len,
				 c->mbytes);
	if (!r->mstate && !(r->mstate = malloc(c->mbytes)))
		return util_fail(-ENOMEM, "cache: out of memory");
	if (state && len == c->mbytes)
		memcpy(r->mstate, state, c->mbytes);
	else
		memset(r->mstate, 0, c->mbytes);
	r->has_mstate = true;
	return 0;
}

int hc_cache_mamba_read(struct hc_cache_req *r, void *dst, size_t len)
{
	if (!r)
		return util_fail(-EINVAL, "hc_cache_mamba_read: NULL request");
	struct hc_cache *c = r->c;
	if (!c->hybrid)
		return util_fail(-EOPNOTSUPP, "hc_cache_mamba_read: not a hybrid cache");
	if (!c->o.no_data && (!dst || len != c->mbytes))
		return util_fail(-EINVAL, "hc_cache_mamba_read: %zu bytes, want %zu", len,
				 c->mbytes);
	int rc = 0;
	pthread_mutex_lock(&c->lock);
	struct radix_node_info ni = {.mamba = {RADIX_NO_SLOT, RADIX_NO_SLOT}};
	if (r->mnode)
		radix_node_info(r->mnode, &ni);
	if (!r->mnode)
		rc = -ENOENT;
	else if (c->o.no_data)
		rc = 0;
	else if (ni.mamba[RADIX_DEV] != RADIX_NO_SLOT)
		memcpy(dst, c->mdev_mem + ni.mamba[RADIX_DEV] * c->mbytes, c->mbytes);
	else if (ni.mamba[RADIX_HOST] != RADIX_NO_SLOT)
		rc = hc_pool_gather(c->mhost_pool, ni.mamba[RADIX_HOST], dst, c->mbytes);
	else
		rc = -ENOENT; /* cannot happen: the pin / lock keeps it */
	pthread_mutex_unlock(&c->lock);
	/* -ENOENT is an answer (nothing usable), not a failure: no message. */
	if (rc && rc != -ENOENT)
		return util_fail(rc, "hc_cache_mamba_read: %s", hc_strerror(rc));
	return rc;
}

int64_t hc_cache_insert(struct hc_cache_req *r, const uint32_t *tokens, size_t ntokens)
{
	if (!r || (!tokens && ntokens))
		return util_fail(-EINVAL, "hc_cache_insert: NULL argument");
	struct hc_cache *c = r->c;
	size_t pages = ntokens / c->ps;
	if (!r->allocated || pages != r->new_first + r->new_n)
		return util_fail(-EINVAL, "hc_cache_insert: %zu pages, not as allocated", pages);
	if (r->dev_pages &&
	    memcmp(tokens, r->tokens, r->dev_pages * c->ps * sizeof(*tokens)) != 0)
		return util_fail(-EINVAL, "hc_cache_insert: tokens do not extend the match");
	uint64_t *arr = malloc((pages ? pages : 1) * sizeof(*arr));
	if (!arr)
		return util_fail(-ENOMEM, "cache: out of memory");
	pthread_mutex_lock(&c->lock);
	int64_t rc = 0;
	if (r->new_first)
		rc = radix_path_slots(r->lock_node, 0, RADIX_DEV, arr);
	struct radix_insert res = {0};
	if (rc >= 0) {
		memcpy(arr + r->new_first, r->new_slots, r->new_n * sizeof(*arr));
		rc = radix_insert(c->tree, tokens, ntokens, arr, &res);
	}
	if (rc >= 0) {
		/* Ours among the pages the tree already had on device: free. */
		for (size_t i = r->new_first; i < res.kept; i++)
			dev_free(c->dev, 1, &arr[i]);
		free(r->new_slots);
		r->new_slots = NULL;
		r->new_n = 0;
		if (c->o.write_policy == HC_WRITE_THROUGH && res.new_pages)
			ctl_queue_backup(c, res.node, res.new_pages);
		if (c->o.write_policy == HC_WRITE_BACK)
			ctl_write_back_ahead(c);
		if (r->has_mstate && res.pages)
			ctl_mamba_attach(c, res.node, r->mstate);
		r->has_mstate = false;
		rc = (int64_t)res.new_pages;
	}
	pthread_mutex_unlock(&c->lock);
	free(arr);
	if (rc < 0)
		return util_fail((int)rc, "hc_cache_insert: %s", hc_strerror((int)rc));
	return rc;
}

static void ctl_req_end(struct hc_cache_req *r, bool keep)
{
	if (!r)
		return;
	struct hc_cache *c = r->c;
	ctl_load_finish(r, keep);
	pthread_mutex_lock(&c->lock);
	ctl_revoke(c, r);
	if (r->new_n)
		dev_free(c->dev, r->new_n, r->new_slots);
	r->new_n = 0;
	ctl_req_relock(c, r, NULL);
	if (r->pin_node)
		radix_unpin_host(c->tree, r->pin_node);
	r->pin_node = NULL;
	bool last = ctl_req_put(r);
	pthread_mutex_unlock(&c->lock);
	if (last)
		ctl_req_free(r);
}

void hc_cache_release(struct hc_cache_req *r)
{
	ctl_req_end(r, true);
}

void hc_cache_abort(struct hc_cache_req *r)
{
	ctl_req_end(r, false);
}

/* ---- background work, eviction, statistics ---- */

int hc_cache_flush(struct hc_cache *c)
{
	if (!c)
		return util_fail(-EINVAL, "hc_cache_flush: NULL cache");
	pthread_mutex_lock(&c->lock);
	while (c->q_d2h.head || c->q_l3.head || c->backups_running || c->pf_running)
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int64_t hc_cache_evict_device(struct hc_cache *c, size_t ntokens)
{
	if (!c)
		return util_fail(-EINVAL, "hc_cache_evict_device: NULL cache");
	pthread_mutex_lock(&c->lock);
	int64_t n = radix_evict_device(c->tree, (ntokens + c->ps - 1) / c->ps, &c->ops);
	pthread_mutex_unlock(&c->lock);
	return n < 0 ? n : n * c->ps;
}

int64_t hc_cache_evict_host(struct hc_cache *c, size_t ntokens)
{
	if (!c)
		return util_fail(-EINVAL, "hc_cache_evict_host: NULL cache");
	pthread_mutex_lock(&c->lock);
	int64_t n = radix_evict_host(c->tree, (ntokens + c->ps - 1) / c->ps, &c->ops);
	pthread_mutex_unlock(&c->lock);
	return n < 0 ? n : n * c->ps;
}

int hc_cache_stats(struct hc_cache *c, struct hc_cache_stats *out, size_t size)
{
	if (!c || !out)
		return util_fail(-EINVAL, "hc_cache_stats: NULL argument");
	struct hc_cache_stats st;
	pthread_mutex_lock(&c->lock);
	st = c->st;
	st.reserved_pages = c->reserved;
	st.dev_pages_used = dev_pages(c->dev) - dev_available(c->dev);
	st.host_pages_used = c->host_pages - hc_slots_available(c->host_slots);
	if (c->hybrid) {
		st.mamba_dev_used = hc_slots_count(c->mdev_slots) -
				    hc_slots_available(c->mdev_slots);
		st.mamba_host_used = c->mhost_n - hc_slots_available(c->mhost_slots);
	}
	pthread_mutex_unlock(&c->lock);
	memset(out, 0, size);
	memcpy(out, &st, size < sizeof(st) ? size : sizeof(st));
	return 0;
}
