/* Radix tree, hybrid models: the Mamba boundary in a match, states across
 * splits, the host Mamba LRU (tombstones, leaves that go with their
 * state), and states under device eviction. */
#include "radix_helpers.h"

#define PS 4

static void test_boundary(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t *a = seq_new(1, 9, PS);

	struct radix_node *n3 = ins_dev(t, a, 9 * PS, 0).node;
	struct radix_node *n2 = match_of(t, a, 6 * PS).last_node;
	struct radix_node *n1 = match_of(t, a, 3 * PS).last_node;

	struct radix_match m = match_of(t, a, 9 * PS);
	assert_ptr_equal(m.mamba_node, radix_root(t));
	assert_int_equal(m.mamba_pages, 0);
	assert_int_equal(radix_mamba_set(t, n1, RADIX_DEV, 11), 0);
	assert_int_equal(radix_mamba_set(t, n3, RADIX_HOST, 33), 0);
	assert_radix_ok(t);
	m = match_of(t, a, 9 * PS);
	assert_int_equal(m.pages, 9);
	assert_ptr_equal(m.mamba_dev_node, n1);
	assert_int_equal(m.mamba_dev_pages, 3);
	assert_ptr_equal(m.mamba_node, n3);
	assert_int_equal(m.mamba_pages, 9);
	/* A shorter query stops short of n3's state. */
	m = match_of(t, a, 8 * PS);
	assert_ptr_equal(m.mamba_node, n1);
	assert_int_equal(m.mamba_pages, 3);
	/* The split kept the state at the end of n3. */
	assert_int_equal(info_of(n3).mamba[RADIX_HOST], 33);
	assert_int_equal(info_of(n3).pages, 1);
	assert_int_equal(info_of(m.last_node).mamba[RADIX_HOST], RADIX_NO_SLOT);
	assert_int_equal(radix_mamba_set(t, n2, RADIX_HOST, 22), 0);
	m = match_of(t, a, 8 * PS);
	assert_ptr_equal(m.mamba_node, n2);
	assert_int_equal(m.mamba_pages, 6);

	uint64_t slot;
	assert_int_equal(radix_mamba_clear(t, n1, RADIX_DEV, &slot), 0);
	assert_int_equal(slot, 11);
	assert_int_equal(radix_mamba_clear(t, n1, RADIX_DEV, &slot), -ENOENT);
	m = match_of(t, a, 9 * PS);
	assert_ptr_equal(m.mamba_dev_node, radix_root(t));
	assert_int_equal(stats_of(t).mamba_host, 2);
	assert_int_equal(stats_of(t).mamba_dev, 0);
	free(a);
	radix_destroy(t);
}

static void test_set_errors(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t *a = seq_new(1, 2, PS);
	uint64_t hs[2] = {5, 6};
	struct radix_insert r;
	uint64_t slot;

	assert_int_equal(radix_insert_host(t, a, 2 * PS, hs, NULL, 0, &r), 0);
	assert_int_equal(radix_mamba_set(t, radix_root(t), RADIX_HOST, 1), -EINVAL);
	assert_int_equal(radix_mamba_set(t, r.node, RADIX_HOST, RADIX_NO_SLOT), -EINVAL);
	assert_int_equal(radix_mamba_set(t, r.node, RADIX_DEV, 1), -EINVAL);
	assert_int_equal(radix_mamba_set(t, r.node, RADIX_HOST, 1), 0);
	assert_int_equal(radix_mamba_set(t, r.node, RADIX_HOST, 2), -EEXIST);
	assert_int_equal(radix_mamba_clear(t, r.node, RADIX_DEV, &slot), -ENOENT);
	assert_int_equal(radix_mamba_clear(t, r.node, RADIX_HOST, NULL), -EINVAL);
	/* Eviction needs free_mamba once a state exists. */
	struct radix_evict_ops ops = {.free_slots = rec_free_slots};
	assert_int_equal(radix_evict_host(t, 1, &ops), -EINVAL);
	assert_radix_ok(t);
	free(a);
	radix_destroy(t);
}

