/* Radix tree: insert and match, shared prefixes, splits and page keys,
 * partial pages, device/host prefixes, slots after the fact, locks. */
#include "radix_helpers.h"

#define PS 4

static void test_create_errors(void **state)
{
	(void)state;
	struct radix_tree *t = (struct radix_tree *)1;
	struct radix_opts o = {.page_size = 0};

	assert_int_equal(radix_create(&o, &t), -EINVAL);
	assert_null(t);
	assert_int_equal(radix_create(NULL, &t), -EINVAL);
	o.page_size = 4;
	assert_int_equal(radix_create(&o, NULL), -EINVAL);
	o.write_policy = (enum radix_write_policy)42;
	assert_int_equal(radix_create(&o, &t), -EINVAL);
	assert_last_error_contains("write policy");
	radix_destroy(NULL);
}

static void test_empty(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t *a = seq_new(1, 4, PS);
	struct radix_match m = match_of(t, a, 4 * PS);

	assert_int_equal(m.pages, 0);
	assert_ptr_equal(m.last_node, radix_root(t));
	assert_ptr_equal(m.dev_node, radix_root(t));
	assert_null(m.last_key);
	assert_int_equal(radix_match(t, NULL, 0, &m), 0);
	assert_int_equal(radix_match(t, NULL, 4, &m), -EINVAL);
	struct radix_stats st = stats_of(t);
	assert_int_equal(st.nodes, 0);
	assert_int_equal(st.pages, 0);
	free(a);
	radix_destroy(t);
}

static void test_insert_match(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t *a = seq_new(1, 6, PS);
	uint64_t got[8];

	struct radix_insert r = ins_dev(t, a, 6 * PS, 10);
	assert_int_equal(r.pages, 6);
	assert_int_equal(r.kept, 0);
	assert_int_equal(r.new_pages, 6);
	struct radix_node_info ni = info_of(r.node);
	assert_int_equal(ni.pages, 6);
	assert_int_equal(ni.end, 6);
	assert_non_null(ni.dev);
	assert_null(ni.host);
	assert_int_equal(ni.hits, 0);

	/* Whole, longer and shorter queries. */
	struct radix_match m = match_of(t, a, 6 * PS);
	assert_int_equal(m.pages, 6);
	assert_int_equal(m.dev_pages, 6);
	assert_int_equal(m.host_pages, 0);
	assert_ptr_equal(m.last_node, r.node);
	assert_ptr_equal(m.dev_node, r.node);
	assert_int_equal(radix_path_slots(m.dev_node, 0, RADIX_DEV, got), 6);
	for (int i = 0; i < 6; i++)
		assert_int_equal(got[i], 10 + i);
	assert_int_equal(radix_path_slots(m.dev_node, 0, RADIX_HOST, got), -ENOENT);
	assert_int_equal(info_of(r.node).hits, 1);

	uint32_t *longer = seq_branch(a, 6, 2, 9, PS);
	m = match_of(t, longer, 9 * PS);
	assert_int_equal(m.pages, 6);
	assert_int_equal(info_of(r.node).hits, 2);

	m = match_of(t, a, 2 * PS);
	assert_int_equal(m.pages, 2);
	assert_int_equal(info_of(m.last_node).end, 2);
	assert_ptr_equal(info_of(r.node).parent, m.last_node);
	assert_int_equal(stats_of(t).splits, 1);
	assert_int_equal(radix_path_slots(r.node, 0, RADIX_DEV, got), 6);
	for (int i = 0; i < 6; i++)
		assert_int_equal(got[i], 10 + i);
	/* Slots of a sub-range across the split. */
	assert_int_equal(radix_path_slots(r.node, 1, RADIX_DEV, got), 5);
	assert_int_equal(got[0], 11);

	/* Re-inserting all of it takes nothing. */
	r = ins_dev(t, a, 6 * PS, 50);
	assert_int_equal(r.kept, 6);
	assert_int_equal(r.new_pages, 0);
	assert_int_equal(stats_of(t).dev_pages, 6);
	free(longer);
	free(a);
	radix_destroy(t);
}

