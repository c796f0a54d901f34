/*
 * The radix tree's invariant checker: radix_check() walks every node and
 * recomputes from scratch what the other files keep incrementally (shape
 * rules, links, counters, lock/pin sums, heap membership and order, page
 * keys). For tests and HC_DEBUG >= 3 builds.
 */
#define _GNU_SOURCE
#include "cache/radix_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---- invariant checker ---- */

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			rc = util_fail(-EUCLEAN, "radix_check: " __VA_ARGS__); \
			goto out;                                              \
		}                                                              \
	} while (0)

static int check_heaps(const struct radix_tree *t, const size_t members[HEAP_COUNT])
{
	int rc = 0;
	for (int w = 0; w < HEAP_COUNT; w++) {
		const struct radix_heap *h = &t->heap[w];
		CHECK(h->n == members[w], "heap %d holds %zu nodes, %zu are candidates", w, h->n,
		      members[w]);
		CHECK(h->cap >= t->st.nodes, "heap %d capacity %zu below %zu nodes", w, h->cap,
		      t->st.nodes);
		for (size_t i = 0; i < h->n; i++) {
			CHECK(h->a[i]->hidx[w] == i, "heap %d entry %zu has index %u", w, i,
			      h->a[i]->hidx[w]);
			CHECK(i == 0 || !radix_heap_less(h->a[i], h->a[(i - 1) / 2]),
			      "heap %d order broken at %zu", w, i);
		}
	}
out:
	return rc;
}

static int check_node(const struct radix_tree *t, const struct radix_node *x, struct radix_stats *s,
		      size_t members[HEAP_COUNT], struct hc_key *tmp)
{
	const struct radix_node *p = x->parent;
	size_t nk = 0, ndev = 0;
	int64_t lock_sum = 0, pin_sum = 0;
	int rc = 0;

	for (size_t i = 0; i < x->kcap; i++) {
		const struct radix_node *c = x->kids[i].node;
		if (!c)
			continue;
		nk++;
		ndev += c->on[RADIX_DEV];
		lock_sum += c->lock_ref;
		pin_sum += c->host_pin;
		CHECK(c->parent == x, "node %" PRIu64 ": child %" PRIu64 " has another parent",
		      x->id, c->id);
		CHECK(x->kids[i].hash == c->hash && x->kids[i].tok == c->tok,
		      "node %" PRIu64 ": stale entry of a child", x->id);
	}
	CHECK(nk == x->nkids, "node %" PRIu64 ": %zu children, counted %zu", x->id, nk, x->nkids);
	CHECK(ndev == x->ndev_kids, "node %" PRIu64 ": %zu device children, counted %zu", x->id,
	      ndev, x->ndev_kids);
	CHECK(x->kcap == 0 ? !x->kids && !nk
			   : (x->kcap & (x->kcap - 1)) == 0 && nk * 4 <= x->kcap * 3,
	      "node %" PRIu64 ": bad child table (cap %zu, %zu entries)", x->id, x->kcap, nk);
	/* The root carries no counts of its own. */
	CHECK(x == t->root || x->lock_ref >= lock_sum,
	      "node %" PRIu64 ": lock ref %d below its children's %" PRId64, x->id, x->lock_ref,
	      lock_sum);
	CHECK(x == t->root || x->host_pin >= pin_sum,
	      "node %" PRIu64 ": host pins %d below its children's %" PRId64, x->id, x->host_pin,
	      pin_sum);
	if (x == t->root) {
		CHECK(!x->npages && !x->end && !x->on[0] && !x->on[1] && !x->lock_ref &&
			      !x->host_pin && x->mamba[0] == RADIX_NO_SLOT &&
			      x->mamba[1] == RADIX_NO_SLOT,
		      "the root holds state");
		for (int w = 0; w < HEAP_COUNT; w++)
			CHECK(x->hidx[w] == HEAP_NONE, "the root is in heap %d", w);
		return 0;
	}
	CHECK(p, "node %" PRIu64 ": no parent", x->id);
	CHECK(radix_kids_find(t, p, x->hash, x->tok) == x,
	      "node %" PRIu64 ": not found in its parent's table", x->id);
	CHECK(x->npages >= 1, "node %" PRIu64 ": empty", x->id);
	CHECK(x->end == p->end + x->npages, "node %" PRIu64 ": end %zu, parent ends at %zu + %zu",
	      x->id, x->end, p->end, x->npages);
	CHECK(x->hash == radix_page_hash(t, x->tok),
	      "node %" PRIu64 ": hash is not its first page's", x->id);
	CHECK(x->on[RADIX_DEV] || x->on[RADIX_HOST], "node %" PRIu64 ": on no tier", x->id);
	CHECK(!x->on[RADIX_DEV] || p == t->root || p->on[RADIX_DEV],
	      "node %" PRIu64 ": on device under a parent that is not", x->id);
	CHECK(x->lock_ref >= 0 && x->host_pin >= 0, "node %" PRIu64 ": negative count", x->id);
	CHECK(x->mamba[RADIX_DEV] == RADIX_NO_SLOT || x->on[RADIX_DEV],
	      "node %" PRIu64 ": device Mamba state without device pages", x->id);
	CHECK(p == t->root || p->last_access >= x->last_access,
	      "node %" PRIu64 ": accessed after its parent", x->id);
	for (int w = 0; w < HEAP_COUNT; w++) {
		bool want = radix_want_heap(t, x, w);
		size_t i = x->hidx[w];
		CHECK(want == (i != HEAP_NONE), "node %" PRIu64 ": heap %d membership %d, want %d",
		      x->id, w, i != HEAP_NONE, want);
		CHECK(i == HEAP_NONE || (i < t->heap[w].n && t->heap[w].a[i] == x),
		      "node %" PRIu64 ": heap %d index %zu is not it", x->id, w, i);
		members[w] += want;
	}
	int64_t got = hc_key_chain(radix_node_prior(t, p), x->tok, x->npages * t->page_size,
				   t->page_size, tmp, x->npages);
	CHECK(got == (int64_t)x->npages, "node %" PRIu64 ": hashing failed", x->id);
	CHECK(!memcmp(tmp, x->keys, x->npages * sizeof(*tmp)),
	      "node %" PRIu64 ": page keys do not chain from the parent", x->id);

	radix_stats_add(s, t, x, true);
out:
	return rc;
}

