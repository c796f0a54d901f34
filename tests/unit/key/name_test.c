/* Component names for every kind, pool-name validation, and full physical
 * names "<hex><suffix><component>". */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <hicache/key.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "test_util.h"

static void test_pool_names(void **state)
{
	char p[HC_POOL_NAME_MAX + 2];
	(void)state;

	assert_true(hc_key_pool_name_ok("kv"));
	assert_true(hc_key_pool_name_ok("mamba"));
	assert_true(hc_key_pool_name_ok("swa"));
	assert_true(hc_key_pool_name_ok("indexer_v4_2"));
	assert_true(hc_key_pool_name_ok("_"));
	assert_false(hc_key_pool_name_ok(NULL));
	assert_false(hc_key_pool_name_ok(""));
	assert_false(hc_key_pool_name_ok("KV"));
	assert_false(hc_key_pool_name_ok("s-w-a"));
	assert_false(hc_key_pool_name_ok("a.b"));
	assert_false(hc_key_pool_name_ok("../kv"));
	assert_false(hc_key_pool_name_ok("a/b"));
	assert_false(hc_key_pool_name_ok("a b"));
	assert_false(hc_key_pool_name_ok("kv\n"));
	assert_false(hc_key_pool_name_ok("\xc3\xa9"));
	memset(p, 'a', sizeof(p));
	p[HC_POOL_NAME_MAX] = '\0';
	assert_true(hc_key_pool_name_ok(p));
	p[HC_POOL_NAME_MAX] = 'a';
	p[HC_POOL_NAME_MAX + 1] = '\0';
	assert_false(hc_key_pool_name_ok(p));
}

static const char *comp(enum hc_component kind, const char *pool, uint32_t index)
{
	static char buf[64];
	memset(buf, 'Z', sizeof(buf));
	int rc = hc_key_component(kind, pool, index, buf, sizeof(buf));
	if (rc < 0)
		fail_msg("hc_key_component(%d): %d", (int)kind, rc);
	assert_int_equal(rc, (int)strlen(buf));
	return buf;
}

static void test_components(void **state)
{
	(void)state;
	assert_string_equal(comp(HC_COMP_PLAIN, NULL, 0), "");
	assert_string_equal(comp(HC_COMP_K, NULL, 0), "_k");
	assert_string_equal(comp(HC_COMP_V, NULL, 0), "_v");
	assert_string_equal(comp(HC_COMP_MAMBA_TEMPORAL, NULL, 0), "_mamba_temporal");
	assert_string_equal(comp(HC_COMP_MAMBA_CONV, NULL, 0), "_mamba_conv_0");
	assert_string_equal(comp(HC_COMP_MAMBA_CONV, NULL, 2), "_mamba_conv_2");
	assert_string_equal(comp(HC_COMP_POOL, "mamba", 0), "_mamba");
	assert_string_equal(comp(HC_COMP_POOL_K, "swa", 0), "_swa_k");
	assert_string_equal(comp(HC_COMP_POOL_V, "swa", 0), "_swa_v");
	assert_string_equal(comp(HC_COMP_POOL_INDEX, "indexer", 3), "_indexer_3");
	assert_string_equal(comp(HC_COMP_POOL_INDEX, "indexer", UINT32_MAX), "_indexer_4294967295");
	/* The pool is ignored by kinds that have none. */
	assert_string_equal(comp(HC_COMP_K, "Bad/Pool", 0), "_k");
}

static void test_component_errors(void **state)
{
	char buf[64];
	char longpool[HC_POOL_NAME_MAX + 1];
	(void)state;

	static const enum hc_component pooled[] = {HC_COMP_POOL, HC_COMP_POOL_K, HC_COMP_POOL_V,
						   HC_COMP_POOL_INDEX};
	for (size_t i = 0; i < sizeof(pooled) / sizeof(pooled[0]); i++) {
		assert_int_equal(hc_key_component(pooled[i], NULL, 0, buf, sizeof(buf)), -EINVAL);
		assert_int_equal(hc_key_component(pooled[i], "", 0, buf, sizeof(buf)), -EINVAL);
		assert_int_equal(hc_key_component(pooled[i], "../kv", 0, buf, sizeof(buf)),
				 -EINVAL);
		assert_int_equal(hc_key_component(pooled[i], "Swa", 0, buf, sizeof(buf)), -EINVAL);
		assert_last_error_contains("pool name");
	}
	assert_int_equal(hc_key_component((enum hc_component)99, NULL, 0, buf, sizeof(buf)),
			 -EINVAL);
	assert_int_equal(hc_key_component((enum hc_component) - 1, "kv", 0, buf, sizeof(buf)),
			 -EINVAL);

	/* The longest component fits; room is exact. */
	memset(longpool, 'p', HC_POOL_NAME_MAX);
	longpool[HC_POOL_NAME_MAX] = '\0';
	assert_int_equal(hc_key_component(HC_COMP_POOL_INDEX, longpool, UINT32_MAX, buf,
					  sizeof(buf)),
			 1 + HC_POOL_NAME_MAX + 11);
	assert_int_equal(hc_key_component(HC_COMP_K, NULL, 0, buf, 3), 2);
	assert_int_equal(hc_key_component(HC_COMP_K, NULL, 0, buf, 2), -ENOSPC);
	assert_int_equal(hc_key_component(HC_COMP_PLAIN, NULL, 0, buf, 1), 0);
	assert_int_equal(hc_key_component(HC_COMP_PLAIN, NULL, 0, buf, 0), -ENOSPC);
	assert_int_equal(hc_key_component(HC_COMP_MAMBA_CONV, NULL, 10, buf, 14), -ENOSPC);
	assert_int_equal(hc_key_component(HC_COMP_MAMBA_CONV, NULL, 10, buf, 15), 14);
	assert_int_equal(hc_key_component(HC_COMP_K, NULL, 0, NULL, 8), -EINVAL);
}

