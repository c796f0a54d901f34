/*
 * Radix tree against a reference model, over thousands of random steps.
 *
 *   radix_random_test [steps=3000] [seed=1]
 *
 * The model is a set of cached page-prefixes (a prefix of i pages, keyed by
 * a hash of its tokens), each with its device slot, host slot, Mamba states,
 * lock and pin counts, and L3 flag. Every step (insert on device or host,
 * match, lock/pin, copy completions, Mamba states, the three evictions)
 * is predicted by the model or checked against it through the callbacks:
 * each slot the tree hands back must be one the model says it holds, on a
 * page no lock or pin protects. radix_check() runs after every step, and
 * the tree's counters must equal the model's.
 */
#include "radix_helpers.h"

#include <inttypes.h>
#include <stdio.h>

#define MAXP 12 /* pages per sequence */
#define NBASE 6
#define NENT (1u << 16)
#define NSLOT (1u << 18)
#define NHELD 32

struct ment {
	uint64_t h;
	uint32_t len;
	bool used;
	int64_t dev, host;
	int64_t mamba[2];
	int lock, pin;
	bool backed;
};

enum op { OP_OTHER, OP_EVICT_DEV, OP_EVICT_HOST, OP_EVICT_MAMBA };

static struct model {
	struct ment ent[NENT];
	uint32_t list[NENT]; /* used entries */
	size_t nlist;
	int32_t dev_owner[NSLOT], host_owner[NSLOT], mamba_owner[2][NSLOT];
	uint64_t next_dev, next_host, next_mamba;
	size_t present, ndev, nhost, nmamba[2];
	/* per eviction call */
	enum op op;
	size_t freed_dev, freed_host, freed_mamba_host;
	bool keep_unbacked;
	int wb_fail_pct;
	/* coverage, printed per run */
	size_t n_hit, n_partial_hit, n_host_hit, n_mamba_hit, n_evicted[3], n_wb, n_wb_fail;
	size_t max_pages;
	struct radix_tree *t;
} M;

static uint64_t rng;
static uint32_t rnd(uint32_t n)
{
	rng = test_mix(rng);
	return n ? (uint32_t)(rng % n) : 0;
}

/* ---- model entries ---- */

static uint32_t ent_find(uint64_t h, uint32_t len, bool create)
{
	uint32_t i = (uint32_t)(h ^ len) & (NENT - 1);
	for (;; i = (i + 1) & (NENT - 1)) {
		struct ment *e = &M.ent[i];
		if (e->used && e->h == h && e->len == len)
			return i;
		if (!e->used) {
			if (!create)
				return UINT32_MAX;
			assert_true(M.nlist < NENT / 2);
			*e = (struct ment){.h = h,
					   .len = len,
					   .used = true,
					   .dev = -1,
					   .host = -1,
					   .mamba = {-1, -1}};
			M.list[M.nlist++] = i;
			return i;
		}
	}
}

static bool ent_present(const struct ment *e)
{
	return e->dev >= 0 || e->host >= 0;
}

static void ent_set(uint32_t i, enum radix_tier tier, int64_t slot)
{
	struct ment *e = &M.ent[i];
	bool was = ent_present(e);
	int64_t *f = tier == RADIX_DEV ? &e->dev : &e->host;
	size_t *cnt = tier == RADIX_DEV ? &M.ndev : &M.nhost;
	int32_t *owner = tier == RADIX_DEV ? M.dev_owner : M.host_owner;

	if (*f >= 0) {
		(*cnt)--;
		owner[*f] = -1;
	}
	*f = slot;
	if (slot >= 0) {
		(*cnt)++;
		owner[slot] = (int32_t)i;
	}
	bool is = ent_present(e);
	M.present += (size_t)is - (size_t)was;
	if (!is) {
		/* Gone from the tree: nothing may still hang on it. */
		assert_int_equal(e->mamba[0], -1);
		assert_int_equal(e->mamba[1], -1);
		assert_int_equal(e->lock, 0);
		assert_int_equal(e->pin, 0);
		e->backed = false;
	}
}