static void test_partial_pages(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t *a = seq_new(1, 3, PS);

	/* 2 full pages and 3 tokens: the tail is never inserted. */
	struct radix_insert r = ins_dev(t, a, 2 * PS + 3, 0);
	assert_int_equal(r.pages, 2);
	assert_int_equal(stats_of(t).pages, 2);
	struct radix_match m = match_of(t, a, 3 * PS);
	assert_int_equal(m.pages, 2);
	m = match_of(t, a, 2 * PS - 1);
	assert_int_equal(m.pages, 1);

	/* Less than a page: nothing at all. */
	r = ins_dev(t, a, PS - 1, 0);
	assert_int_equal(r.pages, 0);
	assert_ptr_equal(r.node, radix_root(t));
	m = match_of(t, a, PS - 1);
	assert_int_equal(m.pages, 0);
	free(a);
	radix_destroy(t);
}

static void test_shared_prefix(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t *a = seq_new(1, 8, PS);
	uint32_t *b = seq_branch(a, 5, 2, 7, PS);
	uint32_t *c = seq_new(3, 4, PS);
	uint64_t got[8];

	ins_dev(t, a, 8 * PS, 100);
	struct radix_insert rb = ins_dev(t, b, 7 * PS, 200);
	assert_int_equal(rb.kept, 5);
	assert_int_equal(rb.new_pages, 2);
	struct radix_insert rc = ins_dev(t, c, 4 * PS, 300);
	assert_int_equal(rc.kept, 0);

	struct radix_stats st = stats_of(t);
	assert_int_equal(st.nodes, 4); /* shared 5, a's 3, b's 2, c */
	assert_int_equal(st.pages, 8 + 2 + 4);
	assert_int_equal(st.dev_pages, 14);

	struct radix_match m = match_of(t, b, 7 * PS);
	assert_int_equal(m.pages, 7);
	assert_int_equal(radix_path_slots(m.last_node, 0, RADIX_DEV, got), 7);
	for (int i = 0; i < 5; i++)
		assert_int_equal(got[i], 100 + i);
	assert_int_equal(got[5], 205);
	assert_int_equal(got[6], 206);
	m = match_of(t, c, 4 * PS);
	assert_int_equal(m.pages, 4);
	free(a);
	free(b);
	free(c);
	radix_destroy(t);
}

/* Children differ only in the last token of their first page: the table
 * must tell them apart (a first-token key would not). */
static void test_same_first_token(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t s[40][2 * PS];

	for (int i = 0; i < 40; i++) {
		for (int j = 0; j < 2 * PS; j++)
			s[i][j] = 7;
		s[i][PS - 1] = (uint32_t)i;
		ins_dev(t, s[i], 2 * PS, (uint64_t)i * 10);
	}
	assert_int_equal(stats_of(t).nodes, 40);
	for (int i = 0; i < 40; i++) {
		uint64_t got[2];
		struct radix_match m = match_of(t, s[i], 2 * PS);
		assert_int_equal(m.pages, 2);
		assert_int_equal(radix_path_slots(m.last_node, 0, RADIX_DEV, got), 2);
		assert_int_equal(got[0], (uint64_t)i * 10);
	}
	radix_destroy(t);
}

/* The split divides the key array: no hashing, the lower node's keys stay
 * at the same addresses, and every key equals the chain over the prefix. */
