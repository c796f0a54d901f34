/*
 * Fault-injection sweep of the store (issue 15): one full round trip
 * (open a file store, register the pools, set, get, close) of each pool
 * kind (KV MHA, KV MLA, KV + Mamba, KV + a generic side pool), first
 * counting the allocations, opens, writes, reads and renames it makes,
 * then again failing call 1, 2, ... of each kind in turn. Each failure
 * must give a clean error (a negative errno, no crash), leak nothing
 * (ASan) and no fd, leave no temp file, serve no page wrong (every page
 * a get reports as a hit is checked byte for byte), and the next round
 * trip without a failure must work. Runs once per I/O engine (ctest:
 * store.fault_sweep.uring, store.fault_sweep.threads).
 */
#include "store_test.h"

#include "fault_sweep.h"

#define NP 4 /* pages per round trip */

enum kind { K_MHA, K_MLA, K_MAMBA, K_SIDE, K_KINDS };
static const char *const kind_names[K_KINDS] = {"mha", "mla", "mamba", "side"};

struct fx {
	enum kind kind;
	char dir[PATH_MAX];
	struct hc_pool *kv, *side;
	struct hc_key keys[NP];
};

static void fx_init(struct fx *f, enum kind kind)
{
	memset(f, 0, sizeof(*f));
	f->kind = kind;
	st_mkdtemp(f->dir);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, kind == K_MLA, 2 * NP);
	f->kv = st_kv_pool(&g);
	if (kind == K_MAMBA) {
		struct hc_mamba_geometry mg = {.slots = 2 * NP,
					       .layers = 2,
					       .temporal_bytes = 2048,
					       .nconv = 2,
					       .conv_bytes = {1024, 512}};
		f->side = st_mamba_pool(&mg);
	} else if (kind == K_SIDE) {
		f->side = st_indexer_pool(2 * NP, 8, 3000);
	}
	st_keys(7 + kind, NP, 8, f->keys);
	for (uint64_t i = 0; i < NP; i++) {
		st_fill(f->kv, i, 1, i);
		if (f->side)
			st_fill(f->side, i, 2, i);
	}
}

static void fx_fini(struct fx *f)
{
	hc_pool_destroy(f->kv);
	hc_pool_destroy(f->side);
	st_rmrf(f->dir);
}

static int open_store(struct fx *f, struct hc_store **st)
{
	char json[PATH_MAX + 128];
	snprintf(json, sizeof(json),
		 "{\"dirs\": [\"%s\"], \"use_direct_io\": false, \"l3_cleaner_interval_s\": 0}",
		 f->dir);
	return st_open_json("file", json, ST_MODEL, 0, 1, false, st);
}

static int register_pools(struct fx *f, struct hc_store *st)
{
	int rc = hc_store_register_pool(st, "kv", f->kv, true);
	if (!rc && f->side)
		rc = hc_store_register_pool(st, "side", f->side, false);
	return rc;
}

/* set (src pages 0..NP-1) or get (into NP..2NP-1) of every pool. */
static int transfer(struct fx *f, struct hc_store *st, bool set, int kv_res[NP], int side_res[NP])
{
	static uint64_t src[NP] = {0, 1, 2, 3}, dst[NP] = {NP, NP + 1, NP + 2, NP + 3};
	struct hc_pool_transfer t[2] = {
		{.pool = "kv",
		 .keys = f->keys,
		 .n = NP,
		 .pages = set ? src : dst,
		 .results = kv_res},
		{.pool = "side",
		 .keys = f->keys,
		 .n = NP,
		 .pages = set ? src : dst,
		 .results = side_res},
	};
	for (int i = 0; i < NP; i++)
		kv_res[i] = side_res[i] = 1; /* "not written" */
	if (!set)
		for (uint64_t i = 0; i < NP; i++) {
			st_clear(f->kv, dst[i]);
			if (f->side)
				st_clear(f->side, dst[i]);
		}
	return set ? hc_store_set_v2(st, t, f->side ? 2 : 1)
		   : hc_store_get_v2(st, t, f->side ? 2 : 1);
}

/* Every page a get calls a hit holds the bytes set. Returns the hits. */
static int check_hits(struct fx *f, const int kv_res[NP], const int side_res[NP])
{
	int hits = 0;
	for (uint64_t i = 0; i < NP; i++) {
		if (kv_res[i] == 0) {
			st_assert_page(f->kv, NP + i, 1, i);
			hits++;
		}
		if (f->side && side_res[i] == 0)
			st_assert_page(f->side, NP + i, 2, i);
	}
	return hits;
}