static void ent_set_mamba(uint32_t i, enum radix_tier tier, int64_t slot)
{
	struct ment *e = &M.ent[i];
	if (e->mamba[tier] >= 0) {
		M.nmamba[tier]--;
		M.mamba_owner[tier][e->mamba[tier]] = -1;
	}
	e->mamba[tier] = slot;
	if (slot >= 0) {
		M.nmamba[tier]++;
		M.mamba_owner[tier][slot] = (int32_t)i;
	}
}

/* ---- sequences ---- */

struct seq {
	uint32_t tok[MAXP * 8 + 8];
	size_t ntok, npages;
	uint64_t ph[MAXP + 1]; /* ph[i]: hash of the first i pages */
	uint32_t ent[MAXP + 1];
};

static uint32_t base[NBASE][MAXP * 8];
static uint32_t ps;

static void seq_make(struct seq *s)
{
	const uint32_t *b = base[rnd(NBASE)];
	s->npages = 1 + rnd(MAXP);
	s->ntok = s->npages * ps;
	memcpy(s->tok, b, s->ntok * sizeof(uint32_t));
	if (rnd(2)) {
		for (size_t i = rnd((uint32_t)s->ntok); i < s->ntok; i++)
			s->tok[i] = rnd(4);
	}
	/* A partial page now and then: never inserted, never matched. */
	size_t extra = rnd(ps);
	for (size_t i = 0; i < extra; i++)
		s->tok[s->ntok + i] = rnd(4);
	s->ntok += extra;
	s->ph[0] = 0;
	for (size_t i = 0; i < s->npages; i++) {
		uint64_t h = s->ph[i];
		for (uint32_t j = 0; j < ps; j++)
			h = test_mix(h ^ s->tok[i * ps + j]);
		s->ph[i + 1] = h;
	}
	for (size_t i = 1; i <= s->npages; i++)
		s->ent[i] = ent_find(s->ph[i], (uint32_t)i, false);
}

/* Leading present pages and leading device pages, per the model. */
static void seq_predict(const struct seq *s, size_t *p_out, size_t *d_out)
{
	size_t p = 0, d = 0;
	while (p < s->npages && s->ent[p + 1] != UINT32_MAX && ent_present(&M.ent[s->ent[p + 1]]))
		p++;
	while (d < p && M.ent[s->ent[d + 1]].dev >= 0)
		d++;
	for (size_t i = d; i < p; i++)
		assert_true(M.ent[s->ent[i + 1]].dev < 0); /* prefix-closed */
	*p_out = p;
	*d_out = d;
}

static void seq_create_entries(struct seq *s)
{
	for (size_t i = 1; i <= s->npages; i++)
		s->ent[i] = ent_find(s->ph[i], (uint32_t)i, true);
}

/* ---- callbacks: every slot handed back must be one the model holds ---- */

static void cb_free_slots(void *arg, enum radix_tier tier, const uint64_t *slots, size_t n)
{
	(void)arg;
	for (size_t k = 0; k < n; k++) {
		uint64_t s = slots[k];
		assert_true(s < NSLOT);
		int32_t i = tier == RADIX_DEV ? M.dev_owner[s] : M.host_owner[s];
		assert_true(i >= 0);
		struct ment *e = &M.ent[i];
		assert_int_equal(e->lock, 0);
		if (tier == RADIX_DEV) {
			assert_int_equal(e->dev, (int64_t)s);
			assert_int_equal(M.op, OP_EVICT_DEV);
			if (e->host < 0) /* deleted, not demoted */
				assert_int_equal(e->pin, 0);
			M.freed_dev++;
		} else {
			assert_int_equal(e->host, (int64_t)s);
			assert_true(e->dev < 0);
			assert_int_equal(e->pin, 0);
			if (M.op == OP_EVICT_HOST && M.keep_unbacked)
				assert_true(e->backed);
			M.freed_host++;
		}
		ent_set((uint32_t)i, tier, -1);
	}
}

