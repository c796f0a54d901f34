/* Radix tree eviction: device LRU over leaves, demote vs delete per write
 * policy, write-back (and its failure), host LRU, locks and pins,
 * evictable counters, callbacks that call back in. */
#include "radix_helpers.h"

#define PS 4

/* Three unrelated sequences of 2, 3 and 4 pages, inserted in that order,
 * device slots 100.., 200.., 300... */
struct three {
	struct radix_tree *t;
	uint32_t *s[3];
	struct radix_node *n[3];
	struct rec rec;
	struct radix_evict_ops ops;
};

static void three_setup(struct three *x, enum radix_write_policy pol)
{
	x->t = tree_new(PS, pol);
	rec_init(&x->rec, x->t);
	x->ops = rec_ops(&x->rec);
	for (int i = 0; i < 3; i++) {
		x->s[i] = seq_new((uint32_t)i + 1, (size_t)i + 2, PS);
		size_t np = (size_t)i + 2;
		x->n[i] = ins_dev(x->t, x->s[i], np * PS, (uint64_t)(i + 1) * 100).node;
	}
}

static void three_teardown(struct three *x)
{
	for (int i = 0; i < 3; i++)
		free(x->s[i]);
	radix_destroy(x->t);
}

static size_t pages_of(const struct radix_tree *t, const uint32_t *s, size_t np)
{
	struct radix_match m;
	/* A match touches; tests that check order use info instead. */
	assert_int_equal(radix_match((struct radix_tree *)t, s, np * PS, &m), 0);
	return m.pages;
}