static void test_names(void **state)
{
	struct hc_key k;
	char hex[HC_KEY_HEX_LEN + 1], want[HC_NAME_MAX], name[HC_NAME_MAX];
	char suf[HC_SUFFIX_MAX], c[64];
	(void)state;

	for (int i = 0; i < HC_KEY_BYTES; i++)
		k.bytes[i] = (uint8_t)(0xa0 + i);
	hc_key_to_hex(&k, hex);

	assert_int_equal(hc_key_name(&k, NULL, NULL, name, sizeof(name)), HC_KEY_HEX_LEN);
	assert_string_equal(name, hex);
	assert_int_equal(hc_key_name(&k, "", "", name, sizeof(name)), HC_KEY_HEX_LEN);
	assert_string_equal(name, hex);

	assert_true(hc_key_suffix("Qwen/Qwen3-8B", 1, 2, false, suf, sizeof(suf)) > 0);
	assert_true(hc_key_component(HC_COMP_POOL_K, "swa", 0, c, sizeof(c)) > 0);
	snprintf(want, sizeof(want), "%s_Qwen-Qwen3-8B_1_2_swa_k", hex);
	assert_int_equal(hc_key_name(&k, suf, c, name, sizeof(name)), (int)strlen(want));
	assert_string_equal(name, want);
	snprintf(want, sizeof(want), "%s_k", hex);
	assert_int_equal(hc_key_name(&k, NULL, "_k", name, sizeof(name)), (int)strlen(want));
	assert_string_equal(name, want);

	/* Room: exact, one short. */
	assert_int_equal(hc_key_name(&k, "_m", NULL, name, HC_KEY_HEX_LEN + 3), HC_KEY_HEX_LEN + 2);
	assert_int_equal(hc_key_name(&k, "_m", NULL, name, HC_KEY_HEX_LEN + 2), -ENOSPC);
	assert_int_equal(hc_key_name(&k, NULL, NULL, name, HC_KEY_HEX_LEN), -ENOSPC);

	/* A caller-made suffix or component can not add a path separator. */
	assert_int_equal(hc_key_name(&k, "_../../x", NULL, name, sizeof(name)), -EINVAL);
	assert_last_error_contains("'/' in the suffix");
	assert_int_equal(hc_key_name(&k, NULL, "/k", name, sizeof(name)), -EINVAL);
	assert_int_equal(hc_key_name(NULL, NULL, NULL, name, sizeof(name)), -EINVAL);
	assert_int_equal(hc_key_name(&k, NULL, NULL, NULL, 100), -EINVAL);
}

/* The largest suffix plus the largest component exceed NAME_MAX (only with
 * absurd TP sizes); that is refused rather than truncated. Realistic
 * extremes fit HC_NAME_MAX. */
static void test_name_limits(void **state)
{
	struct hc_key k;
	char model[HC_MODEL_NAME_MAX + 1], pool[HC_POOL_NAME_MAX + 1];
	char suf[HC_SUFFIX_MAX], c[64], name[HC_NAME_MAX];
	char big[600];
	(void)state;

	memset(&k, 0x11, sizeof(k));
	memset(model, 'm', HC_MODEL_NAME_MAX);
	model[HC_MODEL_NAME_MAX] = '\0';
	memset(pool, 'p', HC_POOL_NAME_MAX);
	pool[HC_POOL_NAME_MAX] = '\0';

	assert_true(hc_key_suffix(model, 1023, 1024, false, suf, sizeof(suf)) > 0);
	assert_true(hc_key_component(HC_COMP_POOL_INDEX, pool, 1u << 20, c, sizeof(c)) > 0);
	int rc = hc_key_name(&k, suf, c, name, sizeof(name));
	assert_true(rc > 0 && rc < HC_NAME_MAX);
	assert_int_equal(rc, (int)strlen(name));

	assert_true(hc_key_suffix(model, UINT32_MAX - 1, UINT32_MAX, false, suf, sizeof(suf)) > 0);
	assert_true(hc_key_component(HC_COMP_POOL_INDEX, pool, UINT32_MAX, c, sizeof(c)) > 0);
	/* The longest model, rank, size and component still fit: the
	 * guarantee HC_MODEL_NAME_MAX exists for. */
	rc = hc_key_name(&k, suf, c, big, sizeof(big));
	assert_true(rc > 0 && rc < HC_NAME_MAX);
	memset(big, '_', 400);
	big[400] = '\0';
	assert_int_equal(hc_key_name(&k, big, NULL, big + 401, 150), -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_names),       cmocka_unit_test(test_components),
		cmocka_unit_test(test_component_errors), cmocka_unit_test(test_names),
		cmocka_unit_test(test_name_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