static void cb_free_mamba(void *arg, enum radix_tier tier, uint64_t slot)
{
	(void)arg;
	assert_true(slot < NSLOT);
	int32_t i = M.mamba_owner[tier][slot];
	assert_true(i >= 0);
	struct ment *e = &M.ent[i];
	assert_int_equal(e->mamba[tier], (int64_t)slot);
	if (tier == RADIX_HOST) {
		assert_int_equal(e->pin, 0);
		if (M.op == OP_EVICT_MAMBA)
			M.freed_mamba_host++;
	}
	ent_set_mamba((uint32_t)i, tier, -1);
}

static int cb_write_back(void *arg, const struct radix_node *node, uint64_t *host_out,
			 uint64_t *mamba_host)
{
	(void)arg;
	struct radix_node_info ni = info_of(node);
	assert_int_equal(M.op, OP_EVICT_DEV);
	assert_non_null(ni.dev);
	assert_null(ni.host);
	uint32_t last = (uint32_t)M.dev_owner[ni.dev[ni.pages - 1]];
	assert_int_equal(mamba_host != NULL,
			 M.ent[last].mamba[RADIX_DEV] >= 0 && M.ent[last].mamba[RADIX_HOST] < 0);
	M.n_wb++;
	if ((int)rnd(100) < M.wb_fail_pct) {
		M.n_wb_fail++;
		return -ENOSPC;
	}
	for (size_t k = 0; k < ni.pages; k++) {
		int32_t i = M.dev_owner[ni.dev[k]];
		assert_true(i >= 0);
		assert_true(M.next_host < NSLOT);
		host_out[k] = M.next_host++;
		ent_set((uint32_t)i, RADIX_HOST, (int64_t)host_out[k]);
	}
	if (mamba_host && rnd(2)) {
		*mamba_host = M.next_mamba++;
		ent_set_mamba(last, RADIX_HOST, (int64_t)*mamba_host);
	}
	return 0;
}

static const struct radix_evict_ops ops = {
	.free_slots = cb_free_slots,
	.free_mamba = cb_free_mamba,
	.write_back = cb_write_back,
};

/* ---- held locks and pins ---- */

struct held {
	struct radix_node *node;
	bool lock;
	size_t end;
	uint32_t ent[MAXP + 1];
};
static struct held held[NHELD];
static size_t nheld;

static void hold(struct radix_node *n, bool lock, const struct seq *s, size_t end)
{
	if (nheld == NHELD)
		return;
	assert_int_equal(lock ? radix_lock(M.t, n) : radix_pin_host(M.t, n), 0);
	struct held *h = &held[nheld++];
	h->node = n;
	h->lock = lock;
	h->end = end;
	for (size_t i = 1; i <= end; i++) {
		h->ent[i] = s->ent[i];
		if (lock)
			M.ent[s->ent[i]].lock++;
		else
			M.ent[s->ent[i]].pin++;
	}
}

static void release(size_t k)
{
	struct held *h = &held[k];
	assert_int_equal(info_of(h->node).end, h->end);
	assert_int_equal(h->lock ? radix_unlock(M.t, h->node) : radix_unpin_host(M.t, h->node), 0);
	for (size_t i = 1; i <= h->end; i++) {
		if (h->lock)
			M.ent[h->ent[i]].lock--;
		else
			M.ent[h->ent[i]].pin--;
	}
	held[k] = held[--nheld];
}

/* ---- steps ---- */

static uint64_t *fresh_slots(enum radix_tier tier, size_t n)
{
	static uint64_t sl[MAXP];
	uint64_t *next = tier == RADIX_DEV ? &M.next_dev : &M.next_host;
	for (size_t i = 0; i < n; i++)
		sl[i] = (*next)++;
	assert_true(*next < NSLOT);
	return sl;
}

