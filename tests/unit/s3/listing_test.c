/* ls and gc over listings a hostile or odd endpoint (a local fake server)
 * returns: keys outside the prefix or with dot segments are never deleted
 * (libcurl folds "p/../other/x" to "other/x" unless told not to); page
 * objects named by the bare 64 hex (an MLA store without a model, bounce
 * mode) are listed and collected; LastModified years outside what 64-bit
 * nanoseconds hold; a listing over the size limit fails -EFBIG with its own
 * message. */
#include "fake_s3.h"
#include "store/backend/s3/s3_list.h"

#include <hicache/store.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define HEX "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

struct entry {
	const char *key;
	unsigned size;
	const char *mtime;
};

static const struct entry *_Atomic listing;
static _Atomic size_t listing_n;
static _Atomic size_t pad_bytes; /* > 0: a listing this big */

static void respond(void *arg, const char *method, const char *target, struct fh_reply *out)
{
	(void)arg;
	if (!strcmp(method, "HEAD")) {
		fh_reply_fmt(out, FH_KEEP, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
	} else if (!strcmp(method, "DELETE")) {
		fh_reply_fmt(out, FH_KEEP, "HTTP/1.1 204 No Content\r\n\r\n");
	} else if (!strcmp(method, "GET") && strstr(target, "list-type=2")) {
		size_t pad = atomic_load(&pad_bytes);
		size_t cap = 4096 + pad + atomic_load(&listing_n) * 512, len = 0;
		char *xml = malloc(cap);
		len += (size_t)snprintf(xml + len, cap - len,
					"<?xml version=\"1.0\"?><ListBucketResult>"
					"<IsTruncated>false</IsTruncated>");
		const struct entry *e = atomic_load(&listing);
		for (size_t i = 0; i < atomic_load(&listing_n); i++)
			len += (size_t)snprintf(xml + len, cap - len,
						"<Contents><Key>%s</Key><LastModified>%s"
						"</LastModified><Size>%u</Size></Contents>",
						e[i].key, e[i].mtime, e[i].size);
		if (pad) {
			memset(xml + len, ' ', pad);
			len += pad;
		}
		len += (size_t)snprintf(xml + len, cap - len, "</ListBucketResult>");
		fh_reply_body(out, 200, xml, len);
		free(xml);
	} else {
		fh_reply_fmt(out, FH_KEEP, "HTTP/1.1 404 X\r\nContent-Length: 0\r\n\r\n");
	}
}

static struct fh_server srv;

static int setup(void **state)
{
	(void)state;
	if (fh_start(&srv, respond, NULL))
		return -1;
	char ep[64];
	fh_endpoint(&srv, ep, sizeof(ep));
	setenv("HICACHE_S3_ENDPOINT", ep, 1);
	setenv("AWS_ACCESS_KEY_ID", "AK", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "SK", 1);
	setenv("HICACHE_S3_REGION", "us-east-1", 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	fh_stop(&srv);
	return 0;
}

static void serve(const struct entry *e, size_t n)
{
	atomic_store(&listing, e);
	atomic_store(&listing_n, n);
}

static void test_gc_stays_in_prefix(void **state)
{
	(void)state;
	static const struct entry e[] = {
		{"p/" HEX "_m_0_1", 100, "2020-01-01T00:00:00.000Z"},
		{"p/../other/" HEX "_m_0_1", 100, "2000-01-01T00:00:00.000Z"},
		{"p/./" HEX "_m_0_2", 100, "2000-01-01T00:00:00.000Z"},
		{"p/sub/../../x/" HEX "_m_0_3", 100, "2000-01-01T00:00:00.000Z"},
		{"p/..", 100, "2000-01-01T00:00:00.000Z"},
		{"other/" HEX "_m_0_1", 100, "2000-01-01T00:00:00.000Z"},
		{"q/" HEX "_m_0_1", 100, "2000-01-01T00:00:00.000Z"},
	};
	serve(e, sizeof(e) / sizeof(e[0]));
	struct hc_ls_report r;
	assert_int_equal(s3_tool_ls("s3://fake/p/", &r), 0);
	assert_int_equal(r.objects, 1);
	assert_int_equal(r.bytes, 100);
	uint64_t pages = 9, bytes = 9;
	unsigned before = fh_count(&srv, "DELETE");
	assert_int_equal(s3_tool_gc("s3://fake/p/", 0, &pages, &bytes), 0);
	assert_int_equal(pages, 1);
	assert_int_equal(bytes, 100);
	/* Exactly the one object under the prefix was deleted. */
	assert_int_equal(fh_count(&srv, "DELETE"), before + 1);
	assert_true(fh_saw(&srv, "DELETE /fake/p/" HEX "_m_0_1"));
	assert_false(fh_saw(&srv, "DELETE /fake/other"));
	assert_false(fh_saw(&srv, "DELETE /fake/x"));
	assert_false(fh_saw(&srv, "DELETE /fake/q"));
	assert_false(fh_saw(&srv, "DELETE /fake/p/."));
}

static void test_prefix_with_dot_segments_refused(void **state)
{
	(void)state;
	struct hc_ls_report r;
	assert_int_equal(s3_tool_ls("s3://fake/p/../", &r), -EINVAL);
	assert_non_null(strstr(hc_last_error(), "'..'"));
	assert_int_equal(s3_tool_ls("s3://fake/./p/", &r), -EINVAL);
}

/* Objects named by the bare 64 hex are page objects: listed, collected. */
static void test_bare_hex_names(void **state)
{
	(void)state;
	static const struct entry e[] = {
		{"p/" HEX, 100, "2020-01-01T00:00:00.000Z"},
		{"p/" HEX "_m_0_1", 50, "2020-01-01T00:00:01.000Z"},
		{"p/sub/" HEX, 10, "2020-01-02T00:00:00.000Z"},
		{"p/0123", 7, "2020-01-02T00:00:00.000Z"},
	};
	serve(e, sizeof(e) / sizeof(e[0]));
	struct hc_ls_report r;
	assert_int_equal(s3_tool_ls("s3://fake/p/", &r), 0);
	assert_int_equal(r.objects, 3);
	assert_int_equal(r.pages, 2);
	assert_int_equal(r.bytes, 160);
	uint64_t pages = 0, bytes = 0;
	assert_int_equal(s3_tool_gc("s3://fake/p/", 0, &pages, &bytes), 0);
	assert_int_equal(pages, 2);
	assert_int_equal(bytes, 160);
	assert_true(fh_saw(&srv, "DELETE /fake/p/" HEX " "));
	assert_true(fh_saw(&srv, "DELETE /fake/p/sub/" HEX " "));
	assert_false(fh_saw(&srv, "DELETE /fake/p/0123 "));
}

static void test_last_modified_range(void **state)
{
	(void)state;
	assert_true(s3_parse_time("2026-11-30T05:34:34.388Z") == 1796016874388000000ll);
	assert_true(s3_parse_time("1678-01-01T00:00:00.000Z") == -9214560000000000000ll);
	assert_true(s3_parse_time("2262-01-01T00:00:00.000Z") == 9214646400000000000ll);
	/* Outside what int64 nanoseconds hold: unreadable (0), not wrapped. */
	assert_true(s3_parse_time("1677-01-01T00:00:00.000Z") == 0);
	assert_true(s3_parse_time("1500-06-01T00:00:00.000Z") == 0);
	assert_true(s3_parse_time("2263-01-01T00:00:00.000Z") == 0);
	assert_true(s3_parse_time("9999-12-31T23:59:59.999Z") == 0);
	assert_true(s3_parse_time("99999999-12-31T23:59:59.999Z") == 0);
	assert_true(s3_parse_time("garbage") == 0);
	/* And through a listing: the page is listed, its age unreadable. */
	static const struct entry e[] = {
		{"p/" HEX "_m_0_1", 100, "1500-01-01T00:00:00.000Z"},
		{"p/" HEX "_m_0_2", 100, "3000-01-01T00:00:00.000Z"},
	};
	serve(e, 2);
	struct hc_ls_report r;
	assert_int_equal(s3_tool_ls("s3://fake/p/", &r), 0);
	assert_int_equal(r.objects, 2);
	assert_int_equal(r.oldest_ns, 0);
	assert_int_equal(r.newest_ns, 0);
}

static void test_listing_too_big(void **state)
{
	(void)state;
	static const struct entry e[] = {{"p/" HEX "_m_0_1", 100, "2020-01-01T00:00:00.000Z"}};
	serve(e, 1);
	atomic_store(&pad_bytes, (size_t)65 << 20);
	struct hc_ls_report r;
	int rc = s3_tool_ls("s3://fake/p/", &r);
	atomic_store(&pad_bytes, 0);
	assert_int_equal(rc, -EFBIG);
	assert_non_null(strstr(hc_last_error(), "over 64 MiB"));
	/* A listing just under the limit is read. */
	atomic_store(&pad_bytes, (size_t)60 << 20);
	rc = s3_tool_ls("s3://fake/p/", &r);
	atomic_store(&pad_bytes, 0);
	assert_int_equal(rc, 0);
	assert_int_equal(r.objects, 1);
}

int main(void)
{
	hc_log_set_level(HC_LOG_OFF);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gc_stays_in_prefix),
		cmocka_unit_test(test_prefix_with_dot_segments_refused),
		cmocka_unit_test(test_bare_hex_names),
		cmocka_unit_test(test_last_modified_range),
		cmocka_unit_test(test_listing_too_big),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
