/*
 * Fault-injection sweep of the cache over a file store (issue 15): one
 * full round trip (open store and cache, a request that writes and
 * inserts its pages, the backup to host and L3, both tiers evicted, a
 * request that prefetches them back from L3 and loads them, close) for
 * each pool kind (KV MHA, KV MLA, hybrid KV + Mamba state) on both I/O
 * engines; first counting the allocations, opens, writes, reads and
 * renames it makes, then again failing call 1, 2, ... of each kind in
 * turn. Each failure must give a clean error (a negative errno, no crash),
 * leak nothing (ASan) and no fd, serve no page wrong (every page a
 * request holds on device is checked byte for byte, and so is the Mamba
 * state), and the next round trip without a failure must work.
 */
#define _GNU_SOURCE
#include "controller_helpers.h"
#include "../store/store_test.h"

#include "../store/fault_sweep.h"

#define N 16 /* tokens: 4 pages */
#define MAMBA 256

enum kind { K_MHA, K_MLA, K_MAMBA, K_KINDS };
static const char *const kind_names[K_KINDS] = {"mha", "mla", "mamba"};
static const char *engine;
static char dir[PATH_MAX];

static int open_all(struct ct *t, enum kind kind)
{
	memset(t, 0, sizeof(*t));
	char json[PATH_MAX + 256];
	snprintf(json, sizeof(json),
		 "{\"dirs\": [\"%s\"], \"use_direct_io\": false, \"io_engine\": \"%s\", "
		 "\"io_threads\": 2, \"l3_cleaner_interval_s\": 0}",
		 dir, engine);
	int rc = st_open_json("file", json, "ct", 0, 1, false, &t->st);
	if (rc)
		return rc;
	struct hc_cache_opts o;
	ct_opts(&o, HC_WRITE_THROUGH, 64, 64);
	o.kv.mla = kind == K_MLA;
	if (kind == K_MLA)
		o.kv.heads = 1;
	if (kind == K_MAMBA)
		o.mamba_bytes = MAMBA;
	o.store = t->st;
	rc = hc_cache_open(&o, &t->c);
	if (rc) {
		hc_store_close(t->st);
		t->st = NULL;
		return rc;
	}
	t->page_bytes = hc_cache_page_bytes(t->c);
	return 0;
}

static void mamba_state(const uint32_t *tok, uint8_t *out)
{
	for (size_t i = 0; i < MAMBA; i++)
		out[i] = (uint8_t)(tok[N - 1] * 7u + i);
}

#define CLEAN(rc, what) fs_assert_clean((rc), (what), fk, nth)

/* A request over tok: every page it holds on device after its load is
 * checked; pages it lacks are written and inserted. Every call may fail
 * (cleanly); the request is given back whatever happens. Returns the
 * pages it found (on any tier) or the first error. */
static int64_t request(struct ct *t, const uint32_t *tok, bool hybrid, enum util_fault_kind fk,
		       uint64_t nth)
{
	struct hc_cache_req *r;
	uint64_t slots[CT_MAX_PAGES];
	uint8_t want[4096], got[4096], st_want[MAMBA], st_got[MAMBA];
	assert_true(t->page_bytes <= sizeof(want));
	int64_t rc = hc_cache_match(t->c, tok, N, &r);
	CLEAN(rc, "match");
	if (rc)
		return rc;
	CLEAN(hc_cache_prefetch_wait(r, HC_STOP_WAIT_COMPLETE), "prefetch_wait");
	int64_t loaded = hc_cache_load(r);
	CLEAN(loaded, "load");
	if (loaded < 0) {
		hc_cache_abort(r);
		return loaded;
	}
	int lw = hc_cache_layer_wait(r, CT_LAYERS);
	CLEAN(lw, "layer_wait");
	if (lw) {
		hc_cache_abort(r);
		return lw;
	}
	int64_t have = hc_cache_req_dev_slots(r, slots, CT_MAX_PAGES);
	CLEAN(have, "dev_slots");
	if (have < 0) {
		hc_cache_abort(r);
		return have;
	}
	for (int64_t i = 0; i < have; i++) {
		ct_page_bytes(tok, (size_t)i, want, t->page_bytes);
		assert_int_equal(hc_cache_dev_read(t->c, slots[i], got, t->page_bytes), 0);
		if (memcmp(want, got, t->page_bytes))
			fail_msg("%s fault %llu: page %lld served wrong", util_fault_kind_name(fk),
				 (unsigned long long)nth, (long long)i);
	}
	if (hybrid && have == N / CT_PS) {
		int m = hc_cache_mamba_read(r, st_got, MAMBA);
		CLEAN(m, "mamba_read");
		mamba_state(tok, st_want);
		if (m == 0 && memcmp(st_want, st_got, MAMBA))
			fail_msg("%s fault %llu: Mamba state served wrong",
				 util_fault_kind_name(fk), (unsigned long long)nth);
	}
	if (have == N / CT_PS) {
		hc_cache_release(r);
		return have;
	}
	int64_t nnew = hc_cache_alloc(r, N, slots, CT_MAX_PAGES);
	CLEAN(nnew, "alloc");
	if (nnew < 0) {
		hc_cache_abort(r);
		return nnew;
	}
	for (int64_t i = 0; i < nnew; i++) {
		ct_page_bytes(tok, (size_t)(have + i), want, t->page_bytes);
		assert_int_equal(hc_cache_dev_write(t->c, slots[i], want, t->page_bytes), 0);
	}
	if (hybrid) {
		mamba_state(tok, st_want);
		int m = hc_cache_mamba_write(r, st_want, MAMBA);
		CLEAN(m, "mamba_write");
		if (m) {
			hc_cache_abort(r);
			return m;
		}
	}
	int64_t ins = hc_cache_insert(r, tok, N);
	CLEAN(ins, "insert");
	hc_cache_release(r);
	return ins < 0 ? ins : have;
}

