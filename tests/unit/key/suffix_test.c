/* Suffixes: "_<model>" for rank-replicated (MLA) pools, else
 * "_<model>_<rank>_<size>", model sanitised. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <hicache/key.h>

#include <errno.h>
#include <string.h>

#include "test_util.h"

static const char *suffix(const char *model, uint32_t rank, uint32_t size, bool mla)
{
	static char buf[HC_SUFFIX_MAX];
	memset(buf, 'Z', sizeof(buf));
	int rc = hc_key_suffix(model, rank, size, mla, buf, sizeof(buf));
	if (rc < 0)
		fail_msg("hc_key_suffix: %d", rc);
	assert_int_equal(rc, (int)strlen(buf));
	return buf;
}

static void test_forms(void **state)
{
	(void)state;
	assert_string_equal(suffix("meta-llama/Llama-3.1-8B", 1, 4, false),
			    "_meta-llama-Llama-3.1-8B_1_4");
	assert_string_equal(suffix("meta-llama/Llama-3.1-8B", 3, 4, true),
			    "_meta-llama-Llama-3.1-8B");
	assert_string_equal(suffix("deepseek-ai/DeepSeek-V3", 0, 8, true),
			    "_deepseek-ai-DeepSeek-V3");
	assert_string_equal(suffix("m", 0, 1, false), "_m_0_1");
	assert_string_equal(suffix("m", 0, 0, false), "_m");
	assert_string_equal(suffix("m", 0, 0, true), "_m");
	assert_string_equal(suffix(NULL, 2, 8, false), "_2_8");
	assert_string_equal(suffix("", 2, 8, false), "_2_8");
	assert_string_equal(suffix(NULL, 2, 8, true), "");
	assert_string_equal(suffix(NULL, 0, 0, false), "");
	assert_string_equal(suffix("../x", 0, 2, false), "__.-x_0_2"); /* sanitised */
	assert_string_equal(suffix("m", UINT32_MAX - 1, UINT32_MAX, false),
			    "_m_4294967294_4294967295");
}

static void test_rank_checks(void **state)
{
	char buf[HC_SUFFIX_MAX];
	(void)state;

	assert_int_equal(hc_key_suffix("m", 4, 4, false, buf, sizeof(buf)), -EINVAL);
	assert_last_error_contains("TP rank 4 is not below TP size 4");
	assert_int_equal(hc_key_suffix("m", 5, 4, false, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(hc_key_suffix("m", 4, 4, true, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(hc_key_suffix(NULL, 1, 1, false, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(hc_key_suffix("m", 3, 4, false, buf, sizeof(buf)), 6);
}

static void test_limits(void **state)
{
	char model[HC_MODEL_NAME_MAX + 2];
	char buf[HC_SUFFIX_MAX];
	(void)state;

	memset(model, 'q', sizeof(model));
	model[HC_MODEL_NAME_MAX + 1] = '\0';
	assert_int_equal(hc_key_suffix(model, 0, 2, false, buf, sizeof(buf)), -ENAMETOOLONG);
	model[HC_MODEL_NAME_MAX] = '\0';
	/* The longest suffix there is still fits HC_SUFFIX_MAX. */
	int rc = hc_key_suffix(model, UINT32_MAX - 1, UINT32_MAX, false, buf, sizeof(buf));
	assert_int_equal(rc, 1 + HC_MODEL_NAME_MAX + 11 + 11);
	assert_true(rc < HC_SUFFIX_MAX);

	/* Exactly enough room, one byte less, and none. */
	assert_int_equal(hc_key_suffix("abc", 1, 2, false, buf, 9), 8);
	assert_string_equal(buf, "_abc_1_2");
	assert_int_equal(hc_key_suffix("abc", 1, 2, false, buf, 8), -ENOSPC);
	assert_int_equal(hc_key_suffix("abc", 1, 2, true, buf, 4), -ENOSPC);
	assert_int_equal(hc_key_suffix("abc", 1, 2, true, buf, 5), 4);
	assert_int_equal(hc_key_suffix("abc", 1, 2, true, buf, 0), -ENOSPC);
	assert_int_equal(hc_key_suffix("abc", 1, 2, true, NULL, 8), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forms),
		cmocka_unit_test(test_rank_checks),
		cmocka_unit_test(test_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
