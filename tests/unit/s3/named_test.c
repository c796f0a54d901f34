/* Names in place of keys on S3: names with bytes that mean something in a
 * URL ('%', '+', '?', '#', ' ', '&', '=') or in XML, and non-ASCII UTF-8
 * round-trip,
 * and the bucket holds each object under exactly "<prefix><name><suffix>
 * <component>" (checked with a raw HEAD of that key, encoded here). */
#include "s3_test.h"

#include <locale.h>

enum { KV_ID = 1 };

static const char *const names[] = {
	"p0",
	"100%",
	"a+b",
	"what?",
	"#frag",
	"sp ace",
	"a&b=c",
	"\xc3\xa9t\xc3\xa9",
	"\xe2\x82\xac\xf0\x9f\x98\x80",
	"%2F",
	"~._-",
	"a<b>'\"",
};
#define NN (sizeof(names) / sizeof(names[0]))

/* The key's path as a URL: every byte but the unreserved ones as %XX. */
static void url_key(const char *key, char *out, size_t size)
{
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)key; *p && o + 4 < size; p++) {
		bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
			     (*p >= '0' && *p <= '9') || strchr("-_.~/", *p);
		if (plain)
			out[o++] = (char)*p;
		else
			o += (size_t)snprintf(out + o, size - o, "%%%02X", *p);
	}
	out[o] = '\0';
}

static void test_names(void **state)
{
	(void)state;
	/* A locale where isalnum() may say yes to bytes above 0x7f must not
	 * change what goes on the wire (C.UTF-8 when there is one). */
	setlocale(LC_CTYPE, "C.UTF-8");
	for (int bounce = 0; bounce < 2; bounce++) {
		char sub[16];
		snprintf(sub, sizeof(sub), "n%d/", bounce);
		struct hc_store *st = s3t_open(sub, bounce, NULL);
		struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 2 * NN);
		struct hc_pool *kv = st_kv_pool(&g);
		assert_int_equal(hc_store_register_pool(st, "kv", kv, true), 0);
		uint64_t w[NN], r[NN];
		int res[NN];
		for (size_t i = 0; i < NN; i++) {
			w[i] = i;
			r[i] = NN + i;
			st_fill(kv, w[i], KV_ID, i);
		}
		assert_int_equal(hc_store_exists_named(st, names, NN), 0);
		assert_int_equal(hc_store_set_named(st, names, NN, w, res), 0);
		for (size_t i = 0; i < NN; i++)
			assert_int_equal(res[i], 0);
		assert_int_equal(hc_store_exists_named(st, names, NN), NN);
		for (size_t i = 0; i < NN; i++)
			st_clear(kv, r[i]);
		assert_int_equal(hc_store_get_named(st, names, NN, r, res), NN);
		for (size_t i = 0; i < NN; i++)
			st_assert_page(kv, r[i], KV_ID, i);
		/* The objects' keys are the names, byte for byte: page_first
		 * stores "_k" and "_v", bounced or not, and no plain object. */
		struct hc_store_pool_info info;
		assert_int_equal(hc_store_pool_info(st, "kv", &info), 0);
		assert_int_equal(info.zero_copy, !bounce);
		assert_int_equal(info.objects, 2);
		static const char *const comps[] = {"_k", "_v", ""};
		for (size_t i = 0; i < NN; i++) {
			for (int c = 0; c < 3; c++) {
				char key[512], enc[1600];
				snprintf(key, sizeof(key), "%s%s%s%s%s", s3t_prefix, sub, names[i],
					 ST_SUFFIX, comps[c]);
				url_key(key, enc, sizeof(enc));
				long want = *comps[c] ? 200 : 404;
				if (s3t_raw("HEAD", enc, NULL, 0) != want)
					fail_msg("HEAD '%s': expected %ld", key, want);
			}
		}
		/* Another name differing by one encoded byte is another object. */
		const char *other[1] = {"100%25"};
		assert_int_equal(hc_store_exists_named(st, other, 1), 0);
		hc_store_close(st);
		hc_pool_destroy(kv);
	}
}

int main(void)
{
	int rc = s3t_setup("named");
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
