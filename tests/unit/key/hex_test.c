/* Keys as hex text: round trip, either case in, lowercase out, strict length. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <hicache/key.h>

#include <errno.h>
#include <string.h>

static void test_round_trip(void **state)
{
	struct hc_key k, back;
	char hex[HC_KEY_HEX_LEN + 1];
	(void)state;

	for (int seed = 0; seed < 256; seed++) {
		for (int i = 0; i < HC_KEY_BYTES; i++)
			k.bytes[i] = (uint8_t)(seed * 31 + i * 97 + (i == seed % 32 ? 0xff : 0));
		memset(hex, 'z', sizeof(hex));
		hc_key_to_hex(&k, hex);
		assert_int_equal(strlen(hex), HC_KEY_HEX_LEN);
		for (int i = 0; i < HC_KEY_HEX_LEN; i++)
			assert_true(strchr("0123456789abcdef", hex[i]) != NULL);
		assert_int_equal(hc_key_from_hex(hex, &back), 0);
		assert_memory_equal(&k, &back, sizeof(k));
	}
}

static void test_known_text(void **state)
{
	struct hc_key k;
	char hex[HC_KEY_HEX_LEN + 1];
	(void)state;

	for (int i = 0; i < HC_KEY_BYTES; i++)
		k.bytes[i] = (uint8_t)(i * 8 + 0x0f);
	hc_key_to_hex(&k, hex);
	assert_string_equal(hex,
			    "0f171f272f373f474f575f676f777f878f979fa7afb7bfc7cfd7dfe7eff7ff07");
}

static void test_upper_case_in(void **state)
{
	const char *lower = "00ff10aa55deadbeefcafebabe0123456789abcdef00112233445566778899aa";
	const char *upper = "00FF10AA55DEADBEEFCAFEBABE0123456789ABCDEF00112233445566778899AA";
	const char *mixed = "00fF10aA55dEaDbEeFcAfEbAbE0123456789aBcDeF00112233445566778899aA";
	struct hc_key a, b, c;
	char hex[HC_KEY_HEX_LEN + 1];
	(void)state;

	assert_int_equal(hc_key_from_hex(lower, &a), 0);
	assert_int_equal(hc_key_from_hex(upper, &b), 0);
	assert_int_equal(hc_key_from_hex(mixed, &c), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_memory_equal(&a, &c, sizeof(a));
	assert_int_equal(a.bytes[0], 0x00);
	assert_int_equal(a.bytes[1], 0xff);
	assert_int_equal(a.bytes[5], 0xde);
	hc_key_to_hex(&b, hex);
	assert_string_equal(hex, lower);
}

static void test_rejects(void **state)
{
	char s[HC_KEY_HEX_LEN + 8];
	struct hc_key k, keep;
	(void)state;

	memset(&keep, 0x5a, sizeof(keep));
	k = keep;
	memset(s, 'a', HC_KEY_HEX_LEN);
	s[HC_KEY_HEX_LEN] = '\0';
	assert_int_equal(hc_key_from_hex(s, &k), 0);

	k = keep;
	s[HC_KEY_HEX_LEN - 1] = '\0'; /* 63 digits */
	assert_int_equal(hc_key_from_hex(s, &k), -EINVAL);
	assert_memory_equal(&k, &keep, sizeof(k));

	s[HC_KEY_HEX_LEN - 1] = 'a';
	s[HC_KEY_HEX_LEN] = 'a'; /* 65 digits */
	s[HC_KEY_HEX_LEN + 1] = '\0';
	assert_int_equal(hc_key_from_hex(s, &k), -EINVAL);
	s[HC_KEY_HEX_LEN] = '_'; /* a physical name is not a key */
	assert_int_equal(hc_key_from_hex(s, &k), -EINVAL);
	s[HC_KEY_HEX_LEN] = '\0';

	static const char bad[] = {'g', 'G', ' ', '-', 'x', '\n', (char)0xc3};
	for (size_t b = 0; b < sizeof(bad); b++) {
		for (int pos = 0; pos < HC_KEY_HEX_LEN; pos += 21) {
			char t[HC_KEY_HEX_LEN + 1];
			memcpy(t, s, sizeof(t));
			t[pos] = bad[b];
			assert_int_equal(hc_key_from_hex(t, &k), -EINVAL);
			assert_memory_equal(&k, &keep, sizeof(k));
		}
	}
	assert_int_equal(hc_key_from_hex("", &k), -EINVAL);
	assert_int_equal(hc_key_from_hex(NULL, &k), -EINVAL);
	assert_int_equal(hc_key_from_hex(s, NULL), -EINVAL);
	assert_memory_equal(&k, &keep, sizeof(k));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_known_text),
		cmocka_unit_test(test_upper_case_in),
		cmocka_unit_test(test_rejects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
