/* Controller with a caller's copy engine (struct hc_copy_ops) that keeps
 * its own device memory and can hold copies at a gate: pages round-trip
 * through it byte for byte and every layer is copied in order; a load
 * reports exactly the layers the engine has finished; a device allocation
 * that finds only pages waiting for their host backup waits for the
 * backup instead of failing; and the timeout stop policy revokes a
 * prefetch at its deadline with the accounting exact. HC_TEST_CONCURRENCY */
#include "controller_helpers.h"

#include "cache/controller.h"

#include <math.h>
#include <pthread.h>
#include <time.h>

#define GATE_OPEN UINT32_MAX

struct engine {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct hc_pool *host;
	uint64_t dev_pages;
	uint32_t layers;
	size_t page_bytes;
	uint8_t *mem;
	int attached, detached;
	uint64_t layer_calls[2];
	bool out_of_order;
	uint32_t next_layer[2];
	uint32_t allowed[2]; /* layer copies that may still pass; GATE_OPEN: all */
	uint32_t waiting[2]; /* copies held at the gate now */
};

static int eng_attach(void *arg, const struct hc_kv_geometry *kv, uint64_t dev_pages,
		      struct hc_pool *host)
{
	struct engine *e = arg;
	e->attached++;
	e->host = host;
	e->dev_pages = dev_pages;
	e->layers = kv->layers;
	e->page_bytes = hc_pool_page_bytes(host);
	e->mem = calloc(dev_pages, e->page_bytes);
	return e->mem ? 0 : -ENOMEM;
}

/* Whole pages move at layer 0; later layers only count. Bytes are there
 * before any layer is reported, which is all a consumer may rely on. */
static int eng_copy_layer(void *arg, enum hc_copy_dir dir, uint32_t layer, const uint64_t *dev,
			  const uint64_t *host, size_t n)
{
	struct engine *e = arg;
	pthread_mutex_lock(&e->mu);
	e->waiting[dir]++;
	pthread_cond_broadcast(&e->cv);
	while (e->allowed[dir] == 0)
		pthread_cond_wait(&e->cv, &e->mu);
	if (e->allowed[dir] != GATE_OPEN)
		e->allowed[dir]--;
	e->waiting[dir]--;
	if (layer != e->next_layer[dir])
		e->out_of_order = true;
	e->next_layer[dir] = (layer + 1) % e->layers;
	e->layer_calls[dir]++;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	if (layer != 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (dev[i] >= e->dev_pages)
			return -EINVAL;
		uint8_t *d = e->mem + dev[i] * e->page_bytes;
		int rc = dir == HC_COPY_D2H ? hc_pool_scatter(e->host, host[i], d, e->page_bytes)
					    : hc_pool_gather(e->host, host[i], d, e->page_bytes);
		if (rc)
			return rc;
	}
	return 0;
}

static int eng_page_write(void *arg, uint64_t slot, const void *src, size_t len)
{
	struct engine *e = arg;
	if (slot >= e->dev_pages || len != e->page_bytes)
		return -EINVAL;
	memcpy(e->mem + slot * e->page_bytes, src, len);
	return 0;
}

static int eng_page_read(void *arg, uint64_t slot, void *dst, size_t len)
{
	struct engine *e = arg;
	if (slot >= e->dev_pages || len != e->page_bytes)
		return -EINVAL;
	memcpy(dst, e->mem + slot * e->page_bytes, len);
	return 0;
}

static void eng_detach(void *arg)
{
	struct engine *e = arg;
	e->detached++;
	free(e->mem);
	e->mem = NULL;
}

static const struct hc_copy_ops eng_ops = {
	.name = "test-engine",
	.attach = eng_attach,
	.copy_layer = eng_copy_layer,
	.page_write = eng_page_write,
	.page_read = eng_page_read,
	.detach = eng_detach,
};

static void eng_init(struct engine *e)
{
	memset(e, 0, sizeof(*e));
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	e->allowed[HC_COPY_D2H] = e->allowed[HC_COPY_H2D] = GATE_OPEN;
}