static void check_split_keys(const struct hc_key *seed)
{
	struct radix_opts o = {.page_size = PS, .seed = seed};
	struct radix_tree *t;
	uint32_t *a = seq_new(1, 8, PS);
	struct hc_key want[8], before[8];

	assert_int_equal(radix_create(&o, &t), 0);
	assert_int_equal(hc_key_chain(seed, a, 8 * PS, PS, want, 8), 8);
	struct radix_insert r = ins_dev(t, a, 8 * PS, 0);
	struct radix_node_info ni = info_of(r.node);
	assert_memory_equal(ni.keys, want, sizeof(want));
	memcpy(before, ni.keys, sizeof(before));
	const struct hc_key *old_keys = ni.keys;
	assert_int_equal(stats_of(t).pages_hashed, 8);

	struct radix_match m = match_of(t, a, 3 * PS);
	assert_int_equal(m.pages, 3);
	assert_int_equal(stats_of(t).pages_hashed, 8);
	assert_int_equal(stats_of(t).splits, 1);
	struct radix_node_info up = info_of(m.last_node), low = info_of(r.node);
	assert_int_equal(up.pages, 3);
	assert_int_equal(low.pages, 5);
	assert_ptr_equal(low.keys, old_keys + 3); /* not moved, not copied */
	assert_memory_equal(low.keys, before + 3, 5 * sizeof(struct hc_key));
	assert_memory_equal(up.keys, before, 3 * sizeof(struct hc_key));
	assert_memory_equal(m.last_key, &want[2], sizeof(struct hc_key));

	/* A second split of the lower part, by an insert that diverges. */
	uint32_t *b = seq_branch(a, 6, 2, 7, PS);
	struct hc_key wantb[7];
	assert_int_equal(hc_key_chain(seed, b, 7 * PS, PS, wantb, 7), 7);
	struct radix_insert rb = ins_dev(t, b, 7 * PS, 100);
	assert_int_equal(rb.kept, 6);
	assert_int_equal(stats_of(t).pages_hashed, 9); /* only b's own page */
	assert_memory_equal(info_of(rb.node).keys, &wantb[6], sizeof(struct hc_key));
	assert_ptr_equal(info_of(r.node).keys, old_keys + 6);
	assert_memory_equal(info_of(r.node).keys, &want[6], 2 * sizeof(struct hc_key));
	m = match_of(t, b, 7 * PS);
	assert_memory_equal(m.last_key, &wantb[6], sizeof(struct hc_key));
	free(a);
	free(b);
	radix_destroy(t);
}

static void test_split_keys(void **state)
{
	(void)state;
	struct hc_key seed;

	check_split_keys(NULL);
	assert_int_equal(hc_key_seed("extra", "salt", &seed), 0);
	check_split_keys(&seed);
}

static void test_dev_host_prefix(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t *a = seq_new(1, 10, PS);
	uint64_t *hs = slots_new(500, 10);
	uint64_t got[10];
	struct radix_insert r;

	ins_dev(t, a, 4 * PS, 0);
	/* Prefetched tail: host only, under the device prefix. */
	assert_int_equal(radix_insert_host(t, a, 10 * PS, hs, NULL, 0, &r), 0);
	assert_radix_ok(t);
	assert_int_equal(r.kept, 4);
	assert_int_equal(r.new_pages, 6);
	struct radix_match m = match_of(t, a, 10 * PS);
	assert_int_equal(m.pages, 10);
	assert_int_equal(m.dev_pages, 4);
	assert_int_equal(m.host_pages, 6);
	assert_int_equal(info_of(m.dev_node).end, 4);
	assert_ptr_equal(m.last_node, r.node);
	assert_int_equal(radix_path_slots(m.last_node, 4, RADIX_HOST, got), 6);
	for (int i = 0; i < 6; i++)
		assert_int_equal(got[i], 504 + i);
	struct radix_stats st = stats_of(t);
	assert_int_equal(st.dev_pages, 4);
	assert_int_equal(st.host_pages, 6);
	assert_int_equal(st.host_evictable, 6);

	/* Load back 6 pages: device prefix grows to 10. */
	uint64_t *ds = slots_new(60, 6);
	bool taken[6];
	assert_int_equal(radix_set_slots(t, m.last_node, 6, RADIX_DEV, ds, taken), 6);
	assert_radix_ok(t);
	for (int i = 0; i < 6; i++)
		assert_true(taken[i]);
	m = match_of(t, a, 10 * PS);
	assert_int_equal(m.dev_pages, 10);
	assert_int_equal(m.host_pages, 0);
	assert_int_equal(stats_of(t).host_evictable, 0);
	free(ds);
	free(hs);
	free(a);
	radix_destroy(t);
}

