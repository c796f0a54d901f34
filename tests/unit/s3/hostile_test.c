/* The S3 backend against a hostile endpoint (a local fake server): folded
 * headers, broken status lines, truncated and oversized headers and bodies,
 * nonsense lengths. Every answer gives a clean result (a miss or an error,
 * never bytes that were not sent, never a crash: libcurl 7.88.1 frees a
 * folded header twice on a reused easy handle, curl issue 11101), and the
 * next good answer on the same backend works. Runs under ASan. */
#include "fake_s3.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define LEN 100

static const char *_Atomic mode = "good";
static char body[LEN];
static char big_header[300 * 1024];

static void respond(void *arg, const char *method, const char *target, struct fh_reply *out)
{
	(void)arg;
	const char *m = atomic_load(&mode);
	if (!strcmp(method, "HEAD") && !strcmp(target, "/fake")) {
		fh_reply_fmt(out, FH_KEEP, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
		return;
	}
	bool head = !strcmp(method, "HEAD");
	if (!strcmp(m, "good")) {
		if (head || !strcmp(method, "PUT"))
			fh_reply_fmt(out, FH_KEEP, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n",
				     head ? LEN : 0);
		else
			fh_reply_body(out, 200, body, LEN);
	} else if (!strcmp(m, "folded_first")) {
		fh_reply_fmt(out, FH_CLOSE,
			     "HTTP/1.1 200 OK\r\n Folded: yes\r\nContent-Length: %d\r\n"
			     "\r\n%.*s",
			     LEN, LEN, body);
	} else if (!strcmp(m, "folded_tab")) {
		fh_reply_fmt(out, FH_CLOSE,
			     "HTTP/1.1 200 OK\r\n\tx\r\n\ty\r\nContent-Length: %d\r\n"
			     "\r\n%.*s",
			     LEN, LEN, body);
	} else if (!strcmp(m, "folded_later")) {
		fh_reply_fmt(out, FH_CLOSE,
			     "HTTP/1.1 200 OK\r\nA: b\r\n c\r\nContent-Length: %d\r\n"
			     "\r\n%.*s",
			     LEN, LEN, body);
	} else if (!strcmp(m, "status_garbage")) {
		fh_reply_fmt(out, FH_CLOSE, "garbage\r\n\r\n");
	} else if (!strcmp(m, "status_nocode")) {
		fh_reply_fmt(out, FH_CLOSE, "HTTP/1.1 abc\r\nContent-Length: 0\r\n\r\n");
	} else if (!strcmp(m, "status_huge")) {
		fh_reply_fmt(out, FH_CLOSE,
			     "HTTP/1.1 99999999999999999999 X\r\nContent-Length: 0\r\n\r\n");
	} else if (!strcmp(m, "status_version")) {
		fh_reply_fmt(out, FH_CLOSE, "HTTP/9.9 200 OK\r\nContent-Length: %d\r\n\r\n%.*s",
			     LEN, LEN, body);
	} else if (!strcmp(m, "empty")) {
		fh_reply_fmt(out, FH_CLOSE, "%s", "");
	} else if (!strcmp(m, "headers_truncated")) {
		fh_reply_fmt(out, FH_CLOSE, "HTTP/1.1 200 OK\r\nContent-Len");
	} else if (!strcmp(m, "headers_huge")) {
		fh_reply_fmt(out, FH_CLOSE,
			     "HTTP/1.1 200 OK\r\nX-Big: %s\r\nContent-Length: %d\r\n\r\n"
			     "%.*s",
			     big_header, LEN, LEN, body);
	} else if (!strcmp(m, "headers_many")) {
		char *many = malloc(20000 * 8 + 1);
		for (int i = 0; i < 20000; i++)
			memcpy(many + 8 * i, "A: bcd\r\n", 8);
		many[20000 * 8] = '\0';
		fh_reply_fmt(out, FH_CLOSE, "HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%.*s",
			     many, LEN, LEN, body);
		free(many);
	} else if (!strcmp(m, "body_truncated")) {
		fh_reply_fmt(out, FH_CLOSE, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%.*s",
			     LEN, 10, body);
	} else if (!strcmp(m, "body_long")) {
		fh_reply_fmt(out, FH_CLOSE, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%.*s%.*s",
			     2 * LEN, LEN, body, LEN, body);
	} else if (!strcmp(m, "body_long_nolen")) {
		fh_reply_fmt(out, FH_CLOSE, "HTTP/1.1 200 OK\r\n\r\n%.*s%.*s", LEN, body, LEN,
			     body);
	} else if (!strcmp(m, "chunked_bad")) {
		fh_reply_fmt(out, FH_CLOSE,
			     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			     "zz\r\nabc\r\n");
	} else if (!strcmp(m, "chunked_huge")) {
		fh_reply_fmt(out, FH_CLOSE,
			     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			     "ffffffffffffffffff\r\nabc\r\n");
	} else if (!strcmp(m, "length_negative")) {
		fh_reply_fmt(out, FH_CLOSE, "HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n");
	} else if (!strcmp(m, "length_huge")) {
		fh_reply_fmt(out, FH_CLOSE,
			     "HTTP/1.1 200 OK\r\nContent-Length: "
			     "99999999999999999999999\r\n\r\n");
	} else if (!strcmp(m, "length_two")) {
		fh_reply_fmt(out, FH_CLOSE,
			     "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Length: "
			     "5\r\n\r\n%.*s",
			     LEN, LEN, body);
	} else if (!strcmp(m, "error_body_huge")) {
		fh_reply_fmt(out, FH_CLOSE, "HTTP/1.1 404 X\r\nContent-Length: %zu\r\n\r\n<Code>%s",
			     sizeof(big_header) + 6 - 1, big_header);
	} else if (!strcmp(m, "nul_in_header")) {
		static const char r[] = "HTTP/1.1 200 OK\r\nA: \0b\r\nContent-Length: 0\r\n\r\n";
		fh_reply_raw(out, r, sizeof(r) - 1, FH_CLOSE);
	} else {
		fh_reply_fmt(out, FH_CLOSE, "HTTP/1.1 500 X\r\nContent-Length: 0\r\n\r\n");
	}
}

static const char *const modes[] = {
	"folded_first",  "folded_tab",      "folded_later", "status_garbage",    "status_nocode",
	"status_huge",   "status_version",  "empty",        "headers_truncated", "headers_huge",
	"headers_many",  "body_truncated",  "body_long",    "body_long_nolen",   "chunked_bad",
	"chunked_huge",  "length_negative", "length_huge",  "length_two",        "error_body_huge",
	"nul_in_header",
};

/* A good answer reads back whole, so the backend is in a clean state. */
static void check_good(void *be)
{
	char buf[LEN];
	atomic_store(&mode, "good");
	memset(buf, 0, sizeof(buf));
	assert_int_equal(fs3_get(be, "obj", buf, LEN), 0);
	assert_memory_equal(buf, body, LEN);
	assert_int_equal(fs3_exists(be, "obj", LEN), 0);
	assert_int_equal(fs3_put(be, "obj", body, LEN), 0);
}

static void test_hostile_answers(void **state)
{
	(void)state;
	for (size_t i = 0; i < LEN; i++)
		body[i] = (char)('a' + i % 26);
	memset(big_header, 'h', sizeof(big_header) - 1);
	struct fh_server s;
	assert_int_equal(fh_start(&s, respond, NULL), 0);
	void *be;
	assert_int_equal(fs3_open(&s, "\"retries\": 1, \"timeout_ms\": 5000", &be), 0);
	unsigned fds = fs3_count_fds();
	/* Twice over, so every answer also meets connections and handles
	 * that earlier answers used. */
	for (int round = 0; round < 2; round++) {
		for (size_t k = 0; k < sizeof(modes) / sizeof(modes[0]); k++) {
			check_good(be);
			atomic_store(&mode, modes[k]);
			char buf[LEN];
			memset(buf, 0, sizeof(buf));
			int rc = fs3_get(be, "obj", buf, LEN);
			/* A whole body that was sent may read back; else an error. */
			assert_true(rc <= 0);
			if (rc == 0)
				assert_memory_equal(buf, body, LEN);
			/* A miss, or an object of the wrong size (a miss to
			 * every caller, logged apart). */
			rc = fs3_exists(be, "obj", LEN);
			assert_true(rc == 0 || rc == -ENOENT || rc == -EBADMSG);
			rc = fs3_put(be, "obj", body, LEN);
			assert_true(rc <= 0);
			print_message("%s: get/exists/put gave no crash\n", modes[k]);
		}
	}
	check_good(be);
	/* Broken answers here all close their connection: none may linger. */
	assert_true(fs3_count_fds() <= fds + 1);
	store_s3_ops.close(be);
	fh_stop(&s);
}

/* The broken answers that must be errors, whatever libcurl makes of the
 * rest: a body cut short, a body longer than the object, an answer with no
 * status. */
static void test_errors_named(void **state)
{
	(void)state;
	struct fh_server s;
	assert_int_equal(fh_start(&s, respond, NULL), 0);
	void *be;
	assert_int_equal(fs3_open(&s, "\"retries\": 0, \"timeout_ms\": 5000", &be), 0);
	char buf[LEN];
	atomic_store(&mode, "body_truncated");
	assert_true(fs3_get(be, "obj", buf, LEN) < 0);
	atomic_store(&mode, "body_long");
	assert_int_equal(fs3_get(be, "obj", buf, LEN), -EFBIG);
	atomic_store(&mode, "body_long_nolen");
	assert_int_equal(fs3_get(be, "obj", buf, LEN), -EFBIG);
	atomic_store(&mode, "status_garbage");
	assert_true(fs3_get(be, "obj", buf, LEN) < 0);
	atomic_store(&mode, "empty");
	assert_true(fs3_get(be, "obj", buf, LEN) < 0);
	atomic_store(&mode, "headers_huge");
	assert_true(fs3_get(be, "obj", buf, LEN) < 0);
	check_good(be);
	store_s3_ops.close(be);
	fh_stop(&s);
}

int main(void)
{
	hc_log_set_level(HC_LOG_OFF);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hostile_answers),
		cmocka_unit_test(test_errors_named),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