static void step_insert(bool dev)
{
	struct seq s;
	struct radix_insert r;
	size_t p, d;

	seq_make(&s);
	seq_predict(&s, &p, &d);
	uint64_t *sl = fresh_slots(dev ? RADIX_DEV : RADIX_HOST, s.npages);
	if (dev)
		assert_int_equal(radix_insert(M.t, s.tok, s.ntok, sl, &r), 0);
	else
		assert_int_equal(radix_insert_host(M.t, s.tok, s.ntok, sl, NULL, 0, &r), 0);
	assert_int_equal(r.pages, s.npages);
	assert_int_equal(r.kept, dev ? d : p);
	assert_int_equal(r.new_pages, s.npages - p);
	assert_int_equal(info_of(r.node).end, s.npages);
	seq_create_entries(&s);
	for (size_t i = r.kept; i < s.npages; i++)
		ent_set(s.ent[i + 1], dev ? RADIX_DEV : RADIX_HOST, (int64_t)sl[i]);
}

static void check_match(const struct seq *s, const struct radix_match *m, size_t p, size_t d)
{
	uint64_t got[MAXP];
	struct hc_key keys[MAXP];

	assert_int_equal(m->pages, p);
	assert_int_equal(m->dev_pages, d);
	assert_int_equal(m->host_pages, p - d);
	assert_int_equal(info_of(m->last_node).end, p);
	assert_int_equal(info_of(m->dev_node).end, d);
	if (d) {
		assert_int_equal(radix_path_slots(m->dev_node, 0, RADIX_DEV, got), d);
		for (size_t i = 0; i < d; i++)
			assert_int_equal(got[i], M.ent[s->ent[i + 1]].dev);
	}
	if (p > d) {
		assert_int_equal(radix_path_slots(m->last_node, d, RADIX_HOST, got), p - d);
		for (size_t i = d; i < p; i++)
			assert_int_equal(got[i - d], M.ent[s->ent[i + 1]].host);
	}
	size_t mp = 0, mdp = 0;
	for (size_t i = 1; i <= p; i++) {
		const struct ment *e = &M.ent[s->ent[i]];
		if (e->mamba[RADIX_DEV] >= 0)
			mdp = i;
		if (e->mamba[RADIX_DEV] >= 0 || e->mamba[RADIX_HOST] >= 0)
			mp = i;
	}
	assert_int_equal(m->mamba_pages, mp);
	assert_int_equal(m->mamba_dev_pages, mdp);
	assert_int_equal(info_of(m->mamba_node).end, mp);
	if (p) {
		assert_int_equal(hc_key_chain(NULL, s->tok, p * ps, ps, keys, p), (int64_t)p);
		assert_memory_equal(m->last_key, &keys[p - 1], sizeof(keys[0]));
	} else {
		assert_null(m->last_key);
	}
}

