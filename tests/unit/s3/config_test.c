/* Configuration of the S3 backend: a wrong secret fails the open with a
 * clear message (access denied, which keys to check); a missing bucket,
 * an invalid bucket name, missing credentials and a bad endpoint are named
 * errors; no credential ever reaches a log line, an error message or
 * `hicache config`; unsigned payloads work; an endpoint that does not
 * answer opens (with a warning) and its calls fail at once; a server that
 * accepts and never answers times out once per call (one deadline covers
 * the retries) and is then marked down. */
#include "s3_test.h"

#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

enum { KV_ID = 1 };

#define LOG_MAX (256 * 1024)
static char log_text[LOG_MAX];
static size_t log_len;

static void capture(enum hc_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)arg;
	int n = snprintf(log_text + log_len, LOG_MAX - log_len, "%s\n", msg);
	if (n > 0 && (size_t)n < LOG_MAX - log_len)
		log_len += (size_t)n;
}

static void log_start(void)
{
	log_len = 0;
	log_text[0] = '\0';
	hc_log_set_handler(capture, NULL);
	hc_log_set_level(HC_LOG_DEBUG);
}

static void log_stop(void)
{
	hc_log_set_handler(NULL, NULL);
	hc_log_set_level(HC_LOG_OFF);
}

/* Neither secret is in the log or in the last error. */
static void assert_no_secret(const char *wrong)
{
	const char *right = getenv("AWS_SECRET_ACCESS_KEY");
	assert_non_null(right);
	assert_null(strstr(log_text, right));
	assert_null(strstr(hc_last_error(), right));
	if (wrong) {
		assert_null(strstr(log_text, wrong));
		assert_null(strstr(hc_last_error(), wrong));
	}
}

#define WRONG_SECRET "wrong-secret-Zq7Xv3Lp9Tn2"

static void test_wrong_secret(void **state)
{
	(void)state;
	log_start();
	struct hc_store *st;
	int rc = s3t_open_rc("", false, "\"secret_key\": \"" WRONG_SECRET "\"", &st);
	assert_int_equal(rc, -EACCES);
	assert_null(st);
	assert_last_error_contains("access denied");
	assert_last_error_contains("secret_key");
	assert_last_error_contains(getenv("AWS_DEFAULT_BUCKET"));
	assert_no_secret(WRONG_SECRET);
	/* The access key id is not secret, but it is not echoed either. */
	log_stop();
}

static void test_named_errors(void **state)
{
	(void)state;
	log_start();
	struct hc_store *st;
	assert_int_equal(s3t_open_rc("", false, "\"bucket\": \"hicache-no-such-bucket\"", &st),
			 -ENOENT);
	assert_last_error_contains("'hicache-no-such-bucket' does not exist");
	assert_int_equal(s3t_open_rc("", false, "\"bucket\": \"Bad_Bucket\"", &st), -EINVAL);
	assert_last_error_contains("'Bad_Bucket'");
	assert_int_equal(s3t_open_rc("", false, "\"access_key\": \"\"", &st), -EINVAL);
	assert_last_error_contains("AWS_ACCESS_KEY_ID");
	assert_int_equal(s3t_open_rc("", false, "\"endpoint\": \"ftp://127.0.0.1\"", &st), -EINVAL);
	assert_last_error_contains("http or https");
	assert_int_equal(s3t_open_rc("", false, "\"endpoint\": \"http://127.0.0.1/path\"", &st),
			 -EINVAL);
	assert_last_error_contains("no path");
	assert_no_secret(NULL);
	log_stop();
}

struct seen {
	bool secret_shown, access_shown, secret_set;
};

static void visit(const char *key, enum hc_config_type type, const char *env, const char *value,
		  enum hc_config_source source, const char *doc, void *arg)
{
	(void)type;
	(void)env;
	(void)source;
	(void)doc;
	struct seen *s = arg;
	if (strstr(value, getenv("AWS_SECRET_ACCESS_KEY")))
		s->secret_shown = true;
	if (strstr(value, getenv("AWS_ACCESS_KEY_ID")))
		s->access_shown = true;
	if (!strcmp(key, "secret_key") && !strcmp(value, "(set)"))
		s->secret_set = true;
}

static void test_config_hides_credentials(void **state)
{
	(void)state;
	struct hc_config *cfg;
	assert_int_equal(hc_config_create(NULL, &cfg), 0);
	struct seen s = {0};
	hc_config_foreach(cfg, visit, &s);
	assert_false(s.secret_shown);
	assert_false(s.access_shown);
	assert_true(s.secret_set);
	const char *v;
	assert_int_equal(hc_config_get_string(cfg, "secret_key", &v), 0);
	assert_string_equal(v, getenv("AWS_SECRET_ACCESS_KEY"));
	hc_config_destroy(cfg);
}

