/* hc_store_exists_query: kv_hit_pages, pool_hits and the min rule (the
 * same as hc_store_exists_v2, which it backs), and the restorable prefix
 * end points of the newer SGLang revision:
 *   all_pages       every p in 1..boundary
 *   trailing_pages  every p in 1..kv whose pages [max(0, p - N), p) exist
 *                   (N = max(1, n)), i.e. consecutive >= min(N, p)
 * intersected over the transfers, ascending. The matrix: all_pages gaps at
 * the start, middle and end; trailing windows with holes; a prefix shorter
 * than the window; a KV hole; zero KV hits; two trailing pools with
 * disjoint end points (none left); all_pages with trailing; names in
 * place of keys; truncation to endpoints_max. File and mem backends. */
#include "store_test.h"

#define N 10
#define SLOTS N
#define PS 8

struct fx {
	bool file;
	char dir[PATH_MAX];
	struct hc_store *st;
	struct hc_pool *kv, *a, *b;
	struct hc_key keys[N];
	char hex[N][HC_KEY_HEX_LEN + 1];
	const char *names[N];
};

static void fx_open(struct fx *f, bool file, uint32_t seed)
{
	memset(f, 0, sizeof(*f));
	f->file = file;
	if (file) {
		st_mkdtemp(f->dir);
		f->st = st_open_file(f->dir, false, false, NULL);
	} else {
		f->st = st_open_mem(false);
	}
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, SLOTS);
	f->kv = st_kv_pool(&g);
	f->a = st_indexer_pool(SLOTS, PS, 100);
	f->b = st_indexer_pool(SLOTS, PS, 200);
	assert_int_equal(hc_store_register_pool(f->st, "kv", f->kv, true), 0);
	assert_int_equal(hc_store_register_pool(f->st, "a", f->a, false), 0);
	assert_int_equal(hc_store_register_pool(f->st, "b", f->b, false), 0);
	st_keys(seed, N, PS, f->keys);
	/* Names that are not keys: "n0" ... "n9". */
	for (int i = 0; i < N; i++) {
		snprintf(f->hex[i], sizeof(f->hex[i]), "n%d", i);
		f->names[i] = f->hex[i];
	}
}

static void fx_close(struct fx *f)
{
	hc_store_close(f->st);
	hc_pool_destroy(f->kv);
	hc_pool_destroy(f->a);
	hc_pool_destroy(f->b);
	if (f->file)
		st_rmrf(f->dir);
}

/* Store page i of pool where pattern[i] == '1', by keys or by names. */
static void put(struct fx *f, const char *pool, const char *pattern, bool named)
{
	struct hc_key sel[N];
	const char *nsel[N];
	uint64_t slots[N];
	size_t n = 0;
	for (int i = 0; i < N; i++) {
		if (pattern[i] != '1')
			continue;
		sel[n] = f->keys[i];
		nsel[n] = f->names[i];
		slots[n++] = (uint64_t)i;
	}
	struct hc_pool_transfer t = {pool, named ? NULL : sel, n, slots, HC_HIT_ALL_PAGES,
				     NULL, named ? nsel : NULL};
	assert_int_equal(hc_store_set_v2(f->st, &t, 1), 0);
}

struct want {
	int64_t result;
	uint64_t kv;
	uint64_t hits[2];
	const char *ends; /* end points, e.g. "1,2,5" ("" for none) */
};

static void ends_text(const uint64_t *e, size_t n, char *out, size_t size)
{
	size_t o = 0;
	out[0] = '\0';
	for (size_t i = 0; i < n && o < size; i++)
		o += (size_t)snprintf(out + o, size - o, "%s%llu", i ? "," : "",
				      (unsigned long long)e[i]);
}

/* Ask the query (and exists_v2, which must agree) and check. */
static void ask(struct fx *f, const struct hc_pool_transfer *t, size_t nt, bool named,
		const struct want *w)
{
	uint64_t hits[2] = {99, 99}, ends[N + 1];
	struct hc_exists_query q;
	hc_exists_query_init(&q, sizeof(q));
	q.keys = named ? NULL : f->keys;
	q.names = named ? f->names : NULL;
	q.n = N;
	q.transfers = t;
	q.nt = nt;
	q.pool_hits = hits;
	q.endpoints = ends;
	q.endpoints_max = N;
	int64_t r = hc_store_exists_query(f->st, &q);
	char got[128];
	ends_text(ends, q.nendpoints, got, sizeof(got));
	if (r != w->result || q.kv_hit_pages != w->kv || strcmp(got, w->ends))
		fail_msg("result %lld kv %llu ends '%s'; want %lld %llu '%s'", (long long)r,
			 (unsigned long long)q.kv_hit_pages, got, (long long)w->result,
			 (unsigned long long)w->kv, w->ends);
	for (size_t i = 0; i < nt; i++)
		assert_int_equal(hits[i], w->hits[i]);
	if (named)
		return;
	uint64_t kvh, h2[2];
	assert_int_equal(hc_store_exists_v2(f->st, f->keys, N, t, nt, &kvh, h2), r);
	assert_int_equal(kvh, q.kv_hit_pages);
	for (size_t i = 0; i < nt; i++)
		assert_int_equal(h2[i], hits[i]);
}