/* Keys handed in by the prefetcher are used as they are. */
static void test_insert_host_keys(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t *a = seq_new(1, 8, PS);
	uint64_t *hs = slots_new(0, 8);
	struct hc_key keys[8];
	struct radix_insert r;

	assert_int_equal(hc_key_chain(NULL, a, 8 * PS, PS, keys, 8), 8);
	ins_dev(t, a, 2 * PS, 0);
	/* Keys for pages 3.. given; page 2 is hashed here. */
	assert_int_equal(radix_insert_host(t, a, 8 * PS, hs, keys + 3, 3, &r), 0);
	assert_radix_ok(t);
	assert_int_equal(stats_of(t).pages_hashed, 3);
	assert_memory_equal(info_of(r.node).keys, keys + 2, 6 * sizeof(struct hc_key));
	assert_int_equal(radix_insert_host(t, a, 8 * PS, hs, keys, 9, &r), -EINVAL);
	free(hs);
	free(a);
	radix_destroy(t);
}

/* Pages present only on host are revived by a device insert. */
static void test_insert_revives(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t *a = seq_new(1, 6, PS);
	uint64_t *hs = slots_new(500, 6);
	struct radix_insert r;
	struct rec rec;
	struct radix_evict_ops ops = rec_ops(&rec);

	rec_init(&rec, t);
	ins_dev(t, a, 2 * PS, 0);
	assert_int_equal(radix_insert_host(t, a, 6 * PS, hs, NULL, 0, &r), 0);
	r = ins_dev(t, a, 6 * PS, 100);
	assert_int_equal(r.kept, 2);
	assert_int_equal(r.new_pages, 0);
	struct radix_match m = match_of(t, a, 6 * PS);
	assert_int_equal(m.dev_pages, 6);
	struct radix_node_info ni = info_of(m.last_node);
	assert_int_equal(ni.dev[0], 102);
	assert_int_equal(ni.host[0], 502);

	/* Demoted by eviction, then revived again; an insert that goes past
	 * the host part both revives and adds. */
	assert_int_equal(radix_evict_device(t, 4, &ops), 4);
	assert_radix_ok(t);
	m = match_of(t, a, 6 * PS);
	assert_int_equal(m.dev_pages, 2);
	uint32_t *b = seq_branch(a, 6, 2, 8, PS);
	r = ins_dev(t, b, 8 * PS, 200);
	assert_int_equal(r.kept, 2);
	assert_int_equal(r.new_pages, 2);
	m = match_of(t, b, 8 * PS);
	assert_int_equal(m.dev_pages, 8);
	free(b);
	free(hs);
	free(a);
	radix_destroy(t);
}

static void test_set_slots_rules(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t *a = seq_new(1, 8, PS);
	uint64_t *hs = slots_new(500, 8);
	bool taken[8];

	struct radix_insert r = ins_dev(t, a, 8 * PS, 0);
	struct radix_match m = match_of(t, a, 3 * PS); /* boundary at 3 */
	/* Not starting at a node boundary. */
	assert_int_equal(radix_set_slots(t, r.node, 4, RADIX_HOST, hs, NULL), -EINVAL);
	assert_int_equal(radix_set_backed_up(t, r.node, 6), -EINVAL);
	/* The lower node only, then the whole path: the first 3 are taken
	 * the second time, the rest were already there. */
	assert_int_equal(radix_set_slots(t, r.node, 5, RADIX_HOST, hs + 3, taken), 5);
	assert_int_equal(radix_set_slots(t, r.node, 8, RADIX_HOST, hs, taken), 3);
	assert_radix_ok(t);
	for (int i = 0; i < 8; i++)
		assert_int_equal(taken[i], i < 3);
	uint64_t got[8];
	assert_int_equal(radix_path_slots(r.node, 0, RADIX_HOST, got), 8);
	for (int i = 0; i < 8; i++)
		assert_int_equal(got[i], 500 + i);
	assert_int_equal(radix_set_backed_up(t, r.node, 8), 0);
	assert_true(info_of(m.last_node).backed_up);
	assert_int_equal(radix_set_slots(t, radix_root(t), 1, RADIX_HOST, hs, NULL), -EINVAL);
	assert_int_equal(radix_set_slots(t, r.node, 9, RADIX_HOST, hs, NULL), -EINVAL);
	assert_int_equal(radix_set_slots(t, r.node, 0, RADIX_HOST, hs, NULL), 0);

	/* Device slots may not leave a hole above them. */
	uint32_t *b = seq_new(2, 4, PS);
	struct radix_insert rb;
	assert_int_equal(radix_insert_host(t, b, 4 * PS, hs, NULL, 0, &rb), 0);
	m = match_of(t, b, 2 * PS);
	assert_int_equal(radix_set_slots(t, rb.node, 2, RADIX_DEV, hs, NULL), -EINVAL);
	assert_int_equal(radix_set_slots(t, rb.node, 4, RADIX_DEV, hs, NULL), 4);
	assert_radix_ok(t);
	free(b);
	free(hs);
	free(a);
	radix_destroy(t);
}

