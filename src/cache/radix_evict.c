/*
 * Radix tree eviction: device (demote, write back, or delete), host, and
 * host Mamba states, each popping its LRU heap (radix_lru.c) until enough
 * is freed.
 *
 * Callbacks run inside the call. t->in_cb says which one is running and
 * so what it may call back into: write_back may evict host pages and
 * host Mamba states (to make room) but never touches the node it copies,
 * which is on device; free_slots and free_mamba may call nothing, which
 * lets a subtree be detached, reported and freed in one pass.
 */
#define _GNU_SOURCE
#include "cache/radix_internal.h"

#include <errno.h>
#include <stdlib.h>

/* ---- eviction ---- */

static void cb_free_slots(struct radix_tree *t, const struct radix_evict_ops *ops,
			  enum radix_tier tier, const uint64_t *slots, size_t n)
{
	int saved = t->in_cb;
	t->in_cb = CB_FREE;
	ops->free_slots(ops->arg, tier, slots, n);
	t->in_cb = saved;
}

static void cb_free_mamba(struct radix_tree *t, const struct radix_evict_ops *ops,
			  enum radix_tier tier, uint64_t slot)
{
	int saved = t->in_cb;
	t->in_cb = CB_FREE;
	ops->free_mamba(ops->arg, tier, slot);
	t->in_cb = saved;
}

/* Delete x and everything below it, handing every slot and state back.
 * Free callbacks may not call into the tree (CB_FREE), so each node can be
 * detached, reported and freed in one pass. */
static void subtree_delete(struct radix_tree *t, struct radix_node *x,
			   const struct radix_evict_ops *ops)
{
	struct radix_node *parent = x->parent;
	struct radix_node *list = x;

	radix_node_begin(t, parent);
	radix_kids_del(parent, x);
	radix_node_end(t, parent);
	x->link = NULL;
	while (list) {
		struct radix_node *y = list;
		list = y->link;
		radix_node_detach(t, y);
		for (size_t i = 0; i < y->kcap; i++) {
			struct radix_node *c = y->kids[i].node;
			if (c) {
				c->link = list;
				list = c;
			}
		}
		/* States first: a state never outlives the pages it sits on. */
		for (int tier = 0; tier < 2; tier++)
			if (y->mamba[tier] != RADIX_NO_SLOT)
				cb_free_mamba(t, ops, tier, y->mamba[tier]);
		for (int tier = 0; tier < 2; tier++)
			if (y->on[tier])
				cb_free_slots(t, ops, tier, y->slots[tier], y->npages);
		free(y->kids);
		free(y);
	}
}

static void demote(struct radix_tree *t, struct radix_node *x, const struct radix_evict_ops *ops)
{
	struct radix_node *p = x->parent;
	uint64_t state = x->mamba[RADIX_DEV];

	radix_node_begin(t, x);
	radix_node_begin(t, p);
	x->on[RADIX_DEV] = false;
	x->mamba[RADIX_DEV] = RADIX_NO_SLOT;
	p->ndev_kids--;
	radix_node_end(t, x);
	radix_node_end(t, p);
	if (state != RADIX_NO_SLOT)
		cb_free_mamba(t, ops, RADIX_DEV, state);
	cb_free_slots(t, ops, RADIX_DEV, x->slots[RADIX_DEV], x->npages);
}

static void write_back(struct radix_tree *t, struct radix_node *x,
		       const struct radix_evict_ops *ops)
{
	uint64_t state = RADIX_NO_SLOT;
	bool want_state = x->mamba[RADIX_DEV] != RADIX_NO_SLOT &&
			  x->mamba[RADIX_HOST] == RADIX_NO_SLOT;
	int rc;

	t->in_cb = CB_WRITE_BACK;
	rc = ops->write_back(ops->arg, x, x->slots[RADIX_HOST], want_state ? &state : NULL);
	t->in_cb = CB_NONE;
	if (rc) {
		t->st.write_back_failures++;
		return;
	}
	radix_node_begin(t, x);
	x->on[RADIX_HOST] = true;
	if (want_state && state != RADIX_NO_SLOT && x->mamba[RADIX_HOST] == RADIX_NO_SLOT)
		x->mamba[RADIX_HOST] = state;
	radix_node_end(t, x);
}

static int check_ops(const struct radix_tree *t, const struct radix_evict_ops *ops, bool need_wb)
{
	if (!t || !ops || !ops->free_slots)
		return util_fail(-EINVAL, "radix eviction: free_slots callback missing");
	if (!ops->free_mamba && (t->st.mamba_dev || t->st.mamba_host))
		return util_fail(-EINVAL, "radix eviction: free_mamba callback missing");
	if (need_wb && t->policy == RADIX_WRITE_BACK && !ops->write_back)
		return util_fail(-EINVAL, "radix eviction: write_back callback missing");
	return 0;
}

int64_t radix_evict_device(struct radix_tree *t, size_t npages, const struct radix_evict_ops *ops)
{
	size_t freed = 0;
	int rc = check_ops(t, ops, true);

	if (rc)
		return rc;
	RADIX_ENTER(t, CB_NONE);
	while (freed < npages && t->heap[HEAP_DEV].n) {
		struct radix_node *x = t->heap[HEAP_DEV].a[0];
		size_t np = x->npages;
		if (!x->on[RADIX_HOST] && t->policy == RADIX_WRITE_BACK)
			write_back(t, x, ops);
		/* The write-back callback may have evicted host pages, but
		 * never x: it is on device. */
		radix_assert(t->heap[HEAP_DEV].a[0] == x);
		if (x->on[RADIX_HOST])
			demote(t, x, ops);
		else
			subtree_delete(t, x, ops);
		freed += np;
	}
	radix_assert_expensive(t);
	return (int64_t)freed;
}

int64_t radix_evict_host(struct radix_tree *t, size_t npages, const struct radix_evict_ops *ops)
{
	size_t freed = 0;
	int rc = check_ops(t, ops, false);

	if (rc)
		return rc;
	RADIX_ENTER(t, CB_WRITE_BACK);
	while (freed < npages && t->heap[HEAP_HOST].n) {
		struct radix_node *x = t->heap[HEAP_HOST].a[0];
		freed += x->npages;
		subtree_delete(t, x, ops);
	}
	radix_assert_expensive(t);
	return (int64_t)freed;
}

int64_t radix_evict_mamba_host(struct radix_tree *t, size_t nstates,
			       const struct radix_evict_ops *ops)
{
	size_t freed = 0;
	int rc = check_ops(t, ops, false);

	if (rc)
		return rc;
	RADIX_ENTER(t, CB_WRITE_BACK);
	while (freed < nstates && t->heap[HEAP_MAMBA].n) {
		struct radix_node *x = t->heap[HEAP_MAMBA].a[0];
		uint64_t state = x->mamba[RADIX_HOST];
		radix_node_begin(t, x);
		x->mamba[RADIX_HOST] = RADIX_NO_SLOT;
		radix_node_end(t, x);
		cb_free_mamba(t, ops, RADIX_HOST, state);
		freed++;
		if (!x->nkids && !x->on[RADIX_DEV] && !x->lock_ref && !x->host_pin)
			subtree_delete(t, x, ops);
	}
	radix_assert_expensive(t);
	return (int64_t)freed;
}