static struct hc_pool_transfer all(const char *pool)
{
	return (struct hc_pool_transfer){pool, NULL, 0, NULL, HC_HIT_ALL_PAGES, NULL, NULL};
}

static struct hc_pool_transfer trail(const char *pool, size_t n)
{
	return (struct hc_pool_transfer){pool, NULL, n, NULL, HC_HIT_TRAILING_PAGES, NULL, NULL};
}

static void matrix(bool file, bool named)
{
	struct fx f;
	/* all_pages: gaps at the start, in the middle, at the end. */
	static const struct {
		const char *a;
		struct want w;
	} gaps[] = {
		{"0111111111", {0, N, {0}, ""}},
		{"1110111111", {3, N, {3}, "1,2,3"}},
		{"1111111110", {9, N, {9}, "1,2,3,4,5,6,7,8,9"}},
		{"1111111111", {N, N, {N}, "1,2,3,4,5,6,7,8,9,10"}},
	};
	for (size_t c = 0; c < sizeof(gaps) / sizeof(gaps[0]); c++) {
		fx_open(&f, file, 10 + (uint32_t)c);
		put(&f, "kv", "1111111111", named);
		put(&f, "a", gaps[c].a, named);
		struct hc_pool_transfer t = all("a");
		ask(&f, &t, 1, named, &gaps[c].w);
		fx_close(&f);
	}

	/* trailing_pages windows over a pool with holes. */
	fx_open(&f, file, 20);
	put(&f, "kv", "1111111111", named);
	put(&f, "a", "1101101111", named);
	struct hc_pool_transfer t1 = trail("a", 1), t2 = trail("a", 2), t4 = trail("a", 4);
	ask(&f, &t1, 1, named, &(struct want){N, N, {N}, "1,2,4,5,7,8,9,10"});
	ask(&f, &t2, 1, named, &(struct want){N, N, {N}, "1,2,5,8,9,10"});
	/* N = 4: p = 1 and 2 (the prefix is shorter than the window), then
	 * only windows [6, 10). */
	ask(&f, &t4, 1, named, &(struct want){N, N, {N}, "1,2,10"});
	/* n 0 counts as 1. */
	struct hc_pool_transfer t0 = trail("a", 0);
	ask(&f, &t0, 1, named, &(struct want){N, N, {N}, "1,2,4,5,7,8,9,10"});
	/* all_pages on b with trailing on a: the intersection. */
	put(&f, "b", "1111110111", named);
	struct hc_pool_transfer ab[2] = {all("b"), t1};
	ask(&f, ab, 2, named, &(struct want){6, N, {6, N}, "1,2,4,5"});
	/* Truncated to endpoints_max: the first ones. */
	uint64_t hits, ends[3];
	struct hc_exists_query q;
	hc_exists_query_init(&q, sizeof(q));
	q.keys = named ? NULL : f.keys;
	q.names = named ? f.names : NULL;
	q.n = N;
	q.transfers = &t1;
	q.nt = 1;
	q.pool_hits = &hits;
	q.endpoints = ends;
	q.endpoints_max = 3;
	assert_int_equal(hc_store_exists_query(f.st, &q), N);
	assert_int_equal(q.nendpoints, 3);
	assert_int_equal(ends[2], 4);
	/* Without an endpoints array, just the min rule. */
	q.endpoints = NULL;
	assert_int_equal(hc_store_exists_query(f.st, &q), N);
	assert_int_equal(q.nendpoints, 0);
	fx_close(&f);

	/* A prefix shorter than the window: only p = 1, 2. */
	fx_open(&f, file, 30);
	put(&f, "kv", "1111111111", named);
	put(&f, "a", "1100000000", named);
	struct hc_pool_transfer t5 = trail("a", 5);
	ask(&f, &t5, 1, named, &(struct want){2, N, {2}, "1,2"});
	fx_close(&f);

	/* A KV hole: nothing past the KV prefix, whatever the pools hold. */
	fx_open(&f, file, 40);
	put(&f, "kv", "1111011111", named);
	put(&f, "a", "1111111111", named);
	ask(&f, &t1, 1, named, &(struct want){4, 4, {4}, "1,2,3,4"});
	struct hc_pool_transfer ta = all("a");
	ask(&f, &ta, 1, named, &(struct want){4, 4, {4}, "1,2,3,4"});
	fx_close(&f);

	/* Zero KV hits: zero everywhere, no end point. */
	fx_open(&f, file, 50);
	put(&f, "kv", "0111111111", named);
	put(&f, "a", "1111111111", named);
	ask(&f, &t1, 1, named, &(struct want){0, 0, {0}, ""});
	fx_close(&f);

	/* Two trailing pools with disjoint end points: none in common, while
	 * the min rule still says 9. */
	fx_open(&f, file, 60);
	put(&f, "kv", "1111111111", named);
	put(&f, "a", "1010101010", named);
	put(&f, "b", "0101010101", named);
	struct hc_pool_transfer tb[2] = {trail("a", 1), trail("b", 1)};
	ask(&f, tb, 2, named, &(struct want){9, N, {9, N}, ""});
	/* Aligned checkpoints: both hold pages 3 and 7 (and b page 9). */
	fx_close(&f);
	fx_open(&f, file, 61);
	put(&f, "kv", "1111111111", named);
	put(&f, "a", "0010001000", named);
	put(&f, "b", "0010001001", named);
	ask(&f, tb, 2, named, &(struct want){7, N, {7, N}, "3,7"});
	/* An unregistered pool: 0, no end point. */
	struct hc_pool_transfer gone[2] = {trail("a", 1), all("nope")};
	ask(&f, gone, 2, named, &(struct want){0, N, {7, 0}, ""});
	fx_close(&f);
}