/* Write, back up, evict both tiers, read back from L3. */
static void cycle(struct ct *t, const uint32_t *tok, bool hybrid, enum util_fault_kind fk,
		  uint64_t nth)
{
	request(t, tok, hybrid, fk, nth);
	CLEAN(hc_cache_flush(t->c), "flush");
	CLEAN(hc_cache_evict_device(t->c, 1u << 20), "evict_device");
	CLEAN(hc_cache_flush(t->c), "flush");
	CLEAN(hc_cache_evict_host(t->c, 1u << 20), "evict_host");
	CLEAN(hc_cache_flush(t->c), "flush");
	request(t, tok, hybrid, fk, nth);
	CLEAN(hc_cache_flush(t->c), "flush");
}

static uint64_t round_trip(enum kind kind, enum util_fault_kind fk, uint64_t nth)
{
	int fds = fs_fd_count();
	uint32_t tok[N];
	ct_tokens(tok, N, 11 + kind);
	struct ct t;
	util_fault_arm(fk, nth);
	int rc = open_all(&t, kind);
	CLEAN(rc, "open");
	if (!rc)
		cycle(&t, tok, kind == K_MAMBA, fk, nth);
	util_fault_disarm();
	uint64_t seen = util_fault_seen(fk);

	/* Without a failure: everything works, and the pages come back from
	 * L3 (or the device, when the faulty round left them there). */
	if (rc && (rc = open_all(&t, kind)))
		fail_msg("open after %s fault %llu: %s (%s)", util_fault_kind_name(fk),
			 (unsigned long long)nth, hc_strerror(rc), hc_last_error());
	request(&t, tok, kind == K_MAMBA, HC_FAULT_KINDS, 0);
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_true(hc_cache_evict_device(t.c, 1u << 20) >= 0);
	assert_int_equal(hc_cache_flush(t.c), 0);
	assert_true(hc_cache_evict_host(t.c, 1u << 20) >= 0);
	assert_int_equal(hc_cache_flush(t.c), 0);
	int64_t found = request(&t, tok, kind == K_MAMBA, HC_FAULT_KINDS, 0);
	if (found != N / CT_PS)
		fail_msg("after %s fault %llu: %lld of %d pages back from L3 (%s)",
			 util_fault_kind_name(fk), (unsigned long long)nth, (long long)found,
			 N / CT_PS, hc_last_error());
	ct_assert_empty(&t);
	ct_close(&t);
	int fds_after = fs_fd_count();
	if (fds_after != fds)
		fail_msg("%s fault %llu: %d fds open after, %d before", util_fault_kind_name(fk),
			 (unsigned long long)nth, fds_after, fds);
	struct st_count cnt = st_count(dir);
	if (cnt.tmps)
		fail_msg("%s fault %llu: %zu temp files left", util_fault_kind_name(fk),
			 (unsigned long long)nth, cnt.tmps);
	st_empty_dir(dir);
	return seen;
}

static void sweep(enum kind kind)
{
	static const char *const engines[] = {"threads", "uring"};
	for (int e = 0; e < 2; e++) {
		engine = engines[e];
		st_mkdtemp(dir);
		if (e == 1 && setenv("HICACHE_IO_ENGINE", "uring", 1) == 0 && st_engine_check()) {
			print_message("io_uring unavailable: %s skipped\n", kind_names[kind]);
			st_rmrf(dir);
			continue;
		}
		for (int fk = 0; fk < HC_FAULT_KINDS; fk++) {
			uint64_t calls = round_trip(kind, (enum util_fault_kind)fk, 0);
			for (uint64_t n = 1; n <= calls; n++)
				round_trip(kind, (enum util_fault_kind)fk, n);
			print_message("%s %s: %llu %s faults swept\n", kind_names[kind], engine,
				      (unsigned long long)calls,
				      util_fault_kind_name((enum util_fault_kind)fk));
			assert_true(calls > 0);
		}
		st_rmrf(dir);
	}
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sweep_mha),
		cmocka_unit_test(sweep_mla),
		cmocka_unit_test(sweep_mamba),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
