/*
 * Backups: the device-to-host queue and thread, the host-to-L3 queue and
 * thread, write_back's pages and write-back-ahead.
 */
#define _GNU_SOURCE
#include "cache/cache_internal.h"
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

static void cache_job_free(struct cache_job *j)
{
	if (!j)
		return;
	free(j->dev);
	free(j->keys);
	free(j->host);
	free(j);
}

static void cache_run_l3(struct hc_cache *c, struct cache_job *j, bool held);
static void cache_run_d2h(struct hc_cache *c, struct cache_job *j, bool held);

static void cache_job_push(struct hc_cache *c, struct cache_job *j)
{
	if (c->o.no_data) {
		/* Nothing to copy or write: the job's effects happen now, so a
		 * metadata-only run does not depend on how threads are scheduled
		 * (and pays no hand-off). */
		if (j->l3_only)
			cache_run_l3(c, j, true);
		else
			cache_run_d2h(c, j, true);
		cache_job_free(j);
		return;
	}
	struct cache_queue *q = j->l3_only ? &c->q_l3 : &c->q_d2h;
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
static void cache_queue_l3(struct hc_cache *c, const struct hc_key *keys, const uint64_t *host,
			   size_t n)
{
	if (!c->l3 || n == 0)
		return;
	struct cache_job *j = util_fault_calloc(1, sizeof(*j));
	if (j) {
		j->keys = util_fault_malloc(n * sizeof(*keys));
		j->host = util_fault_malloc(n * sizeof(*host));
	}
	if (!j || !j->keys || !j->host) {
		cache_job_free(j);
		log_warn("cache: out of memory, L3 backup skipped");
		return;
	}
	memcpy(j->keys, keys, n * sizeof(*keys));
	memcpy(j->host, host, n * sizeof(*host));
	j->n = n;
	j->l3_only = true;
	for (size_t i = 0; i < n; i++)
		c->host_busy[host[i]]++;
	cache_job_push(c, j);
}

/* Queue an L3 set of one host Mamba state under key (busy until it ends). */
void cache_queue_l3_mamba(struct hc_cache *c, const struct hc_key *key, uint64_t slot)
{
	if (!c->l3)
		return;
	struct cache_job *j = util_fault_calloc(1, sizeof(*j));
	if (j) {
		j->keys = util_fault_malloc(sizeof(*key));
		j->host = util_fault_malloc(sizeof(slot));
	}
	if (!j || !j->keys || !j->host) {
		cache_job_free(j);
		log_warn("cache: out of memory, L3 Mamba backup skipped");
		return;
	}
	j->keys[0] = *key;
	j->host[0] = slot;
	j->n = 1;
	j->l3_only = true;
	j->mamba = true;
	c->mhost_busy[slot]++;
	cache_job_push(c, j);
}

/* The pages of write_back (cache_mamba.c, the tree's callback): copy the
 * unbacked device node to host now (synchronously: the tree needs the
 * slots), then back it up to L3. */
int cache_write_back_pages(struct hc_cache *c, const struct radix_node *node, uint64_t *host_out)
{
	struct radix_node_info ni;
	struct dev_copy *ev;

	radix_node_info(node, &ni);
	if (cache_host_alloc(c, ni.pages, host_out))
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
	cache_queue_l3(c, ni.keys, host_out, ni.pages);
	return 0;
}

static bool cache_pending(struct hc_cache *c, const struct radix_node *n)
{
	for (size_t i = 0; i < c->npend; i++)
		if (c->pend[i] == n)
			return true;
	return false;
}

static void cache_unpend(struct hc_cache *c, const struct radix_node *n)
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
void cache_queue_backup(struct hc_cache *c, struct radix_node *node, size_t npages)
{
	struct radix_node_info ni;
	radix_node_info(node, &ni);
	if (npages == 0 || cache_pending(c, node))
		return;
	if (c->npend == c->cap_pend) {
		size_t cap = c->cap_pend ? 2 * c->cap_pend : 16;
		struct radix_node **p = util_fault_realloc(c->pend, cap * sizeof(*p));
		if (!p)
			return;
		c->pend = p;
		c->cap_pend = cap;
	}
	struct cache_job *j = util_fault_calloc(1, sizeof(*j));
	if (j)
		j->dev = util_fault_malloc(npages * sizeof(*j->dev));
	if (!j || !j->dev ||
	    radix_path_slots(node, ni.end - npages, RADIX_DEV, j->dev) != (int64_t)npages) {
		cache_job_free(j);
		return;
	}
	j->node = node;
	j->n = npages;
	radix_lock(c->tree, node);
	c->pend[c->npend++] = node;
	c->pend_pages += npages;
	cache_job_push(c, j);
}

/* write_back (c->lock held): while fewer than an eighth of the device
 * pages are free or on their way to host, copy the least recently used
 * device leaf to host in the background. The eviction that comes next
 * then drops a page that is on host already instead of copying it under
 * the lock. */
void cache_write_back_ahead(struct hc_cache *c)
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
		cache_queue_backup(c, x, ni.pages); /* locks x: the next one comes up */
		if (c->pend_pages == before)
			return;
		c->st.write_back_ahead_pages += ni.pages;
	}
}