static void test_matrix(void **state)
{
	(void)state;
	matrix(true, false);
	matrix(false, false);
	matrix(true, true);
	matrix(false, true);
}

static void test_bad_query(void **state)
{
	(void)state;
	struct fx f;
	fx_open(&f, false, 70);
	struct hc_exists_query q;
	hc_exists_query_init(&q, sizeof(q));
	q.keys = f.keys;
	q.n = N;
	assert_int_equal(hc_store_exists_query(f.st, &q), 0);
	assert_int_equal(hc_store_exists_query(NULL, &q), -EINVAL);
	assert_int_equal(hc_store_exists_query(f.st, NULL), -EINVAL);
	q.keys = NULL;
	assert_int_equal(hc_store_exists_query(f.st, &q), -EINVAL);
	q.keys = f.keys;
	struct hc_pool_transfer t = all("a");
	q.transfers = &t;
	q.nt = 1; /* pool_hits NULL */
	assert_int_equal(hc_store_exists_query(f.st, &q), -EINVAL);
	/* Not initialised: refused, saying so. */
	q.nt = 0;
	q.struct_size = 0;
	assert_int_equal(hc_store_exists_query(f.st, &q), -EINVAL);
	assert_last_error_contains("struct_size");
	q.struct_size = 1u << 20;
	assert_int_equal(hc_store_exists_query(f.st, &q), -EINVAL);
	assert_last_error_contains("struct_size");
	fx_close(&f);
}

/* A caller built against an older header (a query without the end-point
 * fields) is served: its fields are read, the results it has written back,
 * nothing past its struct touched (issue 15 item 16). */
static void test_older_query(void **state)
{
	(void)state;
	struct fx f;
	fx_open(&f, false, 70);
	struct {
		struct hc_exists_query q; /* only its first fields are the caller's */
	} buf;
	size_t old = offsetof(struct hc_exists_query, endpoints);
	memset(&buf, 0xab, sizeof(buf));
	hc_exists_query_init(&buf.q, old);
	assert_int_equal(buf.q.struct_size, old);
	uint64_t hits = 0;
	struct hc_pool_transfer t = all("a");
	buf.q.keys = f.keys;
	buf.q.n = N;
	buf.q.transfers = &t;
	buf.q.nt = 1;
	buf.q.pool_hits = &hits;
	buf.q.kv_hit_pages = 12345; /* an out field: overwritten */
	int64_t rc = hc_store_exists_query(f.st, &buf.q);
	assert_true(rc >= 0);
	assert_true(buf.q.kv_hit_pages <= N);
	assert_true(hits <= N);
	const unsigned char *tail = (const unsigned char *)&buf.q + old;
	for (size_t i = 0; i < sizeof(buf.q) - old; i++)
		assert_int_equal(tail[i], 0xab);
	assert_int_equal(buf.q.struct_size, old);
	fx_close(&f);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_matrix),
		cmocka_unit_test(test_bad_query),
		cmocka_unit_test(test_older_query),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
