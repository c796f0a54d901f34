/*
 * Damaged objects are logged at most once per interval, with a count
 * (issue 15 item 14): a corrupt object is an expected condition (a crash,
 * a foreign writer) and a get may meet many, so the store says how many
 * it treated as misses in one line per HC_LOG_INTERVAL_S instead of one
 * line each. Before, get logged every corrupt object and exists logged
 * nothing for an object of the wrong size.
 */
#include "store_test.h"

#include <pthread.h>

#define NP 6

static pthread_mutex_t lines_lock = PTHREAD_MUTEX_INITIALIZER;
static int lines;       /* WARN lines about damaged objects */
static char last[1024]; /* the latest of them */

static void handler(enum hc_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level != HC_LOG_WARN || (!strstr(msg, "corrupt") && !strstr(msg, "wrong size")))
		return;
	pthread_mutex_lock(&lines_lock);
	lines++;
	snprintf(last, sizeof(last), "%s", msg);
	pthread_mutex_unlock(&lines_lock);
}

struct fx {
	char dir[PATH_MAX];
	struct hc_store *st;
	struct hc_pool *pool;
	struct hc_key keys[NP];
	char paths[NP][PATH_MAX];
};

/* A layer_first store (one object per page, in any mode) with pages
 * 0..NP-1 set. */
static void fx_init(struct fx *f)
{
	st_mkdtemp(f->dir);
	f->st = st_open_file(f->dir, false, true, NULL);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_LAYER_FIRST, false, 2 * NP);
	f->pool = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(f->st, "kv", f->pool, true), 0);
	st_keys(5, NP, 8, f->keys);
	uint64_t slots[NP];
	for (uint64_t i = 0; i < NP; i++) {
		slots[i] = i;
		st_fill(f->pool, i, 1, i);
		st_obj_path(f->dir, &f->keys[i], ST_SUFFIX, "", f->paths[i]);
	}
	assert_int_equal(hc_store_set(f->st, f->keys, NP, slots, NULL), 0);
	lines = 0;
	last[0] = '\0';
}

static void fx_fini(struct fx *f)
{
	hc_store_close(f->st);
	hc_pool_destroy(f->pool);
	st_rmrf(f->dir);
}

static void test_get_corrupt(void **state)
{
	(void)state;
	struct fx f;
	fx_init(&f);
	for (int i = 0; i < NP; i++)
		st_flip(f.paths[i], 100, 0x10); /* payload: the checksum fails */
	/* Two in one call, then the others one call each. */
	uint64_t back[NP] = {NP, NP + 1, NP + 2, NP + 3, NP + 4, NP + 5};
	int res[NP];
	assert_int_equal(hc_store_get(f.st, f.keys, 2, back, res), 0);
	assert_int_equal(res[0], -EBADMSG);
	assert_int_equal(res[1], -EBADMSG);
	for (int i = 2; i < NP; i++) {
		assert_int_equal(hc_store_get(f.st, &f.keys[i], 1, &back[i], &res[i]), 0);
		assert_int_equal(res[i], -EBADMSG);
	}
	struct hc_store_stats s = st_stats(f.st, NULL);
	assert_int_equal(s.corrupt, NP); /* every one counted */
	/* One line (all calls are well within the interval), with the count
	 * of the first call's. */
	assert_int_equal(lines, 1);
	assert_non_null(strstr(last, "get: 2 objects corrupt"));
	fx_fini(&f);
}

static void test_exists_wrong_size(void **state)
{
	(void)state;
	struct fx f;
	fx_init(&f);
	for (int i = 0; i < 3; i++)
		assert_int_equal(truncate(f.paths[i], st_file_size(f.paths[i]) - 4096), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(hc_store_exists(f.st, &f.keys[i], 1), 0);
	for (int i = 3; i < NP; i++)
		assert_int_equal(hc_store_exists(f.st, &f.keys[i], 1), 1);
	assert_int_equal(lines, 1);
	assert_non_null(strstr(last, "exists: 1 objects of the wrong size"));
	/* A missing object is a plain miss: no line. */
	assert_int_equal(unlink(f.paths[3]), 0);
	lines = 0;
	assert_int_equal(hc_store_exists(f.st, &f.keys[3], 1), 0);
	assert_int_equal(lines, 0);
	fx_fini(&f);
}

int main(void)
{
	int rc = st_engine_check();
	if (rc)
		return rc;
	hc_log_set_handler(handler, NULL);
	hc_log_set_level(HC_LOG_WARN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_get_corrupt),
		cmocka_unit_test(test_exists_wrong_size),
	};
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	hc_log_set_handler(NULL, NULL);
	return rc;
}
