/* A stalled gateway (a local fake server that accepts and reads requests
 * and never answers): a call gives up after one deadline for all its
 * retries, not (retries + 1) x timeout_ms; after repeated timeouts the
 * endpoint counts as down and later calls fail at once without sending a
 * request; once the server answers again, a probe after the back-off finds
 * it and calls work. Bounds are generous (far below what the old behaviour
 * takes, far above what a loaded machine needs); the timings print. */
#include "fake_s3.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define LEN 64
#define TIMEOUT_MS 1000
#define RETRIES 4

static atomic_bool stall;
static char body[LEN];

static void respond(void *arg, const char *method, const char *target, struct fh_reply *out)
{
	(void)arg;
	if (!strcmp(method, "HEAD") && !strcmp(target, "/fake")) {
		fh_reply_fmt(out, FH_KEEP, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
		return;
	}
	if (atomic_load(&stall)) {
		out->action = FH_STALL;
		return;
	}
	fh_reply_body(out, 200, body, LEN);
}

static void test_stalled_gateway(void **state)
{
	(void)state;
	memset(body, 'z', sizeof(body));
	struct fh_server s;
	assert_int_equal(fh_start(&s, respond, NULL), 0);
	void *be;
	char extra[128];
	snprintf(extra, sizeof(extra), "\"timeout_ms\": %d, \"retries\": %d", TIMEOUT_MS, RETRIES);
	assert_int_equal(fs3_open(&s, extra, &be), 0);
	char buf[LEN];
	assert_int_equal(fs3_get(be, "obj", buf, LEN), 0);

	atomic_store(&stall, true);
	/* Before: (RETRIES + 1) x TIMEOUT_MS and the backoffs, over 5 s.
	 * Now one deadline: about TIMEOUT_MS. */
	for (int call = 0; call < 2; call++) {
		int64_t t0 = fs3_now_ms();
		assert_int_equal(fs3_get(be, "obj", buf, LEN), -ETIMEDOUT);
		int64_t took = fs3_now_ms() - t0;
		print_message("stalled call %d: %lld ms (timeout_ms %d, retries %d)\n", call,
			      (long long)took, TIMEOUT_MS, RETRIES);
		assert_true(took < (RETRIES * TIMEOUT_MS) * 3 / 4);
	}
	/* Down now: calls fail at once, and send nothing. */
	unsigned seen = atomic_load(&s.requests);
	int64_t t0 = fs3_now_ms();
	assert_int_equal(fs3_get(be, "obj", buf, LEN), -ETIMEDOUT);
	assert_int_equal(fs3_exists(be, "obj", LEN), -ENOENT);
	assert_int_equal(fs3_put(be, "obj", body, LEN), -ETIMEDOUT);
	int64_t took = fs3_now_ms() - t0;
	print_message("three calls while down: %lld ms\n", (long long)took);
	assert_true(took < TIMEOUT_MS / 2);
	assert_int_equal(atomic_load(&s.requests), seen);

	/* A batch on a stalled endpoint ends in about one deadline too. */
	enum { N = 40 };
	static char bufs[N][LEN];
	struct iovec v[N];
	struct store_obj o[N];
	char names[N][16];
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "obj%d", i);
		v[i] = (struct iovec){bufs[i], LEN};
		o[i] = (struct store_obj){.name = names[i], .iov = &v[i], .iovcnt = 1, .len = LEN};
	}
	/* Let the back-off pass so a probe goes out (one), and fails. */
	usleep(2500 * 1000);
	t0 = fs3_now_ms();
	assert_int_equal(store_s3_ops.get(be, o, N), 0);
	took = fs3_now_ms() - t0;
	for (int i = 0; i < N; i++)
		assert_int_equal(o[i].result, -ETIMEDOUT);
	print_message("batch of %d after the back-off (one probe): %lld ms\n", N, (long long)took);
	assert_true(took < (RETRIES * TIMEOUT_MS) * 3 / 4);
	assert_true(atomic_load(&s.requests) <= seen + 1);

	/* The server answers again: within the (doubled) back-off and a
	 * probe, calls work. */
	atomic_store(&stall, false);
	int rc = -1;
	for (int tries = 0; tries < 100 && rc; tries++) {
		rc = fs3_get(be, "obj", buf, LEN);
		if (rc)
			usleep(200 * 1000);
	}
	assert_int_equal(rc, 0);
	assert_memory_equal(buf, body, LEN);
	assert_int_equal(store_s3_ops.get(be, o, N), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(o[i].result, 0);
	store_s3_ops.close(be);
	fh_stop(&s);
}

int main(void)
{
	hc_log_set_level(HC_LOG_OFF);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stalled_gateway),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