#define CLEAN(rc, what) fs_assert_clean((rc), (what), fk, nth)

/* One round trip with call nth of kind fk failed (nth 0: none). Returns
 * the calls of fk it saw. */
static uint64_t round_trip(struct fx *f, enum util_fault_kind fk, uint64_t nth)
{
	int fds = fs_fd_count();
	int kv_res[NP], side_res[NP];
	struct hc_store *st = NULL;
	bool registered = false;

	util_fault_arm(fk, nth);
	int rc = open_store(f, &st);
	CLEAN(rc, "open");
	if (!rc) {
		rc = register_pools(f, st);
		CLEAN(rc, "register");
		registered = rc == 0;
	}
	if (registered) {
		CLEAN(transfer(f, st, true, kv_res, side_res), "set");
		for (int i = 0; i < NP; i++) {
			CLEAN(kv_res[i], "set page");
			CLEAN(side_res[i], "set page");
		}
		int64_t got = transfer(f, st, false, kv_res, side_res);
		CLEAN(got, "get");
		check_hits(f, kv_res, side_res);
	}
	util_fault_disarm();
	uint64_t seen = util_fault_seen(fk);
	if (nth && nth <= seen && !util_fault_fired())
		fail_msg("%s fault %llu did not fire", util_fault_kind_name(fk),
			 (unsigned long long)nth);

	/* The next calls, without a failure, work: what the failed set left
	 * out is written now, and every page reads back. */
	if (!st && (rc = open_store(f, &st)))
		fail_msg("open after %s fault %llu: %s (%s)", util_fault_kind_name(fk),
			 (unsigned long long)nth, hc_strerror(rc), hc_last_error());
	if (!registered)
		hc_store_unregister_pool(st, "kv"); /* registered before "side" failed */
	if (!registered && (rc = register_pools(f, st)))
		fail_msg("register after %s fault %llu: %s (%s)", util_fault_kind_name(fk),
			 (unsigned long long)nth, hc_strerror(rc), hc_last_error());
	if ((rc = transfer(f, st, true, kv_res, side_res)))
		fail_msg("set after %s fault %llu: %s (%s)", util_fault_kind_name(fk),
			 (unsigned long long)nth, hc_strerror(rc), hc_last_error());
	int64_t got = transfer(f, st, false, kv_res, side_res);
	if (got != NP || check_hits(f, kv_res, side_res) != NP)
		fail_msg("get after %s fault %llu: %lld of %d pages (%s)", util_fault_kind_name(fk),
			 (unsigned long long)nth, (long long)got, NP, hc_last_error());
	hc_store_close(st);

	int fds_after = fs_fd_count();
	if (fds_after != fds)
		fail_msg("%s fault %llu: %d fds open after, %d before", util_fault_kind_name(fk),
			 (unsigned long long)nth, fds_after, fds);
	struct st_count cnt = st_count(f->dir);
	if (cnt.tmps)
		fail_msg("%s fault %llu: %zu temp files left", util_fault_kind_name(fk),
			 (unsigned long long)nth, cnt.tmps);
	st_empty_dir(f->dir); /* the next round writes again */
	return seen;
}

static void sweep(enum kind kind)
{
	struct fx f;
	fx_init(&f, kind);
	for (int fk = 0; fk < HC_FAULT_KINDS; fk++) {
		uint64_t calls = round_trip(&f, (enum util_fault_kind)fk, 0);
		for (uint64_t n = 1; n <= calls; n++)
			round_trip(&f, (enum util_fault_kind)fk, n);
		print_message("%s %s: %llu %s faults swept\n", kind_names[kind],
			      getenv("HICACHE_IO_ENGINE") ? getenv("HICACHE_IO_ENGINE") : "auto",
			      (unsigned long long)calls,
			      util_fault_kind_name((enum util_fault_kind)fk));
		if (fk != HC_FAULT_ALLOC)
			assert_true(calls > 0); /* every kind is reached */
	}
	fx_fini(&f);
}

static void sweep_mha(void **state)
{
	(void)state;
	sweep(K_MHA);
}

static void sweep_mla(void **state)
{
	(void)state;
	sweep(K_MLA);
}

static void sweep_mamba(void **state)
{
	(void)state;
	sweep(K_MAMBA);
}

static void sweep_side(void **state)
{
	(void)state;
	sweep(K_SIDE);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sweep_mha),
		cmocka_unit_test(sweep_mla),
		cmocka_unit_test(sweep_mamba),
		cmocka_unit_test(sweep_side),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
