/* Model-name sanitising against hostile names: a name never leaves its
 * directory, whatever bytes the model name holds. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <hicache/key.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static bool allowed(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

/* The invariants every sanitised name keeps. */
static void check_safe(const char *s, size_t in_len)
{
	size_t len = strlen(s);

	assert_int_equal(len, in_len);
	assert_true(len > 0);
	assert_null(strchr(s, '/'));
	assert_true(s[0] != '.');
	assert_null(strstr(s, ".."));
	assert_true(strcmp(s, ".") && strcmp(s, ".."));
	for (size_t i = 0; i < len; i++)
		assert_true(allowed((unsigned char)s[i]));
}

static void test_table(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"meta-llama/Llama-3.1-8B-Instruct", "meta-llama-Llama-3.1-8B-Instruct"},
		{"Qwen/Qwen3-8B", "Qwen-Qwen3-8B"},
		{"plain_name-1.0", "plain_name-1.0"},
		{"../../etc/passwd", "_.-._-etc-passwd"},
		{"..", "_."},
		{".", "_"},
		{"...", "_._"},
		{"....", "_._."},
		{"a..b", "a._b"},
		{"a...b", "a._.b"},
		{".hidden", "_hidden"},
		{"/", "-"},
		{"//", "--"},
		{"/abs/path", "-abs-path"},
		{"a/../b", "a-._-b"},
		{"my model", "my_model"},
		{" ", "_"},
		{"tab\there\nnl\r", "tab_here_nl_"},
		{"\x01\x1f\x7f", "___"},
		{"\\..\\x", "_.__x"},
		{"Qwen\xe2\x80\x94\xe6\xa8\xa1\xe5\x9e\x8b", "Qwen_________"},
		{"\xff\xfe", "__"},
		{"a:b*c?d\"e<f>g|h", "a_b_c_d_e_f_g_h"},
		{"$(rm -rf ~)", "__rm_-rf___"},
		{"x.", "x."},
		{"-", "-"},
	};
	char out[HC_MODEL_NAME_MAX + 1];
	(void)state;

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		memset(out, 'Z', sizeof(out));
		int rc = hc_key_sanitize_model(cases[c].in, out, sizeof(out));
		if (rc < 0 || strcmp(out, cases[c].out))
			fail_msg("case %zu: got rc %d '%s', want '%s'", c, rc, rc < 0 ? "" : out,
				 cases[c].out);
		assert_int_equal(rc, (int)strlen(cases[c].in));
		check_safe(out, strlen(cases[c].in));
	}
}

static void test_lengths(void **state)
{
	char in[HC_MODEL_NAME_MAX + 2];
	char out[HC_MODEL_NAME_MAX + 1];
	char small[4];
	(void)state;

	memset(in, 'm', sizeof(in));
	in[HC_MODEL_NAME_MAX] = '\0';
	assert_int_equal(hc_key_sanitize_model(in, out, sizeof(out)), HC_MODEL_NAME_MAX);
	in[HC_MODEL_NAME_MAX] = 'm';
	in[HC_MODEL_NAME_MAX + 1] = '\0';
	assert_int_equal(hc_key_sanitize_model(in, out, sizeof(out)), -ENAMETOOLONG);
	assert_last_error_contains("model name longer than 120 bytes");

	/* Very long: rejected without a problem (and without reading it all). */
	size_t big = 1 << 20;
	char *huge = malloc(big + 1);
	assert_non_null(huge);
	memset(huge, '.', big);
	huge[big] = '\0';
	assert_int_equal(hc_key_sanitize_model(huge, out, sizeof(out)), -ENAMETOOLONG);
	free(huge);

	assert_int_equal(hc_key_sanitize_model("abc", small, sizeof(small)), 3);
	assert_string_equal(small, "abc");
	assert_int_equal(hc_key_sanitize_model("abcd", small, sizeof(small)), -ENOSPC);
	assert_int_equal(hc_key_sanitize_model("abcd", small, 0), -ENOSPC);
	assert_int_equal(hc_key_sanitize_model("", out, sizeof(out)), -EINVAL);
	assert_int_equal(hc_key_sanitize_model(NULL, out, sizeof(out)), -EINVAL);
	assert_int_equal(hc_key_sanitize_model("abc", NULL, 16), -EINVAL);
}

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint32_t rng32(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32);
}

/* Random NUL-free byte strings, biased to the bytes that matter ('.', '/'),
 * checked against the invariants, the byte-for-byte mapping, and
 * idempotence (a sanitised name sanitises to itself). */
static void test_property(void **state)
{
	static const char hot[] = "./._-aZ9 \\";
	char in[HC_MODEL_NAME_MAX + 40];
	char out[HC_MODEL_NAME_MAX + 1], again[HC_MODEL_NAME_MAX + 1];
	(void)state;

	for (int iter = 0; iter < 200000; iter++) {
		size_t len = 1 + rng32() % (HC_MODEL_NAME_MAX + 30);
		for (size_t i = 0; i < len; i++) {
			uint32_t r = rng32();
			in[i] = (r & 1) ? hot[(r >> 1) % (sizeof(hot) - 1)]
					: (char)(1 + (r >> 1) % 255);
		}
		in[len] = '\0';
		int rc = hc_key_sanitize_model(in, out, sizeof(out));
		if (len > HC_MODEL_NAME_MAX) {
			assert_int_equal(rc, -ENAMETOOLONG);
			continue;
		}
		assert_int_equal(rc, (int)len);
		check_safe(out, len);
		for (size_t i = 0; i < len; i++) {
			unsigned char c = (unsigned char)in[i];
			if (c == '/')
				assert_int_equal(out[i], '-');
			else if (!allowed(c))
				assert_int_equal(out[i], '_');
			else if (c != '.')
				assert_int_equal(out[i], c);
			else
				assert_true(out[i] == '.' || out[i] == '_');
		}
		assert_int_equal(hc_key_sanitize_model(out, again, sizeof(again)), rc);
		assert_string_equal(again, out);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_lengths),
		cmocka_unit_test(test_property),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