static void eng_gate(struct engine *e, enum hc_copy_dir dir, uint32_t allowed)
{
	pthread_mutex_lock(&e->mu);
	e->allowed[dir] = allowed;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
}

/* Wait until a copy in direction dir is held at the gate having passed
 * `calls` layer copies in all. */
static void eng_wait_held(struct engine *e, enum hc_copy_dir dir, uint64_t calls)
{
	pthread_mutex_lock(&e->mu);
	while (!(e->waiting[dir] > 0 && e->layer_calls[dir] == calls))
		pthread_cond_wait(&e->cv, &e->mu);
	pthread_mutex_unlock(&e->mu);
}

static void eng_destroy(struct engine *e)
{
	pthread_cond_destroy(&e->cv);
	pthread_mutex_destroy(&e->mu);
}

static void open_with(struct ct *t, struct engine *e, uint64_t dev_tokens, uint64_t host_tokens)
{
	struct hc_cache_opts o;
	ct_opts(&o, HC_WRITE_THROUGH, dev_tokens, host_tokens);
	o.kv.layout = HC_LAYOUT_LAYER_FIRST;
	o.copy_ops = &eng_ops;
	o.copy_arg = e;
	ct_open_opts(t, &o, true);
}

static void engine_roundtrip(void **state)
{
	(void)state;
	struct engine e;
	struct ct t;
	uint32_t tok[32 * CT_PS];
	eng_init(&e);
	open_with(&t, &e, 32 * CT_PS, 128 * CT_PS);
	assert_int_equal(e.attached, 1);
	assert_int_equal(e.dev_pages, 32);
	assert_int_equal(e.layers, CT_LAYERS);
	assert_ptr_equal(e.host, hc_cache_host_pool(t.c));

	ct_tokens(tok, 32 * CT_PS, 1);
	ct_cycle(&t, tok, 32 * CT_PS, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(hc_cache_flush(t.c), 0);
	/* write_through copied every page to host, layer by layer. */
	assert_int_equal(e.layer_calls[HC_COPY_D2H] % CT_LAYERS, 0);
	assert_true(e.layer_calls[HC_COPY_D2H] >= CT_LAYERS);
	assert_int_equal(hc_cache_evict_device(t.c, 32 * CT_PS), 32 * CT_PS);
	/* Back from host through the engine, checked byte for byte. */
	struct hc_cache_req_info info = ct_cycle(&t, tok, 32 * CT_PS, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(info.host_tokens, 32 * CT_PS);
	assert_int_equal(info.loaded_tokens, 32 * CT_PS);
	assert_int_equal(e.layer_calls[HC_COPY_H2D], CT_LAYERS);
	assert_false(e.out_of_order);
	ct_assert_empty(&t);
	ct_close(&t);
	assert_int_equal(e.detached, 1);
	assert_null(e.mem);
	eng_destroy(&e);
}

/* Put 8 pages of seq on host only and return its tokens. */
static void host_only(struct ct *t, uint32_t *tok, uint64_t seq)
{
	ct_tokens(tok, 8 * CT_PS, seq);
	ct_cycle(t, tok, 8 * CT_PS, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(hc_cache_flush(t->c), 0);
	assert_int_equal(hc_cache_evict_device(t->c, 1u << 20), 8 * CT_PS);
}

static void layers_as_copied(void **state)
{
	(void)state;
	struct engine e;
	struct ct t;
	uint32_t tok[8 * CT_PS];
	eng_init(&e);
	open_with(&t, &e, 16 * CT_PS, 64 * CT_PS);
	host_only(&t, tok, 2);

	eng_gate(&e, HC_COPY_H2D, 0);
	struct hc_cache_req *r;
	assert_int_equal(hc_cache_match(t.c, tok, 8 * CT_PS, &r), 0);
	assert_int_equal(hc_cache_load(r), 8 * CT_PS);
	for (uint32_t l = 0; l < CT_LAYERS; l++) {
		eng_wait_held(&e, HC_COPY_H2D, l);
		/* Held at layer l: exactly l layers are on the device. */
		assert_int_equal(hc_cache_layer_ready(r), l);
		eng_gate(&e, HC_COPY_H2D, 1);
		if (l + 1 < CT_LAYERS) {
			assert_int_equal(hc_cache_layer_wait(r, l), 0);
			assert_true(hc_cache_layer_ready(r) >= l + 1);
		}
	}
	assert_int_equal(hc_cache_layer_wait(r, CT_LAYERS), 0);
	assert_int_equal(hc_cache_layer_ready(r), CT_LAYERS);
	hc_cache_release(r);
	eng_gate(&e, HC_COPY_H2D, GATE_OPEN);
	ct_assert_empty(&t);
	ct_close(&t);
	eng_destroy(&e);
}

struct alloc_job {
	struct ct *t;
	const uint32_t *tok;
	size_t n;
	int64_t result;
	bool done;
	pthread_mutex_t mu;
};

static void *alloc_thread(void *arg)
{
	struct alloc_job *j = arg;
	struct hc_cache_req *r;
	uint64_t slots[CT_MAX_PAGES];
	assert_int_equal(hc_cache_match(j->t->c, j->tok, j->n, &r), 0);
	int64_t got = hc_cache_alloc(r, j->n, slots, CT_MAX_PAGES);
	hc_cache_abort(r);
	pthread_mutex_lock(&j->mu);
	j->result = got;
	j->done = true;
	pthread_mutex_unlock(&j->mu);
	return NULL;
}

static void alloc_waits_for_backup(void **state)
{
	(void)state;
	struct engine e;
	struct ct t;
	uint32_t a[4 * CT_PS], b[2 * CT_PS];
	eng_init(&e);
	open_with(&t, &e, 4 * CT_PS, 64 * CT_PS);

	/* Fill the device with pages whose host backup is held at the gate. */
	eng_gate(&e, HC_COPY_D2H, 0);
	ct_tokens(a, 4 * CT_PS, 3);
	ct_cycle(&t, a, 4 * CT_PS, HC_STOP_WAIT_COMPLETE, true);
	eng_wait_held(&e, HC_COPY_D2H, 0);

	struct alloc_job j = {.t = &t, .tok = b, .n = 2 * CT_PS};
	pthread_mutex_init(&j.mu, NULL);
	ct_tokens(b, 2 * CT_PS, 4);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, alloc_thread, &j), 0);
	/* Without a backup finishing there is no room: the allocation must
	 * still be waiting, not failed. */
	struct timespec pause = {.tv_nsec = 100 * 1000 * 1000};
	nanosleep(&pause, NULL);
	pthread_mutex_lock(&j.mu);
	assert_false(j.done);
	pthread_mutex_unlock(&j.mu);

	eng_gate(&e, HC_COPY_D2H, GATE_OPEN);
	pthread_join(th, NULL);
	assert_int_equal(j.result, 2);
	/* The backed-up pages were demoted to host, whole. */
	struct hc_cache_req_info info = ct_cycle(&t, a, 4 * CT_PS, HC_STOP_WAIT_COMPLETE, true);
	assert_int_equal(info.dev_tokens + info.host_tokens, 4 * CT_PS);
	pthread_mutex_destroy(&j.mu);
	ct_assert_empty(&t);
	ct_close(&t);
	eng_destroy(&e);
}

static void timeout_deadline(void **state)
{
	(void)state;
	struct hc_cache_opts o;
	hc_cache_opts_init(&o, sizeof(o));
	assert_true(fabs(cache_timeout_s(&o, 0) - 2.0) < 1e-9);
	assert_true(fabs(cache_timeout_s(&o, 10240) - 3.0) < 1e-9);
	assert_true(fabs(cache_timeout_s(&o, 1u << 30) - 30.0) < 1e-9);
	o.prefetch_timeout_base_s = 0.5;
	o.prefetch_timeout_per_ki_token_s = 0.25;
	o.prefetch_timeout_max_s = 1.0;
	assert_true(fabs(cache_timeout_s(&o, 1024) - 0.75) < 1e-9);
	assert_true(fabs(cache_timeout_s(&o, 4096) - 1.0) < 1e-9);

	struct hc_cache *c = NULL;
	o.device_tokens = o.host_tokens = 64;
	o.prefetch_timeout_base_s = -1;
	assert_int_equal(hc_cache_open(&o, &c), -EINVAL);
	assert_last_error_contains("prefetch_timeout");
	o.prefetch_timeout_base_s = NAN;
	assert_int_equal(hc_cache_open(&o, &c), -EINVAL);
	assert_null(c);
}

#define BIG_PAGES 1024

/* Deadline 0: the wait returns what arrived by the match and revokes the
 * rest. A 1024-page prefetch cannot finish between match and wait unless
 * the thread is preempted for its whole length, so a few tries suffice. */
static void timeout_expires(void **state)
{
	(void)state;
	struct ct t;
	struct hc_cache_opts o;
	ct_opts(&o, HC_WRITE_THROUGH, 2 * BIG_PAGES * CT_PS, 4 * BIG_PAGES * CT_PS);
	/* Small pages: the prefetch's length is in its page count. */
	o.kv = (struct hc_kv_geometry){.layers = 1,
				       .heads = 1,
				       .head_dim = 8,
				       .elem_bytes = 1,
				       .layout = HC_LAYOUT_PAGE_FIRST};
	o.prefetch_threshold = CT_PS;
	o.prefetch_timeout_base_s = 0;
	o.prefetch_timeout_per_ki_token_s = 0;
	ct_open_opts(&t, &o, true);

	size_t n = BIG_PAGES * CT_PS;
	uint32_t *tok = malloc(n * sizeof(*tok));
	uint64_t *slots = malloc(BIG_PAGES * sizeof(*slots));
	uint8_t *page = calloc(1, t.page_bytes);
	int revoked = 0;
	for (uint64_t seq = 0; seq < 5 && !revoked; seq++) {
		struct hc_cache_req *r;
		ct_tokens(tok, n, 100 + seq);
		/* Into L3 only. */
		assert_int_equal(hc_cache_match(t.c, tok, n, &r), 0);
		assert_int_equal(hc_cache_alloc(r, n, slots, BIG_PAGES), BIG_PAGES);
		for (size_t i = 0; i < BIG_PAGES; i++) {
			page[0] = (uint8_t)i;
			assert_int_equal(hc_cache_dev_write(t.c, slots[i], page, t.page_bytes), 0);
		}
		assert_int_equal(hc_cache_insert(r, tok, n), BIG_PAGES);
		hc_cache_release(r);
		assert_int_equal(hc_cache_flush(t.c), 0);
		hc_cache_evict_device(t.c, 1u << 30);
		hc_cache_evict_host(t.c, 1u << 30);

		struct hc_cache_stats before, after;
		hc_cache_stats(t.c, &before, sizeof(before));
		assert_int_equal(hc_cache_match(t.c, tok, n, &r), 0);
		int64_t got = hc_cache_prefetch_wait(r, HC_STOP_TIMEOUT);
		struct hc_cache_req_info info;
		hc_cache_req_info(r, &info);
		assert_int_equal(got, (int64_t)info.l3_tokens);
		hc_cache_stats(t.c, &after, sizeof(after));
		if (got < (int64_t)n) {
			assert_int_equal(after.prefetch_revoked, before.prefetch_revoked + 1);
			revoked++;
		}
		/* Whatever arrived is usable; the rest is given back. */
		assert_true(hc_cache_load(r) >= 0);
		assert_int_equal(hc_cache_layer_wait(r, UINT32_MAX), 0);
		hc_cache_release(r);
		ct_assert_empty(&t);
	}
	assert_true(revoked > 0);
	free(tok);
	free(slots);
	free(page);
	ct_close(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(engine_roundtrip),       cmocka_unit_test(layers_as_copied),
		cmocka_unit_test(alloc_waits_for_backup), cmocka_unit_test(timeout_deadline),
		cmocka_unit_test(timeout_expires),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
