/*
 * The radix tree's LRU heaps and counters.
 *
 * Accounting
 * ----------
 * Every counter in struct radix_stats is a sum over nodes of a per-node
 * contribution (node_account()). Any change to a node is bracketed by
 * radix_node_begin() (take its contribution out) and radix_node_end()
 * (put it back, then fix its place in the LRU heaps): totals stay exact
 * and O(1) to read, and radix_check() recomputes them from scratch.
 *
 * LRU
 * ---
 * Three binary min-heaps on (last access, depth, id), each node knowing its
 * index:
 *
 *   HEAP_DEV    device leaves: on device, no child on device, unlocked
 *   HEAP_HOST   host-only leaves: no child, unlocked, unpinned, droppable
 *   HEAP_MAMBA  nodes holding a host Mamba state, unpinned
 *
 * Membership is recomputed in radix_node_end(), so a node enters a heap the
 * moment it becomes a candidate (its last device child demoted, an
 * unlock, ...) and eviction pops in O(log n) per node, never scanning the
 * tree. A touch raises a key, so it only sifts down. Access times are one
 * logical clock tick per match/insert, and a touch covers the whole path,
 * so a parent is never older than its child. Heap arrays are reserved
 * to the node count whenever a node is created, which makes every later
 * push infallible: unlock and eviction never fail for memory.
 */
#define _GNU_SOURCE
#include "cache/radix_internal.h"
#include "util/fault.h"

#include <errno.h>
#include <stdlib.h>

/* ---- LRU heaps ---- */

/* Older first; on a tie (a touch stamps a whole path alike) the deeper node
 * first, so a parent's Mamba state outlives its children's, as an LRU list
 * that moves parents to the front after children would have it. */
bool radix_heap_less(const struct radix_node *a, const struct radix_node *b)
{
	if (a->last_access != b->last_access)
		return a->last_access < b->last_access;
	if (a->end != b->end)
		return a->end > b->end;
	return a->id < b->id;
}

static void heap_place(struct radix_heap *h, int w, size_t i, struct radix_node *x)
{
	h->a[i] = x;
	x->hidx[w] = (uint32_t)i;
}

static void heap_up(struct radix_heap *h, int w, size_t i)
{
	struct radix_node *x = h->a[i];
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!radix_heap_less(x, h->a[p]))
			break;
		heap_place(h, w, i, h->a[p]);
		i = p;
	}
	heap_place(h, w, i, x);
}

void radix_heap_down(struct radix_heap *h, int w, size_t i)
{
	struct radix_node *x = h->a[i];
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && radix_heap_less(h->a[c + 1], h->a[c]))
			c++;
		if (!radix_heap_less(h->a[c], x))
			break;
		heap_place(h, w, i, h->a[c]);
		i = c;
	}
	heap_place(h, w, i, x);
}

static void heap_push(struct radix_tree *t, int w, struct radix_node *x)
{
	struct radix_heap *h = &t->heap[w];
	radix_assert(h->n < h->cap);
	heap_place(h, w, h->n++, x);
	heap_up(h, w, h->n - 1);
}

static void heap_remove(struct radix_tree *t, int w, struct radix_node *x)
{
	struct radix_heap *h = &t->heap[w];
	size_t i = x->hidx[w];
	struct radix_node *last = h->a[--h->n];
	x->hidx[w] = HEAP_NONE;
	if (i < h->n) {
		heap_place(h, w, i, last);
		heap_up(h, w, i);
		radix_heap_down(h, w, last->hidx[w]);
	}
}

/* Room in every heap for every node plus `extra`: pushes never fail. */
int radix_tree_reserve(struct radix_tree *t, size_t extra)
{
	size_t need = t->st.nodes + extra;
	if (need >= HEAP_NONE)
		return -ENOMEM; /* heap indexes are 32-bit */
	for (int w = 0; w < HEAP_COUNT; w++) {
		struct radix_heap *h = &t->heap[w];
		if (h->cap >= need)
			continue;
		size_t cap = h->cap * 2 > need ? h->cap * 2 : need + 16;
		struct radix_node **a = util_fault_realloc(h->a, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		h->a = a;
		h->cap = cap;
	}
	return 0;
}

/* ---- accounting ---- */

bool radix_want_heap(const struct radix_tree *t, const struct radix_node *n, int w)
{
	switch (w) {
	case HEAP_DEV:
		/* Without a host copy the node may be deleted with its subtree,
		 * which a pin below it forbids. */
		return n->on[RADIX_DEV] && !n->ndev_kids && !n->lock_ref &&
		       (n->on[RADIX_HOST] || !n->host_pin);
	case HEAP_HOST:
		return n->on[RADIX_HOST] && !n->on[RADIX_DEV] && !n->nkids && !n->lock_ref &&
		       !n->host_pin && radix_host_droppable(t, n);
	default:
		return n->mamba[RADIX_HOST] != RADIX_NO_SLOT && !n->host_pin;
	}
}

void radix_stats_add(struct radix_stats *s, const struct radix_tree *t, const struct radix_node *n,
		     bool add)
{
	size_t np = n->npages;
	size_t dev = n->on[RADIX_DEV] ? np : 0;
	size_t host = n->on[RADIX_HOST] ? np : 0;
	size_t dev_ev = n->lock_ref ? 0 : dev;
	size_t host_ev = !dev && !n->lock_ref && !n->host_pin && radix_host_droppable(t, n) ? host
											    : 0;
	size_t md = n->mamba[RADIX_DEV] != RADIX_NO_SLOT;
	size_t mh = n->mamba[RADIX_HOST] != RADIX_NO_SLOT;

	if (add) {
		s->nodes++;
		s->pages += np;
		s->dev_pages += dev;
		s->host_pages += host;
		s->dev_evictable += dev_ev;
		s->host_evictable += host_ev;
		s->mamba_dev += md;
		s->mamba_host += mh;
	} else {
		s->nodes--;
		s->pages -= np;
		s->dev_pages -= dev;
		s->host_pages -= host;
		s->dev_evictable -= dev_ev;
		s->host_evictable -= host_ev;
		s->mamba_dev -= md;
		s->mamba_host -= mh;
	}
}

static void node_account(struct radix_tree *t, const struct radix_node *n, bool add)
{
	radix_stats_add(&t->st, t, n, add);
}

void radix_node_begin(struct radix_tree *t, struct radix_node *n)
{
	if (n != t->root)
		node_account(t, n, false);
}

void radix_node_end(struct radix_tree *t, struct radix_node *n)
{
	if (n == t->root)
		return;
	node_account(t, n, true);
	for (int w = 0; w < HEAP_COUNT; w++) {
		bool want = radix_want_heap(t, n, w);
		bool in = n->hidx[w] != HEAP_NONE;
		if (want && !in) {
			heap_push(t, w, n);
		} else if (!want && in) {
			heap_remove(t, w, n);
		} else if (in) {
			heap_up(&t->heap[w], w, n->hidx[w]);
			radix_heap_down(&t->heap[w], w, n->hidx[w]);
		}
	}
}

/* Out of the counters and every heap, for good. */
void radix_node_detach(struct radix_tree *t, struct radix_node *n)
{
	node_account(t, n, false);
	for (int w = 0; w < HEAP_COUNT; w++)
		if (n->hidx[w] != HEAP_NONE)
			heap_remove(t, w, n);
}