/* Keys of the npages ending at node (walks up across node boundaries). */
static void cache_range_keys(const struct radix_node *node, size_t npages, struct hc_key *out)
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
static void cache_lock_bg(struct hc_cache *c, bool held)
{
	if (!held)
		pthread_mutex_lock(&c->lock);
}

static void cache_unlock_bg(struct hc_cache *c, bool held)
{
	if (!held)
		pthread_mutex_unlock(&c->lock);
}

/* An L3 job on its way: the store's started op (NULL once over, or when
 * there was nothing to start) and the job's outcome so far. */
struct cache_l3_run {
	struct cache_job *j;
	size_t jobs; /* queued jobs it stands for */
	struct hc_store_op *op;
	int rc;
};

/* Start job x->j's write to L3 (no_data: the key sets, at once). */
static void cache_l3_start(struct hc_cache *c, struct cache_l3_run *x)
{
	struct cache_job *j = x->j;
	x->op = NULL;
	x->rc = 0;
	if (j->mamba && c->mkeyset) {
		x->rc = cache_keyset_add(c->mkeyset, &j->keys[0]);
	} else if (j->mamba) {
		struct hc_pool_transfer t = {.pool = "mamba",
					     .keys = j->keys,
					     .n = 1,
					     .pages = j->host};
		x->rc = hc_store_set_v2_start(c->store, &t, 1, &x->op);
	} else if (c->keyset) {
		x->rc = cache_l3_set(c, j->keys, j->n, j->host);
	} else {
		x->rc = hc_store_set_start(c->store, j->keys, j->n, j->host, NULL, &x->op);
	}
}

/* Wait for job x->j's write and account for it: the host slots it held
 * are released (freed if their pages were dropped meanwhile). */
static void cache_l3_finish(struct hc_cache *c, struct cache_l3_run *x, bool held)
{
	struct cache_job *j = x->j;
	if (x->op) {
		x->rc = (int)hc_store_op_wait(x->op);
		x->op = NULL;
	}
	cache_lock_bg(c, held);
	if (j->mamba) {
		if (x->rc)
			log_warn("cache: L3 backup of a Mamba state failed: %s",
				 hc_strerror(x->rc));
		else
			c->st.mamba_l3_write++;
		uint64_t s = j->host[0];
		if (--c->mhost_busy[s] == 0 && c->mhost_deferred[s]) {
			c->mhost_deferred[s] = false;
			hc_slots_free(c->mhost_slots, 1, &s);
		}
		cache_unlock_bg(c, held);
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
	cache_unlock_bg(c, held);
}

static void cache_run_l3(struct hc_cache *c, struct cache_job *j, bool held)
{
	struct cache_l3_run x = {.j = j};
	cache_l3_start(c, &x);
	cache_l3_finish(c, &x, held);
}

static void cache_run_d2h(struct hc_cache *c, struct cache_job *j, bool held)
{
	uint64_t *host = util_fault_malloc(j->n * sizeof(*host));
	bool *taken = util_fault_calloc(j->n, sizeof(*taken));
	struct dev_copy *ev = NULL;
	int rc = host && taken ? 0 : -ENOMEM;
	/* Only slots the allocator gave are freed on failure: host holds
	 * whatever malloc left there until then (stale numbers of live slots). */
	bool have_slots = false;

	cache_lock_bg(c, held);
	if (!rc)
		rc = held ? cache_host_alloc(c, j->n, host)
			  : cache_host_alloc_backup(c, j->n, host);
	have_slots = !rc;
	cache_unlock_bg(c, held);
	if (!rc)
		rc = dev_copy_submit(c->dev, HC_COPY_D2H, j->dev, host, j->n, &ev);
	if (!rc) {
		rc = dev_copy_wait(ev, UINT32_MAX);
		dev_copy_free(ev);
	}

	cache_lock_bg(c, held);
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
			struct hc_key *keys = util_fault_malloc(j->n * sizeof(*keys));
			if (keys) {
				cache_range_keys(j->node, j->n, keys);
				cache_queue_l3(c, keys, host, j->n);
				free(keys);
			}
		}
	} else if (have_slots) {
		hc_slots_free(c->host_slots, j->n, host);
	}
	radix_unlock(c->tree, j->node);
	cache_unpend(c, j->node);
	c->pend_pages -= j->n;
	cache_unlock_bg(c, held);
	free(host);
	free(taken);
}