/*
 *   D (device leaf, state)          clock 1
 *   P -+- L1 (host leaf, state)     clock 2
 *      +- L2 (host leaf, state)     clock 3, locked
 *      `- L3 (host leaf, none)      clock 4
 *   P: host, state                  clock 4
 * LRU: D, L1, L2, P.
 */
static void test_mamba_lru(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t *base = seq_new(1, 2, PS);
	uint32_t *d = seq_new(9, 2, PS);
	uint32_t *l[3];
	struct radix_node *ln[3];
	struct rec rec;
	struct radix_evict_ops ops = rec_ops(&rec);
	uint64_t hs[8];

	rec_init(&rec, t);
	struct radix_node *dn = ins_dev(t, d, 2 * PS, 0).node;
	for (int i = 0; i < 3; i++) {
		struct radix_insert r;
		l[i] = seq_branch(base, 2, (uint32_t)i + 2, 4, PS);
		for (int j = 0; j < 4; j++)
			hs[j] = (uint64_t)(i + 1) * 100 + (uint64_t)j;
		assert_int_equal(radix_insert_host(t, l[i], 4 * PS, hs, NULL, 0, &r), 0);
		ln[i] = r.node;
	}
	struct radix_node *p = info_of(ln[0]).parent;
	assert_int_equal(info_of(p).children, 3);
	assert_int_equal(radix_mamba_set(t, dn, RADIX_HOST, 1), 0);
	assert_int_equal(radix_mamba_set(t, ln[0], RADIX_HOST, 2), 0);
	assert_int_equal(radix_mamba_set(t, ln[1], RADIX_HOST, 3), 0);
	assert_int_equal(radix_mamba_set(t, p, RADIX_HOST, 4), 0);
	assert_int_equal(radix_lock(t, ln[1]), 0);
	assert_radix_ok(t);
	size_t nodes = stats_of(t).nodes;

	/* D: on device, so it stays. */
	assert_int_equal(radix_evict_mamba_host(t, 1, &ops), 1);
	assert_int_equal(rec.mamba[RADIX_HOST][0], 1);
	assert_int_equal(stats_of(t).nodes, nodes);
	assert_int_equal(info_of(dn).mamba[RADIX_HOST], RADIX_NO_SLOT);
	/* L1: a host-only leaf goes with its state. */
	assert_int_equal(radix_evict_mamba_host(t, 1, &ops), 1);
	assert_radix_ok(t);
	assert_int_equal(rec.mamba[RADIX_HOST][1], 2);
	assert_int_equal(stats_of(t).nodes, nodes - 1);
	assert_int_equal(rec.nfreed[RADIX_HOST], 2);
	assert_true(rec_has(&rec, RADIX_HOST, 102));
	assert_true(rec_has(&rec, RADIX_HOST, 103));
	/* L2: locked, it stays (a tombstone leaf). */
	assert_int_equal(radix_evict_mamba_host(t, 1, &ops), 1);
	assert_int_equal(rec.mamba[RADIX_HOST][2], 3);
	assert_int_equal(stats_of(t).nodes, nodes - 1);
	/* P: internal, a tombstone: pages stay. */
	assert_int_equal(radix_evict_mamba_host(t, 5, &ops), 1);
	assert_radix_ok(t);
	assert_int_equal(rec.mamba[RADIX_HOST][3], 4);
	assert_int_equal(stats_of(t).nodes, nodes - 1);
	assert_int_equal(stats_of(t).mamba_host, 0);
	struct radix_match m = match_of(t, l[2], 4 * PS);
	assert_int_equal(m.pages, 4);
	assert_ptr_equal(m.mamba_node, radix_root(t));
	assert_int_equal(radix_unlock(t, ln[1]), 0);
	for (int i = 0; i < 3; i++)
		free(l[i]);
	free(base);
	free(d);
	radix_destroy(t);
}