static void step_match(void)
{
	struct seq s;
	struct radix_match m;
	size_t p, d;

	seq_make(&s);
	seq_predict(&s, &p, &d);
	assert_int_equal(radix_match(M.t, s.tok, s.ntok, &m), 0);
	check_match(&s, &m, p, d);
	M.n_hit += p > 0;
	M.n_partial_hit += p > 0 && p < s.npages;
	M.n_host_hit += p > d;
	M.n_mamba_hit += m.mamba_pages > 0;
	switch (rnd(10)) {
	case 0:
		if (d)
			hold(m.dev_node, true, &s, d);
		break;
	case 1:
		if (p)
			hold(m.last_node, false, &s, p);
		break;
	case 2: { /* device -> host backup of the device path */
		bool taken[MAXP];
		if (!d)
			break;
		uint64_t *sl = fresh_slots(RADIX_HOST, d);
		size_t want = 0;
		for (size_t i = 0; i < d; i++)
			want += M.ent[s.ent[i + 1]].host < 0;
		assert_int_equal(radix_set_slots(M.t, m.dev_node, d, RADIX_HOST, sl, taken),
				 (int64_t)want);
		for (size_t i = 0; i < d; i++) {
			assert_int_equal(taken[i], M.ent[s.ent[i + 1]].host < 0);
			if (taken[i])
				ent_set(s.ent[i + 1], RADIX_HOST, (int64_t)sl[i]);
		}
		break;
	}
	case 3: { /* host -> device load-back of the host part */
		if (p == d)
			break;
		uint64_t *sl = fresh_slots(RADIX_DEV, p - d);
		assert_int_equal(radix_set_slots(M.t, m.last_node, p - d, RADIX_DEV, sl, NULL),
				 (int64_t)(p - d));
		for (size_t i = d; i < p; i++)
			ent_set(s.ent[i + 1], RADIX_DEV, (int64_t)sl[i - d]);
		break;
	}
	case 4:
		if (p) {
			assert_int_equal(radix_set_backed_up(M.t, m.last_node, p), 0);
			for (size_t i = 1; i <= p; i++)
				M.ent[s.ent[i]].backed = true;
		}
		break;
	case 5:
	case 6: { /* attach a state at the end of the match */
		if (!p)
			break;
		enum radix_tier tier = rnd(2) ? RADIX_HOST : RADIX_DEV;
		struct ment *e = &M.ent[s.ent[p]];
		int want = tier == RADIX_DEV && e->dev < 0 ? -EINVAL
			   : e->mamba[tier] >= 0           ? -EEXIST
							   : 0;
		uint64_t slot = M.next_mamba++;
		assert_int_equal(radix_mamba_set(M.t, m.last_node, tier, slot), want);
		if (!want)
			ent_set_mamba(s.ent[p], tier, (int64_t)slot);
		break;
	}
	case 7: {
		if (!p)
			break;
		enum radix_tier tier = rnd(2) ? RADIX_HOST : RADIX_DEV;
		uint64_t slot;
		int64_t had = M.ent[s.ent[p]].mamba[tier];
		assert_int_equal(radix_mamba_clear(M.t, m.last_node, tier, &slot),
				 had >= 0 ? 0 : -ENOENT);
		if (had >= 0) {
			assert_int_equal(slot, had);
			ent_set_mamba(s.ent[p], tier, -1);
		}
		break;
	}
	default:
		break;
	}
}

static void step_evict(enum op op, size_t want)
{
	int64_t got;

	M.op = op;
	M.freed_dev = M.freed_host = M.freed_mamba_host = 0;
	if (op == OP_EVICT_DEV)
		got = radix_evict_device(M.t, want, &ops);
	else if (op == OP_EVICT_HOST)
		got = radix_evict_host(M.t, want, &ops);
	else
		got = radix_evict_mamba_host(M.t, want, &ops);
	M.op = OP_OTHER;
	assert_true(got >= 0);
	size_t freed = op == OP_EVICT_DEV    ? M.freed_dev
		       : op == OP_EVICT_HOST ? M.freed_host
					     : M.freed_mamba_host;
	assert_int_equal((size_t)got, freed);
	M.n_evicted[op - OP_EVICT_DEV] += freed;
	if ((size_t)got >= want)
		return;
	/* Fell short: nothing evictable may remain. */
	for (size_t k = 0; k < M.nlist; k++) {
		const struct ment *e = &M.ent[M.list[k]];
		if (op == OP_EVICT_DEV && e->dev >= 0)
			assert_true(e->lock > 0 || e->pin > 0);
		if (op == OP_EVICT_HOST && !M.keep_unbacked && e->host >= 0 && e->dev < 0)
			assert_true(e->lock > 0 || e->pin > 0);
		if (op == OP_EVICT_MAMBA)
			assert_true(e->mamba[RADIX_HOST] < 0 || e->pin > 0);
	}
}

static void check_counts(void)
{
	struct radix_stats st = stats_of(M.t);
	assert_int_equal(st.pages, M.present);
	assert_int_equal(st.dev_pages, M.ndev);
	assert_int_equal(st.host_pages, M.nhost);
	assert_int_equal(st.mamba_dev, M.nmamba[RADIX_DEV]);
	assert_int_equal(st.mamba_host, M.nmamba[RADIX_HOST]);
}