static void test_device_lru_delete(void **state)
{
	(void)state;
	struct three x;

	three_setup(&x, RADIX_WRITE_THROUGH);
	/* Touch the oldest: the LRU is now the second. */
	match_of(x.t, x.s[0], 2 * PS);
	assert_int_equal(radix_evict_device(x.t, 1, &x.ops), 3);
	assert_radix_ok(x.t);
	assert_int_equal(x.rec.nfreed[RADIX_DEV], 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(x.rec.freed[RADIX_DEV][i], 200 + i);
	assert_int_equal(x.rec.nfreed[RADIX_HOST], 0);
	assert_int_equal(stats_of(x.t).nodes, 2);
	assert_int_equal(pages_of(x.t, x.s[1], 3), 0);
	/* Next: the third (older than the touch), then the first. */
	assert_int_equal(radix_evict_device(x.t, 4, &x.ops), 4);
	assert_int_equal(x.rec.freed[RADIX_DEV][3], 300);
	assert_int_equal(radix_evict_device(x.t, 100, &x.ops), 2);
	assert_int_equal(x.rec.freed[RADIX_DEV][7], 100);
	assert_int_equal(radix_evict_device(x.t, 100, &x.ops), 0);
	struct radix_stats st = stats_of(x.t);
	assert_int_equal(st.nodes, 0);
	assert_int_equal(st.dev_evictable, 0);
	assert_radix_ok(x.t);
	three_teardown(&x);
}

/* A node on host too is demoted under every policy. */
static void test_demote_backed(void **state)
{
	(void)state;
	enum radix_write_policy pols[] = {RADIX_WRITE_THROUGH, RADIX_WRITE_THROUGH_SELECTIVE,
					  RADIX_WRITE_BACK};
	for (int p = 0; p < 3; p++) {
		struct three x;
		uint64_t hs[3] = {900, 901, 902};

		three_setup(&x, pols[p]);
		assert_int_equal(radix_set_slots(x.t, x.n[1], 3, RADIX_HOST, hs, NULL), 3);
		match_of(x.t, x.s[0], 2 * PS);
		match_of(x.t, x.s[2], 4 * PS);
		assert_int_equal(radix_evict_device(x.t, 3, &x.ops), 3);
		assert_radix_ok(x.t);
		assert_int_equal(x.rec.wb_calls, 0);
		assert_int_equal(x.rec.nfreed[RADIX_HOST], 0);
		struct radix_node_info ni = info_of(x.n[1]);
		assert_null(ni.dev);
		assert_non_null(ni.host);
		struct radix_match m = match_of(x.t, x.s[1], 3 * PS);
		assert_int_equal(m.pages, 3);
		assert_int_equal(m.dev_pages, 0);
		assert_int_equal(m.host_pages, 3);
		assert_ptr_equal(m.dev_node, radix_root(x.t));
		struct radix_stats st = stats_of(x.t);
		assert_int_equal(st.dev_pages, 6);
		assert_int_equal(st.host_pages, 3);
		assert_int_equal(st.host_evictable, 3);
		three_teardown(&x);
	}
}

static void test_write_back(void **state)
{
	(void)state;
	struct three x;

	three_setup(&x, RADIX_WRITE_BACK);
	/* Oldest (2 pages) is copied to host, then demoted. */
	assert_int_equal(radix_evict_device(x.t, 2, &x.ops), 2);
	assert_radix_ok(x.t);
	assert_int_equal(x.rec.wb_calls, 1);
	struct radix_node_info ni = info_of(x.n[0]);
	assert_null(ni.dev);
	assert_non_null(ni.host);
	assert_int_equal(ni.host[0], 100000);
	assert_int_equal(ni.host[1], 100001);
	assert_int_equal(x.rec.freed[RADIX_DEV][0], 100);

	/* The copy fails: the node is deleted. */
	x.rec.wb_budget = 0;
	assert_int_equal(radix_evict_device(x.t, 3, &x.ops), 3);
	assert_radix_ok(x.t);
	assert_int_equal(x.rec.wb_calls, 2);
	assert_int_equal(stats_of(x.t).write_back_failures, 1);
	assert_int_equal(pages_of(x.t, x.s[1], 3), 0);
	assert_int_equal(stats_of(x.t).nodes, 2);

	/* write_back is required under this policy. */
	struct radix_evict_ops bad = x.ops;
	bad.write_back = NULL;
	assert_int_equal(radix_evict_device(x.t, 1, &bad), -EINVAL);
	bad = x.ops;
	bad.free_slots = NULL;
	assert_int_equal(radix_evict_host(x.t, 1, &bad), -EINVAL);
	three_teardown(&x);
}

/* write_back makes room on host by evicting host pages; anything else
 * from inside the callback is refused. */
static void wb_hook_evict_host(struct rec *r)
{
	struct radix_match m;
	int64_t freed = radix_evict_host(r->tree, 2,
					 &(struct radix_evict_ops){.arg = r,
								   .free_slots = rec_free_slots,
								   .free_mamba = rec_free_mamba});
	assert_int_equal(freed, 2);
	assert_int_equal(radix_match(r->tree, NULL, 0, &m), -EBUSY);
	assert_int_equal(
		radix_evict_device(r->tree, 1,
				   &(struct radix_evict_ops){.arg = r,
							     .free_slots = rec_free_slots,
							     .free_mamba = rec_free_mamba,
							     .write_back = rec_write_back}),
		-EBUSY);
	r->wb_hook = NULL;
}

static void test_write_back_reentry(void **state)
{
	(void)state;
	struct three x;

	three_setup(&x, RADIX_WRITE_BACK);
	/* Demote the first (write back), so a host-only leaf exists. */
	assert_int_equal(radix_evict_device(x.t, 1, &x.ops), 2);
	assert_int_equal(stats_of(x.t).host_pages, 2);
	x.rec.wb_hook = wb_hook_evict_host;
	assert_int_equal(radix_evict_device(x.t, 1, &x.ops), 3);
	assert_radix_ok(x.t);
	assert_int_equal(x.rec.nfreed[RADIX_HOST], 2);
	assert_int_equal(x.rec.freed[RADIX_HOST][0], 100000);
	assert_int_equal(stats_of(x.t).host_pages, 3);
	assert_int_equal(pages_of(x.t, x.s[0], 2), 0);
	three_teardown(&x);
}

/* Free callbacks may not call in at all. */
static struct radix_tree *freeing_tree;
static int free_reentry_rc;
static void free_slots_reenter(void *arg, enum radix_tier tier, const uint64_t *s, size_t n)
{
	(void)arg;
	(void)tier;
	(void)s;
	(void)n;
	free_reentry_rc = (int)radix_evict_host(freeing_tree, 1,
						&(struct radix_evict_ops){
							.free_slots = free_slots_reenter});
}

static void test_free_callback_reentry(void **state)
{
	(void)state;
	struct three x;

	three_setup(&x, RADIX_WRITE_THROUGH);
	freeing_tree = x.t;
	struct radix_evict_ops ops = {.free_slots = free_slots_reenter};
	assert_int_equal(radix_evict_device(x.t, 1, &ops), 2);
	assert_int_equal(free_reentry_rc, -EBUSY);
	assert_radix_ok(x.t);
	three_teardown(&x);
}

static void test_locks_protect(void **state)
{
	(void)state;
	struct three x;

	three_setup(&x, RADIX_WRITE_THROUGH);
	assert_int_equal(radix_lock(x.t, x.n[0]), 0);
	assert_int_equal(radix_dev_evictable(x.t), 7);
	assert_int_equal(radix_evict_device(x.t, 100, &x.ops), 7);
	assert_radix_ok(x.t);
	assert_int_equal(stats_of(x.t).nodes, 1);
	assert_int_equal(pages_of(x.t, x.s[0], 2), 2);
	assert_int_equal(radix_evict_device(x.t, 100, &x.ops), 0);
	assert_int_equal(radix_unlock(x.t, x.n[0]), 0);
	assert_int_equal(radix_dev_evictable(x.t), 2);
	assert_int_equal(radix_evict_device(x.t, 100, &x.ops), 2);
	assert_radix_ok(x.t);
	three_teardown(&x);
}

/* Leaves go first; an inner node becomes a candidate once its last device
 * child is gone, and a lock on a child protects the whole path. */
static void test_leaves_first(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t *a = seq_new(1, 6, PS);
	uint32_t *b = seq_branch(a, 3, 2, 5, PS);
	struct rec rec;
	struct radix_evict_ops ops = rec_ops(&rec);

	rec_init(&rec, t);
	struct radix_node *na = ins_dev(t, a, 6 * PS, 0).node;
	ins_dev(t, b, 5 * PS, 100);
	struct radix_node *shared = info_of(na).parent;
	/* Touch the shared prefix alone: it is now newer than both leaves,
	 * but still not a leaf. */
	match_of(t, a, 3 * PS);
	assert_int_equal(radix_evict_device(t, 1, &ops), 3); /* a's tail, the older leaf */
	assert_int_equal(rec.freed[RADIX_DEV][0], 3);
	assert_int_equal(info_of(shared).children, 1);
	assert_int_equal(radix_evict_device(t, 1, &ops), 2); /* b's tail */
	assert_int_equal(radix_evict_device(t, 1, &ops), 3); /* shared, now a leaf */
	assert_int_equal(rec.freed[RADIX_DEV][5], 0);
	assert_int_equal(stats_of(t).nodes, 0);
	assert_radix_ok(t);
	free(a);
	free(b);
	radix_destroy(t);
}

static void test_host_lru(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t *base = seq_new(1, 2, PS);
	uint32_t *s[3];
	struct rec rec;
	struct radix_evict_ops ops = rec_ops(&rec);
	uint64_t hs[8];

	rec_init(&rec, t);
	/* A host-only parent (2 pages) with three host-only leaves of 1..3. */
	for (int i = 0; i < 8; i++)
		hs[i] = 500 + (uint64_t)i;
	struct radix_insert r;
	assert_int_equal(radix_insert_host(t, base, 2 * PS, hs, NULL, 0, &r), 0);
	struct radix_node *parent = r.node;
	for (int i = 0; i < 3; i++) {
		uint64_t h[5];
		s[i] = seq_branch(base, 2, (uint32_t)i + 2, (size_t)i + 3, PS);
		for (int j = 0; j < 5; j++)
			h[j] = (uint64_t)(i + 1) * 10 + (uint64_t)j;
		size_t np = (size_t)i + 3;
		assert_int_equal(radix_insert_host(t, s[i], np * PS, h, NULL, 0, &r), 0);
	}
	assert_radix_ok(t);
	assert_int_equal(radix_host_evictable(t), 2 + 1 + 2 + 3);
	/* Touch leaf 0: LRU order is now 1, 2, 0, then the parent. */
	match_of(t, s[0], 3 * PS);
	assert_int_equal(radix_evict_host(t, 1, &ops), 2);
	assert_int_equal(rec.freed[RADIX_HOST][0], 22);
	assert_int_equal(radix_evict_host(t, 1, &ops), 3);
	assert_int_equal(rec.freed[RADIX_HOST][2], 32);
	assert_int_equal(info_of(parent).children, 1);
	/* A pin on the last leaf protects it and its parent. */
	struct radix_match m = match_of(t, s[0], 3 * PS);
	assert_int_equal(radix_pin_host(t, m.last_node), 0);
	assert_int_equal(radix_host_evictable(t), 0);
	assert_int_equal(radix_evict_host(t, 10, &ops), 0);
	assert_int_equal(radix_unpin_host(t, m.last_node), 0);
	/* A device lock on a host-only node protects it too. */
	assert_int_equal(radix_lock(t, m.last_node), 0);
	assert_int_equal(radix_evict_host(t, 10, &ops), 0);
	assert_int_equal(radix_unlock(t, m.last_node), 0);
	assert_int_equal(radix_evict_host(t, 10, &ops), 3);
	assert_int_equal(rec.freed[RADIX_HOST][5], 12); /* the leaf before its parent */
	assert_int_equal(rec.freed[RADIX_HOST][6], 500);
	assert_int_equal(stats_of(t).nodes, 0);
	assert_radix_ok(t);
	for (int i = 0; i < 3; i++)
		free(s[i]);
	free(base);
	radix_destroy(t);
}

/* Host copies of nodes still on device are not host-evictable. */
static void test_host_skips_device(void **state)
{
	(void)state;
	struct three x;
	uint64_t hs[4] = {900, 901, 902, 903};

	three_setup(&x, RADIX_WRITE_THROUGH);
	assert_int_equal(radix_set_slots(x.t, x.n[2], 4, RADIX_HOST, hs, NULL), 4);
	assert_int_equal(radix_host_evictable(x.t), 0);
	assert_int_equal(radix_evict_host(x.t, 10, &x.ops), 0);
	assert_int_equal(radix_evict_device(x.t, 9, &x.ops), 9);
	assert_int_equal(radix_host_evictable(x.t), 4);
	assert_int_equal(radix_evict_host(x.t, 10, &x.ops), 4);
	assert_radix_ok(x.t);
	three_teardown(&x);
}

static void test_keep_unbacked(void **state)
{
	(void)state;
	struct radix_opts o = {.page_size = PS, .host_keep_unbacked = true};
	struct radix_tree *t;
	uint32_t *a = seq_new(1, 3, PS);
	uint64_t hs[3] = {1, 2, 3};
	struct rec rec;
	struct radix_evict_ops ops = rec_ops(&rec);
	struct radix_insert r;

	assert_int_equal(radix_create(&o, &t), 0);
	rec_init(&rec, t);
	assert_int_equal(radix_insert_host(t, a, 3 * PS, hs, NULL, 0, &r), 0);
	assert_int_equal(radix_host_evictable(t), 0);
	assert_int_equal(radix_evict_host(t, 10, &ops), 0);
	assert_int_equal(radix_set_backed_up(t, r.node, 3), 0);
	assert_radix_ok(t);
	assert_int_equal(radix_host_evictable(t), 3);
	assert_int_equal(radix_evict_host(t, 10, &ops), 3);
	assert_radix_ok(t);
	free(a);
	radix_destroy(t);
}

/* A device leaf with no host copy but host-only children: deleted with its
 * subtree, every host slot below handed back; a host pin below keeps it. */
static void test_delete_subtree(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t *a = seq_new(1, 2, PS);
	uint32_t *b = seq_branch(a, 2, 2, 5, PS);
	uint32_t *c = seq_branch(b, 3, 3, 4, PS);
	uint64_t hs[5] = {500, 501, 502, 503, 504};
	uint64_t hc[4] = {600, 601, 602, 603};
	struct rec rec;
	struct radix_evict_ops ops = rec_ops(&rec);
	struct radix_insert r;

	rec_init(&rec, t);
	ins_dev(t, a, 2 * PS, 0);
	assert_int_equal(radix_insert_host(t, b, 5 * PS, hs, NULL, 0, &r), 0);
	assert_int_equal(radix_insert_host(t, c, 4 * PS, hc, NULL, 0, &r), 0);
	assert_radix_ok(t);
	assert_int_equal(stats_of(t).nodes, 4);
	assert_int_equal(radix_pin_host(t, r.node), 0);
	assert_int_equal(radix_evict_device(t, 10, &ops), 0);
	assert_int_equal(radix_unpin_host(t, r.node), 0);
	assert_int_equal(radix_evict_device(t, 10, &ops), 2);
	assert_radix_ok(t);
	assert_int_equal(stats_of(t).nodes, 0);
	assert_int_equal(rec.nfreed[RADIX_DEV], 2);
	assert_int_equal(rec.nfreed[RADIX_HOST], 4);
	assert_true(rec_has(&rec, RADIX_HOST, 502));
	assert_true(rec_has(&rec, RADIX_HOST, 503));
	assert_true(rec_has(&rec, RADIX_HOST, 504));
	assert_true(rec_has(&rec, RADIX_HOST, 603));
	free(a);
	free(b);
	free(c);
	radix_destroy(t);
}

/* Many sequences, many single-node evictions: each is a heap pop. */
static void test_many(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(2, RADIX_WRITE_BACK);
	struct rec rec;
	struct radix_evict_ops ops = rec_ops(&rec);
	uint32_t *base = seq_new(9, 4, 2);

	rec_init(&rec, t);
	for (uint32_t i = 0; i < 2000; i++) {
		uint32_t *s = seq_branch(base, i % 4, i + 10, 6, 2);
		struct radix_insert r;
		uint64_t *sl = slots_new((uint64_t)i * 8, 6);
		assert_int_equal(radix_insert(t, s, 12, sl, &r), 0);
		free(sl);
		free(s);
	}
	assert_radix_ok(t);
	size_t dev = stats_of(t).dev_pages;
	size_t freed = 0;
	while (freed < dev / 2) {
		int64_t n = radix_evict_device(t, 1, &ops);
		assert_true(n > 0);
		freed += (size_t)n;
		rec.nfreed[RADIX_DEV] = 0;
		rec.nfreed[RADIX_HOST] = 0;
	}
	assert_radix_ok(t);
	while (radix_evict_host(t, 1, &ops) > 0) {
		rec.nfreed[RADIX_HOST] = 0;
	}
	assert_radix_ok(t);
	assert_int_equal(stats_of(t).host_pages, 0);
	free(base);
	radix_destroy(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_device_lru_delete),
		cmocka_unit_test(test_demote_backed),
		cmocka_unit_test(test_write_back),
		cmocka_unit_test(test_write_back_reentry),
		cmocka_unit_test(test_free_callback_reentry),
		cmocka_unit_test(test_locks_protect),
		cmocka_unit_test(test_leaves_first),
		cmocka_unit_test(test_host_lru),
		cmocka_unit_test(test_host_skips_device),
		cmocka_unit_test(test_keep_unbacked),
		cmocka_unit_test(test_delete_subtree),
		cmocka_unit_test(test_many),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
