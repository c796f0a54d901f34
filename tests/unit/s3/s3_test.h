/*
 * Helpers of the S3 tests. They run against the real S3 gateway that
 * scripts/s3-server.sh starts (the ctest fixture s3.server_start): its
 * state dir is $HC_S3_DIR, whose env file names the endpoint, bucket and
 * keys. A test skips (77) only when the script said it cannot run here
 * ($HC_S3_DIR/skip); a missing server otherwise is a failure.
 *
 * Every test writes under its own key prefix ("t/<test>-<pid>-<ns>/"), so
 * runs never see each other's objects.
 */
#ifndef HC_S3_TEST_H
#define HC_S3_TEST_H

#include "../store/store_test.h"

#include <curl/curl.h>
#include <sys/wait.h>
#include <time.h>

static char s3t_prefix[128];

/* Load $HC_S3_DIR/env into the environment. Returns 0, or TEST_SKIP_CODE
 * (said why) when the server cannot run here. Fails the test otherwise. */
static inline int s3t_setup(const char *test)
{
	const char *dir = getenv("HC_S3_DIR");
	if (!dir || !*dir) {
		fprintf(stderr, "s3 tests: HC_S3_DIR is not set (run them through ctest, which "
				"starts the server): skipped\n");
		return TEST_SKIP_CODE;
	}
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/skip", dir);
	FILE *f = fopen(path, "r");
	if (f) {
		char why[512] = "";
		if (!fgets(why, sizeof(why), f))
			why[0] = '\0';
		fclose(f);
		fprintf(stderr, "s3 tests: SKIPPED: scripts/s3-server.sh cannot run here: %s\n",
			why);
		return TEST_SKIP_CODE;
	}
	snprintf(path, sizeof(path), "%s/env", dir);
	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr,
			"s3 tests: no server in %s (did s3.server_start fail? its output "
			"says why)\n",
			dir);
		exit(1);
	}
	char line[1024];
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		const char *kv = strncmp(line, "export ", 7) ? line : line + 7;
		const char *eq = strchr(kv, '=');
		if (!eq)
			continue;
		char key[128];
		snprintf(key, sizeof(key), "%.*s", (int)(eq - kv), kv);
		setenv(key, eq + 1, 1);
	}
	fclose(f);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(s3t_prefix, sizeof(s3t_prefix), "t/%s-%d-%lld%09ld/", test, (int)getpid(),
		 (long long)ts.tv_sec, ts.tv_nsec);
	return 0;
}

/* An S3 store (model ST_MODEL, rank 0 of 1) under the test's prefix plus
 * sub; extra: more JSON members or NULL. Returns hc_store_open()'s code. */
static inline int s3t_open_rc(const char *sub, bool bounce, const char *extra,
			      struct hc_store **out)
{
	char json[1024];
	snprintf(json, sizeof(json), "{\"prefix\": \"%s%s\"%s%s}", s3t_prefix, sub ? sub : "",
		 extra ? ", " : "", extra ? extra : "");
	return st_open_json("s3", json, ST_MODEL, 0, 1, bounce, out);
}

static inline struct hc_store *s3t_open(const char *sub, bool bounce, const char *extra)
{
	struct hc_store *st;
	int rc = s3t_open_rc(sub, bounce, extra, &st);
	if (rc)
		fail_msg("open s3 store: %s (%s)", hc_strerror(rc), hc_last_error());
	return st;
}

/* ---- raw requests, out of band (a second client of the bucket) ---- */

struct s3t_body {
	const uint8_t *data;
	size_t len, off;
};

static size_t s3t_read(char *buf, size_t size, size_t n, void *arg)
{
	struct s3t_body *b = arg;
	size_t k = size * n;
	if (k > b->len - b->off)
		k = b->len - b->off;
	memcpy(buf, b->data + b->off, k);
	b->off += k;
	return k;
}

static size_t s3t_discard(char *buf, size_t size, size_t n, void *arg)
{
	(void)buf;
	(void)arg;
	return size * n;
}

/* One signed request on key (below the bucket, no encoding needed):
 * "PUT" with data (the payload hash UNSIGNED-PAYLOAD), "DELETE", "HEAD".
 * Returns the HTTP status (0: no answer). */
static inline long s3t_raw(const char *method, const char *key, const void *data, size_t len)
{
	char url[1024], sig[128], userpwd[512];
	if (snprintf(url, sizeof(url), "%s/%s/%s", getenv("HICACHE_S3_ENDPOINT"),
		     getenv("AWS_DEFAULT_BUCKET"), key) >= (int)sizeof(url))
		fail_msg("s3t_raw: URL for %s too long", key);
	snprintf(sig, sizeof(sig), "aws:amz:%s:s3", getenv("HICACHE_S3_REGION"));
	snprintf(userpwd, sizeof(userpwd), "%s:%s", getenv("AWS_ACCESS_KEY_ID"),
		 getenv("AWS_SECRET_ACCESS_KEY"));
	CURL *c = curl_easy_init();
	assert_non_null(c);
	struct curl_slist *h = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	struct s3t_body body = {data, len, 0};
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sig);
	curl_easy_setopt(c, CURLOPT_USERPWD, userpwd);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, s3t_discard);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 30000L);
	if (!strcmp(method, "PUT")) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, s3t_read);
		curl_easy_setopt(c, CURLOPT_READDATA, &body);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)len);
	} else if (!strcmp(method, "HEAD")) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	}
	long code = 0;
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return code;
}

/* The bucket key of a page object under the test's prefix (+ sub). */
static inline void s3t_key(const char *sub, const struct hc_key *key, const char *suffix,
			   const char *component, char *out, size_t size)
{
	char name[HC_NAME_MAX];
	assert_true(hc_key_name(key, suffix, component, name, sizeof(name)) > 0);
	snprintf(out, size, "%s%s%s", s3t_prefix, sub ? sub : "", name);
}

/* Run scripts/s3-server.sh with a command on the test's server; its
 * output goes to stderr. Returns the exit status. */
static inline int s3t_server(const char *cmd)
{
	const char *script = getenv("HC_S3_SCRIPT"), *dir = getenv("HC_S3_DIR");
	assert_non_null(script);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(2, 1);
		execlp("bash", "bash", script, cmd, dir, (char *)NULL);
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

#endif