static void run(uint32_t page_size, enum radix_write_policy pol, bool keep, size_t steps,
		uint64_t seed)
{
	struct radix_opts o = {.page_size = page_size,
			       .write_policy = pol,
			       .host_keep_unbacked = keep};

	memset(&M, 0, sizeof(M));
	memset(M.dev_owner, 0xff, sizeof(M.dev_owner));
	memset(M.host_owner, 0xff, sizeof(M.host_owner));
	memset(M.mamba_owner, 0xff, sizeof(M.mamba_owner));
	M.keep_unbacked = keep;
	M.wb_fail_pct = 25;
	nheld = 0;
	rng = seed;
	ps = page_size;
	for (int b = 0; b < NBASE; b++)
		for (size_t i = 0; i < MAXP * 8; i++)
			base[b][i] = rnd(3);
	/* Two bases share their first pages: branching inside nodes. */
	memcpy(base[1], base[0], 4 * ps * sizeof(uint32_t));
	assert_int_equal(radix_create(&o, &M.t), 0);

	for (size_t i = 0; i < steps; i++) {
		uint32_t r = rnd(100);
		if (r < 22)
			step_insert(true);
		else if (r < 32)
			step_insert(false);
		else if (r < 62)
			step_match();
		else if (r < 70 && nheld)
			release(rnd((uint32_t)nheld));
		else if (r < 80)
			step_evict(OP_EVICT_DEV, 1 + rnd(8));
		else if (r < 90)
			step_evict(OP_EVICT_HOST, 1 + rnd(8));
		else if (r < 95)
			step_evict(OP_EVICT_MAMBA, 1 + rnd(3));
		if (stats_of(M.t).pages > 300) {
			step_evict(OP_EVICT_DEV, 60);
			step_evict(OP_EVICT_HOST, 60);
		}
		int rc = radix_check(M.t);
		if (rc)
			fail_msg("step %zu: radix_check: %s", i, hc_last_error());
		check_counts();
		if (M.present > M.max_pages)
			M.max_pages = M.present;
	}
	struct radix_stats st = stats_of(M.t);
	printf("ps=%u policy=%d keep=%d: hits %zu (partial %zu, host %zu, mamba %zu), splits %" PRIu64
	       ", evicted dev %zu host %zu mamba %zu, write-backs %zu (%zu failed), "
	       "max pages %zu\n",
	       page_size, (int)pol, keep, M.n_hit, M.n_partial_hit, M.n_host_hit, M.n_mamba_hit,
	       st.splits, M.n_evicted[0], M.n_evicted[1], M.n_evicted[2], M.n_wb, M.n_wb_fail,
	       M.max_pages);
	while (nheld)
		release(nheld - 1);
	/* Everything can go now. */
	step_evict(OP_EVICT_MAMBA, SIZE_MAX);
	step_evict(OP_EVICT_DEV, SIZE_MAX);
	if (!keep) {
		step_evict(OP_EVICT_HOST, SIZE_MAX);
		assert_int_equal(stats_of(M.t).nodes, 0);
	}
	assert_radix_ok(M.t);
	check_counts();
	radix_destroy(M.t);
}

static size_t g_steps = 3000;
static uint64_t g_seed = 1;

static void test_write_through(void **state)
{
	(void)state;
	run(2, RADIX_WRITE_THROUGH, false, g_steps, g_seed);
	run(1, RADIX_WRITE_THROUGH_SELECTIVE, true, g_steps, g_seed + 1);
}

static void test_write_back(void **state)
{
	(void)state;
	run(2, RADIX_WRITE_BACK, false, g_steps, g_seed + 2);
	run(3, RADIX_WRITE_BACK, true, g_steps, g_seed + 3);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		g_steps = strtoul(argv[1], NULL, 10);
	if (argc > 2)
		g_seed = strtoull(argv[2], NULL, 10);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_through),
		cmocka_unit_test(test_write_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