/* A whole round trip, logged at debug level, with unsigned payloads. */
static void test_unsigned_and_logs(void **state)
{
	(void)state;
	log_start();
	struct hc_store *st = s3t_open("unsigned/", false, "\"unsigned_payload\": true");
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 8);
	struct hc_pool *pool = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	struct hc_key keys[4];
	uint64_t slots[4] = {0, 1, 2, 3}, back[4] = {4, 5, 6, 7};
	st_keys(31, 4, 8, keys);
	for (uint64_t i = 0; i < 4; i++)
		st_fill(pool, i, KV_ID, i);
	assert_int_equal(hc_store_set(st, keys, 4, slots, NULL), 0);
	assert_int_equal(hc_store_get(st, keys, 4, back, NULL), 4);
	for (uint64_t i = 0; i < 4; i++)
		st_assert_page(pool, back[i], KV_ID, i);
	hc_store_close(st);
	hc_pool_destroy(pool);
	assert_non_null(strstr(log_text, "unsigned payloads"));
	assert_no_secret(NULL);
	log_stop();
}

/* Nothing listens on the endpoint: open warns, calls fail at once. */
static void test_unreachable(void **state)
{
	(void)state;
	log_start();
	struct hc_store *st = s3t_open("", false, "\"endpoint\": \"http://127.0.0.1:9\"");
	assert_non_null(strstr(log_text, "does not answer"));
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, false, 8);
	struct hc_pool *pool = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	struct hc_key keys[4];
	uint64_t slots[4] = {0, 1, 2, 3};
	int res[4];
	st_keys(32, 4, 8, keys);
	assert_int_equal(hc_store_exists(st, keys, 4), 0);
	assert_int_equal(hc_store_set(st, keys, 4, slots, res), -ECONNREFUSED);
	assert_int_equal(hc_store_get(st, keys, 4, slots, res), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(res[i], -ECONNREFUSED);
	assert_true(st_stats(st, NULL).failures >= 8);
	assert_no_secret(NULL);
	hc_store_close(st);
	hc_pool_destroy(pool);
	log_stop();
}

/* A server that accepts connections and never answers. */
struct mute {
	int fd;
	_Atomic bool stop;
	_Atomic int accepted;
	int conns[256];
};

static void *mute_main(void *arg)
{
	struct mute *m = arg;
	while (!atomic_load(&m->stop)) {
		struct pollfd p = {m->fd, POLLIN, 0};
		if (poll(&p, 1, 20) <= 0)
			continue;
		int c = accept(m->fd, NULL, NULL);
		int n = atomic_load(&m->accepted);
		if (c >= 0 && n < 256) {
			m->conns[n] = c;
			atomic_store(&m->accepted, n + 1);
		} else if (c >= 0) {
			close(c);
		}
	}
	return NULL;
}

static void test_timeouts_one_deadline(void **state)
{
	(void)state;
	static struct mute m;
	m.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(m.fd >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	assert_int_equal(bind(m.fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(m.fd, 64), 0);
	assert_int_equal(getsockname(m.fd, (struct sockaddr *)&a, &alen), 0);
	pthread_t tid;
	assert_int_equal(pthread_create(&tid, NULL, mute_main, &m), 0);

	char extra[160];
	snprintf(extra, sizeof(extra),
		 "\"endpoint\": \"http://127.0.0.1:%u\", \"timeout_ms\": 300, "
		 "\"retries\": 1",
		 ntohs(a.sin_port));
	struct hc_store *st = s3t_open("", true, extra);
	int after_open = atomic_load(&m.accepted);
	struct hc_kv_geometry g = st_kv_geo(HC_LAYOUT_PAGE_FIRST, true, 4);
	struct hc_pool *pool = st_kv_pool(&g);
	assert_int_equal(hc_store_register_pool(st, "kv", pool, true), 0);
	struct hc_key keys[1];
	uint64_t slots[1] = {0};
	int res[1];
	st_keys(33, 1, 8, keys);
	assert_int_equal(hc_store_set(st, keys, 1, slots, res), -ETIMEDOUT);
	assert_int_equal(hc_store_get(st, keys, 1, slots, res), 0);
	assert_int_equal(res[0], -ETIMEDOUT);
	/* One deadline per call covers its retries, so a timeout is not sent
	 * again: open's HEAD once, set's PUT once (a small object: no HEAD
	 * first, and none after a timeout); two timeouts in a row mark the
	 * endpoint down, so get's GET fails at once and is never sent. */
	assert_int_equal(after_open, 1);
	assert_int_equal(atomic_load(&m.accepted), 2);
	hc_store_close(st);
	hc_pool_destroy(pool);
	atomic_store(&m.stop, true);
	pthread_join(tid, NULL);
	for (int i = 0; i < atomic_load(&m.accepted); i++)
		close(m.conns[i]);
	close(m.fd);
}

int main(void)
{
	int rc = s3t_setup("config");
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wrong_secret),
		cmocka_unit_test(test_named_errors),
		cmocka_unit_test(test_config_hides_credentials),
		cmocka_unit_test(test_unsigned_and_logs),
		cmocka_unit_test(test_unreachable),
		cmocka_unit_test(test_timeouts_one_deadline),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
