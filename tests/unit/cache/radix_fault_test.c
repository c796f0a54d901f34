/* Radix tree: every allocation of a script of inserts, splits and matches
 * failed in turn (issue 15). A failed call returns -ENOMEM, takes no slot
 * and leaves a tree that radix_check() accepts and that holds exactly what
 * the calls that succeeded put in it; the same script without a failure
 * then completes it, and every slot comes back once on eviction. */
#include "radix_helpers.h"

#include "util/fault.h"

#define PS 4
#define PAGES 8
#define NSEQ 4

struct script {
	uint32_t *seq[NSEQ];
	bool failed[NSEQ]; /* its insert failed in the faulty round */
};

/* Slots of sequence i's pages: round 0 is the faulty one, 1 the clean. */
static uint64_t slot_base(int round, int i)
{
	return 1000u * (uint64_t)(2 * i + round + 1);
}

static void script_init(struct script *s)
{
	/* A; B shares A's first 3 pages (splits A); C shares B's first 5
	 * (splits B's tail); D shares A's first page only. */
	s->seq[0] = seq_new(1, PAGES, PS);
	s->seq[1] = seq_branch(s->seq[0], 3, 2, PAGES, PS);
	s->seq[2] = seq_branch(s->seq[1], 5, 3, PAGES, PS);
	s->seq[3] = seq_branch(s->seq[0], 1, 4, PAGES, PS);
	memset(s->failed, 0, sizeof(s->failed));
}

static void script_free(struct script *s)
{
	for (int i = 0; i < NSEQ; i++)
		free(s->seq[i]);
}

static void ok_or_enomem(int64_t rc, const char *what, uint64_t nth)
{
	if (rc >= 0)
		return;
	if (rc != -ENOMEM || !nth || !util_fault_fired())
		fail_msg("%s with allocation %llu failed: %s (%s)", what, (unsigned long long)nth,
			 hc_strerror((int)rc), hc_last_error());
}

static void run_script(struct radix_tree *t, struct script *s, int round, uint64_t nth)
{
	for (int i = 0; i < NSEQ; i++) {
		struct radix_match m;
		int rc = radix_match(t, s->seq[i], PAGES * PS, &m);
		ok_or_enomem(rc, "match", nth);
		assert_radix_ok(t);
		/* A partial match over a longer prefix splits a node. */
		rc = radix_match(t, s->seq[i], (PAGES / 2 + 1) * PS, &m);
		ok_or_enomem(rc, "partial match", nth);
		assert_radix_ok(t);

		uint64_t *sl = slots_new(slot_base(round, i), PAGES);
		struct radix_insert res;
		rc = radix_insert(t, s->seq[i], PAGES * PS, sl, &res);
		ok_or_enomem(rc, "insert", nth);
		assert_radix_ok(t);
		if (rc)
			s->failed[i] = true;
		else {
			/* The tree holds the whole sequence on device now. */
			struct radix_match full;
			int mrc = radix_match(t, s->seq[i], PAGES * PS, &full);
			ok_or_enomem(mrc, "match after insert", nth);
			if (mrc == 0)
				assert_int_equal(full.dev_pages, PAGES);
		}
		free(sl);
	}
}

/* Evicts everything: every device slot the tree took comes back once; it
 * is one a successful insert gave, never one of a failed insert. */
static void drain(struct radix_tree *t, const struct script *s)
{
	struct rec rec, *r = &rec;
	rec_init(r, t);
	struct radix_evict_ops ops = rec_ops(r);
	size_t have = stats_of(t).dev_pages;
	int64_t got = radix_evict_device(t, 1u << 20, &ops);
	assert_int_equal(got, (int64_t)have);
	assert_int_equal(r->nfreed[RADIX_DEV], have);
	for (size_t i = 0; i < r->nfreed[RADIX_DEV]; i++) {
		uint64_t a = r->freed[RADIX_DEV][i];
		int round = (int)((a / 1000 - 1) % 2), seq = (int)((a / 1000 - 1) / 2);
		assert_true(a >= 1000 && seq < NSEQ && a % 1000 < PAGES);
		if (round == 0 && s->failed[seq])
			fail_msg("slot %llu of a failed insert is the tree's",
				 (unsigned long long)a);
		for (size_t j = 0; j < i; j++)
			if (r->freed[RADIX_DEV][j] == a)
				fail_msg("slot %llu handed back twice", (unsigned long long)a);
	}
	assert_radix_ok(t);
}

/* One round with allocation nth failed (0: none); returns the allocations. */
static uint64_t one_round(uint64_t nth)
{
	struct script s;
	script_init(&s);
	util_fault_arm(HC_FAULT_ALLOC, nth);
	struct radix_opts o = {.page_size = PS, .write_policy = RADIX_WRITE_THROUGH};
	struct radix_tree *t = NULL;
	int rc = radix_create(&o, &t);
	ok_or_enomem(rc, "create", nth);
	if (rc == 0)
		run_script(t, &s, 0, nth);
	util_fault_disarm();
	uint64_t seen = util_fault_seen(HC_FAULT_ALLOC);
	if (rc)
		t = tree_new(PS, RADIX_WRITE_THROUGH);
	if (nth == 0)
		assert_false(s.failed[0] || s.failed[1] || s.failed[2] || s.failed[3]);

	/* Without a failure the script completes the tree: every sequence
	 * matches in full on device. */
	run_script(t, &s, 1, 0);
	for (int i = 0; i < NSEQ; i++)
		assert_int_equal(match_of(t, s.seq[i], PAGES * PS).dev_pages, PAGES);
	drain(t, &s);
	radix_destroy(t);
	script_free(&s);
	return seen;
}

static void radix_alloc_sweep(void **state)
{
	(void)state;
	uint64_t total = one_round(0);
	assert_true(total >= 10);
	for (uint64_t n = 1; n <= total; n++)
		one_round(n);
	print_message("%llu allocations swept\n", (unsigned long long)total);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(radix_alloc_sweep),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