int radix_check(const struct radix_tree *t)
{
	struct radix_stats s = {0};
	size_t members[HEAP_COUNT] = {0};
	struct radix_node **stack = NULL;
	struct hc_key *tmp = NULL;
	size_t sp = 0, cap = 0, tmp_cap = 0;
	int rc = 0;

	if (!t || !t->root)
		return util_fail(-EINVAL, "radix_check: NULL tree");
	/* Explicit stack: chains of single-child nodes can be deep. */
	cap = 64;
	stack = malloc(cap * sizeof(*stack));
	if (!stack)
		return -ENOMEM;
	stack[sp++] = t->root;
	while (sp) {
		struct radix_node *x = stack[--sp];
		if (x->npages > tmp_cap) {
			free(tmp);
			tmp_cap = x->npages;
			tmp = malloc(tmp_cap * sizeof(*tmp));
			if (!tmp) {
				rc = -ENOMEM;
				goto out;
			}
		}
		CHECK(s.nodes <= t->st.nodes, "more nodes reachable than counted (%zu)",
		      t->st.nodes);
		rc = check_node(t, x, &s, members, tmp);
		if (rc)
			goto out;
		for (size_t i = 0; i < x->kcap; i++) {
			if (!x->kids[i].node)
				continue;
			if (sp == cap) {
				struct radix_node **ns = realloc(stack, 2 * cap * sizeof(*stack));
				if (!ns) {
					rc = -ENOMEM;
					goto out;
				}
				stack = ns;
				cap *= 2;
			}
			stack[sp++] = x->kids[i].node;
		}
	}
	CHECK(s.nodes == t->st.nodes && s.pages == t->st.pages && s.dev_pages == t->st.dev_pages &&
		      s.host_pages == t->st.host_pages && s.mamba_dev == t->st.mamba_dev &&
		      s.mamba_host == t->st.mamba_host,
	      "totals differ from a recount (nodes %zu/%zu pages %zu/%zu dev %zu/%zu host %zu/%zu)",
	      t->st.nodes, s.nodes, t->st.pages, s.pages, t->st.dev_pages, s.dev_pages,
	      t->st.host_pages, s.host_pages);
	CHECK(s.dev_evictable == t->st.dev_evictable && s.host_evictable == t->st.host_evictable,
	      "evictable totals differ from a recount (dev %zu/%zu host %zu/%zu)",
	      t->st.dev_evictable, s.dev_evictable, t->st.host_evictable, s.host_evictable);
	rc = check_heaps(t, members);
out:
	free(stack);
	free(tmp);
	return rc;
}