static void test_mamba_pin(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t *a = seq_new(1, 2, PS);
	uint64_t hs[2] = {5, 6};
	struct rec rec;
	struct radix_evict_ops ops = rec_ops(&rec);
	struct radix_insert r;

	rec_init(&rec, t);
	assert_int_equal(radix_insert_host(t, a, 2 * PS, hs, NULL, 0, &r), 0);
	assert_int_equal(radix_mamba_set(t, r.node, RADIX_HOST, 7), 0);
	assert_int_equal(radix_pin_host(t, r.node), 0);
	assert_int_equal(radix_evict_mamba_host(t, 1, &ops), 0);
	assert_int_equal(radix_unpin_host(t, r.node), 0);
	assert_int_equal(radix_evict_mamba_host(t, 1, &ops), 1);
	assert_int_equal(stats_of(t).nodes, 0);
	assert_radix_ok(t);
	free(a);
	radix_destroy(t);
}

/* Device eviction hands states back with the pages. */
static void test_states_under_device_eviction(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_THROUGH);
	uint32_t *a = seq_new(1, 2, PS);
	uint32_t *b = seq_new(2, 2, PS);
	uint64_t hs[2] = {5, 6};
	struct rec rec;
	struct radix_evict_ops ops = rec_ops(&rec);

	rec_init(&rec, t);
	struct radix_node *na = ins_dev(t, a, 2 * PS, 0).node;
	struct radix_node *nb = ins_dev(t, b, 2 * PS, 10).node;
	assert_int_equal(radix_set_slots(t, na, 2, RADIX_HOST, hs, NULL), 2);
	assert_int_equal(radix_mamba_set(t, na, RADIX_DEV, 41), 0);
	assert_int_equal(radix_mamba_set(t, na, RADIX_HOST, 42), 0);
	assert_int_equal(radix_mamba_set(t, nb, RADIX_DEV, 51), 0);
	assert_int_equal(radix_mamba_set(t, nb, RADIX_HOST, 52), 0);
	/* a: demoted, its device state goes, the host one stays. */
	assert_int_equal(radix_evict_device(t, 1, &ops), 2);
	assert_radix_ok(t);
	assert_int_equal(rec.nmamba[RADIX_DEV], 1);
	assert_int_equal(rec.mamba[RADIX_DEV][0], 41);
	assert_int_equal(info_of(na).mamba[RADIX_HOST], 42);
	struct radix_match m = match_of(t, a, 2 * PS);
	assert_ptr_equal(m.mamba_node, na);
	assert_ptr_equal(m.mamba_dev_node, radix_root(t));
	/* b: no host copy, deleted: both states go. */
	assert_int_equal(radix_evict_device(t, 1, &ops), 2);
	assert_radix_ok(t);
	assert_int_equal(rec.mamba[RADIX_DEV][1], 51);
	assert_int_equal(rec.mamba[RADIX_HOST][0], 52);
	free(a);
	free(b);
	radix_destroy(t);
}

/* Write-back copies a device state along with the pages when asked. */
static void test_write_back_state(void **state)
{
	(void)state;
	struct radix_tree *t = tree_new(PS, RADIX_WRITE_BACK);
	uint32_t *a = seq_new(1, 2, PS);
	struct rec rec;
	struct radix_evict_ops ops = rec_ops(&rec);

	rec_init(&rec, t);
	rec.wb_mamba = 777;
	struct radix_node *na = ins_dev(t, a, 2 * PS, 0).node;
	assert_int_equal(radix_mamba_set(t, na, RADIX_DEV, 41), 0);
	assert_int_equal(radix_evict_device(t, 1, &ops), 2);
	assert_radix_ok(t);
	assert_int_equal(rec.wb_mamba_asked, 1);
	assert_int_equal(info_of(na).mamba[RADIX_HOST], 777);
	assert_int_equal(info_of(na).mamba[RADIX_DEV], RADIX_NO_SLOT);
	assert_int_equal(rec.mamba[RADIX_DEV][0], 41);
	struct radix_match m = match_of(t, a, 2 * PS);
	assert_ptr_equal(m.mamba_node, na);
	assert_int_equal(m.host_pages, 2);
	free(a);
	radix_destroy(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_boundary),
		cmocka_unit_test(test_set_errors),
		cmocka_unit_test(test_mamba_lru),
		cmocka_unit_test(test_mamba_pin),
		cmocka_unit_test(test_states_under_device_eviction),
		cmocka_unit_test(test_write_back_state),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
