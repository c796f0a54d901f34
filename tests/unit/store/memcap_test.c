/* The mem backend's byte cap: least recently used objects go first, a
 * page read counts as a use, and an object larger than the cap is refused. */
#include "test_util.h"

#include <hicache/store.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define PAGE_BYTES 8192 /* object: 8192 payload + a 512-byte trailer block */
#define OBJ_BYTES (PAGE_BYTES + 512)

static struct hc_store *open_mem(uint64_t cap, struct hc_pool *pool)
{
	char json[96];
	snprintf(json, sizeof(json), "{\"mem_capacity_bytes\": %llu, \"object_block\": 512}",
		 (unsigned long long)cap);
	struct hc_config *cfg;
	assert_int_equal(hc_config_create(json, &cfg), 0);
	struct hc_store_opts o;
	hc_store_opts_init(&o, sizeof(o));
	o.backend = "mem";
	o.config = cfg;
	o.force_bounce = true;
	struct hc_store *st;
	assert_int_equal(hc_store_open(&o, &st), 0);
	hc_config_destroy(cfg);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	return st;
}

static void test_lru_cap(void **state)
{
	(void)state;
	/* layer_first: one object per page (page_first has K and V). */
	struct hc_kv_geometry kg = {1, 1, PAGE_BYTES / 2, 1, 1, 8, HC_LAYOUT_LAYER_FIRST, false};
	struct hc_pool *pool;
	assert_int_equal(hc_pool_create_kv(&kg, NULL, &pool), 0);
	struct hc_store *st = open_mem(3 * OBJ_BYTES, pool);

	uint32_t tokens[6];
	for (int i = 0; i < 6; i++)
		tokens[i] = (uint32_t)(1000 + i);
	struct hc_key keys[6];
	assert_int_equal(hc_key_chain(NULL, tokens, 6, 1, keys, 6), 6);
	uint64_t slot = 0;
	uint8_t buf[PAGE_BYTES];
	for (int i = 0; i < 3; i++) {
		memset(buf, i + 1, sizeof(buf));
		assert_int_equal(hc_pool_scatter(pool, 0, buf, sizeof(buf)), 0);
		assert_int_equal(hc_store_set(st, &keys[i], 1, &slot, NULL), 0);
	}
	/* Full: 0, 1, 2. Reading 0 makes 1 the least recently used. */
	uint64_t back = 1;
	assert_int_equal(hc_store_get(st, &keys[0], 1, &back, NULL), 1);
	memset(buf, 4, sizeof(buf));
	assert_int_equal(hc_pool_scatter(pool, 0, buf, sizeof(buf)), 0);
	assert_int_equal(hc_store_set(st, &keys[3], 1, &slot, NULL), 0);
	assert_int_equal(hc_store_exists(st, &keys[0], 1), 1);
	assert_int_equal(hc_store_exists(st, &keys[1], 1), 0); /* evicted */
	assert_int_equal(hc_store_exists(st, &keys[2], 1), 1);
	assert_int_equal(hc_store_exists(st, &keys[3], 1), 1);
	/* What survived is intact. */
	assert_int_equal(hc_store_get(st, &keys[0], 1, &back, NULL), 1);
	assert_int_equal(hc_pool_gather(pool, back, buf, sizeof(buf)), 0);
	for (size_t i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 1);
	hc_store_close(st);

	/* A page bigger than the whole cap is refused, nothing evicted. */
	st = open_mem(OBJ_BYTES - 1, pool);
	int res = 0;
	assert_int_equal(hc_store_set(st, &keys[5], 1, &slot, &res), -ENOSPC);
	assert_int_equal(res, -ENOSPC);
	hc_store_close(st);
	hc_pool_destroy(pool);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lru_cap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