/* Append the KV L3 jobs queued behind j to it, up to CTL_BATCH pages in
 * all (c->lock held): inserts are often a few pages each, and one store
 * batch of many pages keeps a slow store busy where many small ones
 * would leave it waiting. Returns how many jobs j now stands for. */
static size_t cache_merge_l3(struct cache_queue *q, struct cache_job *j)
{
	size_t jobs = 1;
	while (!j->mamba && q->head && !q->head->mamba && j->n + q->head->n <= CTL_BATCH) {
		struct cache_job *x = q->head;
		struct hc_key *keys = util_fault_realloc(j->keys, (j->n + x->n) * sizeof(*keys));
		if (keys)
			j->keys = keys;
		uint64_t *host = keys ? util_fault_realloc(j->host, (j->n + x->n) * sizeof(*host))
				      : NULL;
		if (!host)
			break;
		j->host = host;
		memcpy(j->keys + j->n, x->keys, x->n * sizeof(*keys));
		memcpy(j->host + j->n, x->host, x->n * sizeof(*host));
		j->n += x->n;
		q->head = x->next;
		if (!q->head)
			q->tail = NULL;
		cache_job_free(x);
		jobs++;
	}
	return jobs;
}

/* The next job of q, taken off it (c->lock held); NULL when empty. */
static struct cache_job *cache_take(struct cache_queue *q)
{
	struct cache_job *j = q->head;
	if (j) {
		q->head = j->next;
		if (!q->head)
			q->tail = NULL;
	}
	return j;
}

/* A job is over (c->lock held). */
static void cache_job_over(struct hc_cache *c, size_t jobs)
{
	c->backups_running--;
	c->st.backups_pending -= jobs;
	pthread_cond_broadcast(&c->cond);
}

/* Runs the device -> host queue until stopped and drained. */
static void cache_run_queue(struct hc_cache *c, struct cache_queue *q)
{
	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!q->head && !c->stop)
			pthread_cond_wait(&c->wake_d2h, &c->lock);
		struct cache_job *j = cache_take(q);
		if (!j)
			break;
		c->backups_running++;
		pthread_mutex_unlock(&c->lock);
		cache_run_d2h(c, j, false);
		cache_job_free(j);
		pthread_mutex_lock(&c->lock);
		cache_job_over(c, 1);
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
static void cache_run_l3_queue(struct hc_cache *c)
{
	struct cache_queue *q = &c->q_l3;
	struct cache_l3_run run[2];
	unsigned nrun = 0;
	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!nrun && !q->head && !(c->stop && c->d2h_done))
			pthread_cond_wait(&c->wake_l3, &c->lock);
		struct cache_job *j = nrun < 2 ? cache_take(q) : NULL;
		if (j) {
			struct cache_l3_run *x = &run[nrun++];
			*x = (struct cache_l3_run){.j = j, .jobs = cache_merge_l3(q, j)};
			c->backups_running++;
			pthread_mutex_unlock(&c->lock);
			cache_l3_start(c, x);
			pthread_mutex_lock(&c->lock);
			/* One more may start before the first is waited for. */
			if (nrun < 2 && q->head)
				continue;
		}
		if (!nrun)
			break;
		pthread_mutex_unlock(&c->lock);
		cache_l3_finish(c, &run[0], false);
		cache_job_free(run[0].j);
		pthread_mutex_lock(&c->lock);
		cache_job_over(c, run[0].jobs);
		run[0] = run[1];
		nrun--;
	}
	pthread_mutex_unlock(&c->lock);
}

void *cache_backup_thread(void *arg)
{
	struct hc_cache *c = arg;
	cache_run_queue(c, &c->q_d2h);
	return NULL;
}

void *cache_l3_thread(void *arg)
{
	struct hc_cache *c = arg;
	cache_run_l3_queue(c);
	return NULL;
}