static void test_locks(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t *a = seq_new(1, 6, PS);
	uint32_t *b = seq_branch(a, 2, 2, 5, PS);

	struct radix_insert ra = ins_dev(t, a, 6 * PS, 0);
	struct radix_insert rb = ins_dev(t, b, 5 * PS, 100);
	struct radix_node *shared = info_of(ra.node).parent;
	assert_int_equal(radix_dev_evictable(t), 9);

	assert_int_equal(radix_lock(t, ra.node), 0);
	assert_radix_ok(t);
	assert_int_equal(info_of(ra.node).lock_ref, 1);
	assert_int_equal(info_of(shared).lock_ref, 1);
	assert_int_equal(radix_dev_evictable(t), 3);
	assert_int_equal(radix_lock(t, rb.node), 0);
	assert_int_equal(info_of(shared).lock_ref, 2);
	assert_int_equal(radix_dev_evictable(t), 0);

	/* A split under a lock: both halves carry it. */
	struct radix_match m = match_of(t, a, 4 * PS);
	assert_int_equal(info_of(m.last_node).lock_ref, 1);
	assert_int_equal(radix_unlock(t, ra.node), 0);
	assert_int_equal(info_of(m.last_node).lock_ref, 0);
	assert_int_equal(info_of(shared).lock_ref, 1);
	assert_int_equal(radix_unlock(t, ra.node), -EINVAL);
	assert_int_equal(radix_unlock(t, rb.node), 0);
	assert_int_equal(radix_dev_evictable(t), 9);
	assert_int_equal(radix_lock(t, radix_root(t)), 0);
	assert_int_equal(radix_unlock(t, radix_root(t)), 0);
	assert_int_equal(radix_unpin_host(t, ra.node), -EINVAL);
	assert_int_equal(radix_pin_host(t, ra.node), 0);
	assert_int_equal(info_of(shared).host_pins, 1);
	assert_int_equal(radix_unpin_host(t, ra.node), 0);
	assert_radix_ok(t);
	free(a);
	free(b);
	radix_destroy(t);
}

static void test_access_clock(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t *a = seq_new(1, 4, PS);
	uint32_t *b = seq_branch(a, 2, 2, 4, PS);

	struct radix_insert ra = ins_dev(t, a, 4 * PS, 0);
	struct radix_insert rb = ins_dev(t, b, 4 * PS, 10);
	uint64_t ta = info_of(ra.node).last_access, tb = info_of(rb.node).last_access;
	assert_true(tb > ta);
	struct radix_node *shared = info_of(ra.node).parent;
	assert_int_equal(info_of(shared).last_access, tb);
	assert_int_equal(info_of(shared).hits, 0); /* inserts do not count */
	match_of(t, a, 4 * PS);
	assert_true(info_of(ra.node).last_access > tb);
	assert_int_equal(info_of(ra.node).hits, 1);
	assert_int_equal(info_of(shared).hits, 1);
	assert_int_equal(info_of(rb.node).hits, 0);
	free(a);
	free(b);
	radix_destroy(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_errors),    cmocka_unit_test(test_empty),
		cmocka_unit_test(test_insert_match),     cmocka_unit_test(test_partial_pages),
		cmocka_unit_test(test_shared_prefix),    cmocka_unit_test(test_same_first_token),
		cmocka_unit_test(test_split_keys),       cmocka_unit_test(test_dev_host_prefix),
		cmocka_unit_test(test_insert_host_keys), cmocka_unit_test(test_insert_revives),
		cmocka_unit_test(test_set_slots_rules),  cmocka_unit_test(test_locks),
		cmocka_unit_test(test_access_clock),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
