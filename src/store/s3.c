/*
 * The S3 backend: page objects in an S3 bucket (Ceph RGW, MinIO, AWS S3),
 * so many engine instances on many machines share one L3.
 *
 *   object key   = prefix + physical name    (the same names as files)
 *   URL          = scheme://host/bucket/key  (path style, the default)
 *                  scheme://bucket.host/key  (use_virtual_addressing)
 *
 * One backend call moves a batch of objects as many HTTP requests in flight
 * at once: the call takes a session (a curl multi handle with max_inflight
 * easy handles and its cache of keep-alive connections) from a free list,
 * keeps up to max_inflight requests running, and gives the session back,
 * connections still open, for the next call. Concurrent calls use different
 * sessions, so nothing is locked while requests run.
 *
 *   put     PUT with If-None-Match: * (objects are immutable; 412 = exists)
 *   get     GET; the body is written straight into the object's iovecs
 *   exists  HEAD; a hit needs the expected Content-Length
 *   remove  DELETE (the store core's healing of corrupt objects; gc)
 *
 * Bodies stream from and into the store's iovecs (pool segments in
 * zero-copy mode) through read/write callbacks: nothing is gathered first.
 * Requests are signed by libcurl (CURLOPT_AWS_SIGV4); S3 also wants the
 * payload's SHA-256 in x-amz-content-sha256, hashed here over the same
 * iovecs (or UNSIGNED-PAYLOAD when configured).
 *
 * Failures: timeouts, dropped connections, 5xx and 429 are retried with
 * exponential backoff and jitter, up to `retries` times. A refused,
 * unresolvable or silent (connect timeout) endpoint is not retried: it
 * marks the endpoint down for
 * S3_DOWN_MS, during which every request fails at once (a miss for the
 * caller, never a hang); the first request after that window probes again,
 * so the backend recovers by itself when the server returns. 403 and a
 * missing bucket are configuration errors: open checks the bucket and fails
 * with a message; at run time they are logged once.
 *
 * Credentials go to libcurl only; no log line or error message holds them
 * (URLs never carry them either).
 *
 * Caveats:
 *   - no background cleaner: S3 buckets expire objects with lifecycle
 *     rules; `hicache gc s3://bucket/prefix` deletes the oldest pages;
 *   - each concurrent call holds its own connections: threads x
 *     max_inflight connections at most.
 */
#define _GNU_SOURCE
#include "store/backend.h"
#include "store/format.h"
#include "store/s3.h"
#include "util/util.h"

#include <hicache/config.h>
#include <hicache/key.h>
#include <hicache/store.h>

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define S3_BACKOFF_BASE_MS 50
#define S3_BACKOFF_CAP_MS 2000
#define S3_DOWN_MS 1000             /* fail at once for this long after a refused connect */
#define S3_CONNECT_TIMEOUT_MS 3000  /* at most; timeout_ms when smaller */
#define S3_BUFFER_BYTES (256 * 1024) /* curl's send and receive buffers per handle */
#define S3_ERR_BODY 512
#define S3_LIST_BODY_MAX (64u << 20)
#define S3_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct s3_conf {
	char *scheme;   /* "http" or "https" */
	char *host;     /* "name[:port]" */
	char *bucket;
	char *region;
	char *prefix;
	char *userpwd;  /* "access:secret", for libcurl only */
	char *token_header;
	char *sigv4;    /* "aws:amz:<region>:s3" */
	char *ca_bundle;
	char *base;     /* URL up to the key: ".../bucket/" or "...host/" */
	char *bucket_url;
	bool virtual_hosted;
	bool unsigned_payload;
	unsigned max_inflight;
	unsigned retries;
	long timeout_ms;
};

/* One caller's multi handle, its easy handles and their connections. */
struct s3_session {
	struct s3_session *next;
	CURLM *multi;
	CURL **free_easy; /* a stack */
	unsigned nfree, neasy;
	CURL **all;
};

struct s3_be {
	struct s3_conf c;
	EVP_MD *sha256;
	pthread_mutex_t lock;
	struct s3_session *idle;
	_Atomic int64_t down_until_ms;
	_Atomic bool said_down, said_denied, said_no_bucket, said_tls;
};

enum s3_method { S3_PUT, S3_GET, S3_HEAD, S3_DELETE, S3_LIST };

static const char *const method_names[] = {"PUT", "GET", "HEAD", "DELETE", "GET"};

/* A growing buffer for list responses. */
struct s3_buf {
	char *data;
	size_t len, cap;
	bool overflow;
};

struct s3_req {
	enum s3_method method;
	char *url;
	struct store_obj *obj; /* NULL for bucket requests */
	struct s3_buf *body;   /* S3_LIST: the response */
	int result;
	long status;
	CURLcode curl_rc;
	unsigned attempt;
	int64_t not_before_ms;
	/* where the body stands in obj->iov */
	unsigned iov_i;
	size_t iov_off, moved;
	bool too_long;
	bool hashed;
	char sha[65];
	CURL *easy;
	struct curl_slist *headers;
	char err[S3_ERR_BODY];
	size_t err_len;
	char curl_err[CURL_ERROR_SIZE];
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Jitter only needs to differ between threads and calls. */
static uint64_t jitter_next(void)
{
	static _Thread_local uint64_t state;
	if (!state) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		state = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)(uintptr_t)&state ^ 0x9e3779b97f4a7c15ull;
	}
	state ^= state << 13;
	state ^= state >> 7;
	state ^= state << 17;
	return state;
}

/* Exponential backoff with "equal jitter": half fixed, half random. */
static int64_t backoff_ms(unsigned attempt)
{
	int64_t d = S3_BACKOFF_BASE_MS;
	for (unsigned i = 1; i < attempt && d < S3_BACKOFF_CAP_MS; i++)
		d *= 2;
	if (d > S3_BACKOFF_CAP_MS)
		d = S3_BACKOFF_CAP_MS;
	return d / 2 + (int64_t)(jitter_next() % (uint64_t)(d / 2 + 1));
}

/* ---- configuration ---- */

static void conf_free(struct s3_conf *c)
{
	free(c->scheme);
	free(c->host);
	free(c->bucket);
	free(c->region);
	free(c->prefix);
	if (c->userpwd)
		explicit_bzero(c->userpwd, strlen(c->userpwd));
	free(c->userpwd);
	if (c->token_header)
		explicit_bzero(c->token_header, strlen(c->token_header));
	free(c->token_header);
	free(c->sigv4);
	free(c->ca_bundle);
	free(c->base);
	free(c->bucket_url);
	memset(c, 0, sizeof(*c));
}

static bool unreserved(unsigned char ch)
{
	return isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~';
}

/* Percent-encode with uppercase hex, as SigV4 canonicalises (libcurl signs
 * the URL as written). keep_slash: a path, where '/' separates segments. */
static char *encode(const char *s, bool keep_slash)
{
	size_t n = strlen(s);
	char *out = malloc(3 * n + 1);
	if (!out)
		return NULL;
	char *p = out;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (unreserved(ch) || (keep_slash && ch == '/')) {
			*p++ = (char)ch;
		} else {
			static const char hex[] = "0123456789ABCDEF";
			*p++ = '%';
			*p++ = hex[ch >> 4];
			*p++ = hex[ch & 15];
		}
	}
	*p = '\0';
	return out;
}

/* S3 bucket names: 3..63 of [a-z0-9.-], starting and ending alphanumeric. */
static bool bucket_name_ok(const char *b)
{
	size_t n = strlen(b);
	if (n < 3 || n > 63 || !isalnum((unsigned char)b[0]) || !isalnum((unsigned char)b[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)b[i]) || isdigit((unsigned char)b[i]) || b[i] == '.' ||
		      b[i] == '-'))
			return false;
	return true;
}

static bool host_ok(const char *h)
{
	if (!*h)
		return false;
	for (; *h; h++)
		if (!(isalnum((unsigned char)*h) || strchr(".-:[]_", *h)))
			return false;
	return true;
}

static int dup_or_fail(char **dst, const char *src)
{
	*dst = strdup(src ? src : "");
	return *dst ? 0 : -ENOMEM;
}

static int conf_load(const struct hc_config *cfg, struct s3_conf *c)
{
	const char *endpoint, *bucket, *region, *prefix, *access, *secret, *token, *scheme, *ca;
	bool virt, unsigned_payload;
	int64_t inflight, timeout, retries;
	int rc;
	memset(c, 0, sizeof(*c));
	if ((rc = hc_config_get_string(cfg, "endpoint", &endpoint)) ||
	    (rc = hc_config_get_string(cfg, "bucket", &bucket)) ||
	    (rc = hc_config_get_string(cfg, "region", &region)) ||
	    (rc = hc_config_get_string(cfg, "prefix", &prefix)) ||
	    (rc = hc_config_get_string(cfg, "access_key", &access)) ||
	    (rc = hc_config_get_string(cfg, "secret_key", &secret)) ||
	    (rc = hc_config_get_string(cfg, "session_token", &token)) ||
	    (rc = hc_config_get_string(cfg, "scheme", &scheme)) ||
	    (rc = hc_config_get_string(cfg, "ca_bundle", &ca)) ||
	    (rc = hc_config_get_bool(cfg, "use_virtual_addressing", &virt)) ||
	    (rc = hc_config_get_bool(cfg, "unsigned_payload", &unsigned_payload)) ||
	    (rc = hc_config_get_int(cfg, "max_inflight", &inflight)) ||
	    (rc = hc_config_get_int(cfg, "timeout_ms", &timeout)) ||
	    (rc = hc_config_get_int(cfg, "retries", &retries)))
		return rc;
	if (!bucket || !*bucket)
		return util_fail(-EINVAL, "s3 store: no bucket; set config 'bucket' or "
				 "AWS_DEFAULT_BUCKET");
	if (!bucket_name_ok(bucket))
		return util_fail(-EINVAL, "s3 store: bucket '%s' is not a valid S3 bucket name "
				 "(3..63 of a-z, 0-9, '.', '-')", bucket);
	if (!access || !*access || !secret || !*secret)
		return util_fail(-EINVAL, "s3 store: no credentials; set config 'access_key' and "
				 "'secret_key' or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
	if (strchr(access, ':'))
		return util_fail(-EINVAL, "s3 store: access_key must not contain ':'");
	if (!region || !*region || strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") !=
						   strlen(region))
		return util_fail(-EINVAL, "s3 store: region '%s' is not [a-z0-9-]+",
				 region ? region : "");
	for (const char *p = prefix; p && *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return util_fail(-EINVAL, "s3 store: prefix has a control character");

	/* endpoint: [scheme://]host[:port][/]; its scheme wins over 'scheme'. */
	const char *host = endpoint && *endpoint ? endpoint : NULL;
	char aws_host[128];
	if (!host) {
		snprintf(aws_host, sizeof(aws_host), "s3.%s.amazonaws.com", region);
		host = aws_host;
	}
	const char *sep = strstr(host, "://");
	const char *use_scheme = scheme;
	char scheme_buf[8];
	if (sep) {
		size_t sl = (size_t)(sep - host);
		if (sl >= sizeof(scheme_buf) || (strncasecmp(host, "http", sl) &&
						 strncasecmp(host, "https", sl)) ||
		    (sl != 4 && sl != 5))
			return util_fail(-EINVAL, "s3 store: endpoint '%s': the scheme must be http "
					 "or https", endpoint);
		for (size_t i = 0; i < sl; i++)
			scheme_buf[i] = (char)tolower((unsigned char)host[i]);
		scheme_buf[sl] = '\0';
		use_scheme = scheme_buf;
		host = sep + 3;
	}
	size_t hl = strlen(host);
	while (hl && host[hl - 1] == '/')
		hl--;
	char *h = strndup(host, hl);
	if (!h)
		return -ENOMEM;
	if (!host_ok(h)) {
		rc = util_fail(-EINVAL, "s3 store: endpoint '%s' is not [http[s]://]host[:port] "
			       "(no path, no user)", endpoint && *endpoint ? endpoint : host);
		free(h);
		return rc;
	}
	c->host = h;
	c->virtual_hosted = virt;
	c->unsigned_payload = unsigned_payload;
	c->max_inflight = (unsigned)inflight;
	c->retries = (unsigned)retries;
	c->timeout_ms = (long)timeout;
	if ((rc = dup_or_fail(&c->scheme, use_scheme)) || (rc = dup_or_fail(&c->bucket, bucket)) ||
	    (rc = dup_or_fail(&c->region, region)) || (rc = dup_or_fail(&c->prefix, prefix)) ||
	    (rc = dup_or_fail(&c->ca_bundle, ca)))
		goto fail;
	for (char *p = c->scheme; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	rc = -ENOMEM;
	if (asprintf(&c->userpwd, "%s:%s", access, secret) < 0) {
		c->userpwd = NULL;
		goto fail;
	}
	if (token && *token && asprintf(&c->token_header, "x-amz-security-token: %s", token) < 0) {
		c->token_header = NULL;
		goto fail;
	}
	if (asprintf(&c->sigv4, "aws:amz:%s:s3", region) < 0) {
		c->sigv4 = NULL;
		goto fail;
	}
	int n = virt ? asprintf(&c->bucket_url, "%s://%s.%s/", c->scheme, bucket, c->host)
		     : asprintf(&c->bucket_url, "%s://%s/%s", c->scheme, c->host, bucket);
	if (n < 0) {
		c->bucket_url = NULL;
		goto fail;
	}
	n = virt ? asprintf(&c->base, "%s", c->bucket_url) : asprintf(&c->base, "%s/", c->bucket_url);
	if (n < 0) {
		c->base = NULL;
		goto fail;
	}
	return 0;
fail:
	conf_free(c);
	return rc;
}

/* ---- sessions ---- */

static void session_free(struct s3_session *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < s->neasy; i++) {
		if (s->multi)
			curl_multi_remove_handle(s->multi, s->all[i]);
		curl_easy_cleanup(s->all[i]);
	}
	if (s->multi)
		curl_multi_cleanup(s->multi);
	free(s->all);
	free(s->free_easy);
	free(s);
}

static struct s3_session *session_new(const struct s3_be *be)
{
	struct s3_session *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	unsigned n = be->c.max_inflight;
	s->all = calloc(n, sizeof(*s->all));
	s->free_easy = calloc(n, sizeof(*s->free_easy));
	s->multi = curl_multi_init();
	if (!s->all || !s->free_easy || !s->multi)
		goto fail;
	curl_multi_setopt(s->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)n);
	curl_multi_setopt(s->multi, CURLMOPT_MAXCONNECTS, (long)n);
	for (; s->neasy < n; s->neasy++) {
		s->all[s->neasy] = curl_easy_init();
		if (!s->all[s->neasy])
			goto fail;
		s->free_easy[s->nfree++] = s->all[s->neasy];
	}
	return s;
fail:
	session_free(s);
	return NULL;
}

static struct s3_session *session_get(struct s3_be *be)
{
	pthread_mutex_lock(&be->lock);
	struct s3_session *s = be->idle;
	if (s)
		be->idle = s->next;
	pthread_mutex_unlock(&be->lock);
	return s ? s : session_new(be);
}

static void session_put(struct s3_be *be, struct s3_session *s)
{
	pthread_mutex_lock(&be->lock);
	s->next = be->idle;
	be->idle = s;
	pthread_mutex_unlock(&be->lock);
}

/* ---- one request ---- */

static void body_seek(struct s3_req *r, size_t off)
{
	r->iov_i = 0;
	r->iov_off = 0;
	r->moved = 0;
	const struct store_obj *o = r->obj;
	while (r->iov_i < o->iovcnt && off >= o->iov[r->iov_i].iov_len) {
		off -= o->iov[r->iov_i].iov_len;
		r->moved += o->iov[r->iov_i].iov_len;
		r->iov_i++;
	}
	r->iov_off = off;
	r->moved += off;
}

/* PUT body: the object's iovecs, as they lie (pool segments, pad, trailer). */
static size_t read_cb(char *buf, size_t size, size_t nitems, void *arg)
{
	struct s3_req *r = arg;
	const struct store_obj *o = r->obj;
	size_t want = size * nitems, done = 0;
	while (done < want && r->iov_i < o->iovcnt) {
		const struct iovec *v = &o->iov[r->iov_i];
		size_t n = v->iov_len - r->iov_off;
		if (n > want - done)
			n = want - done;
		memcpy(buf + done, (const char *)v->iov_base + r->iov_off, n);
		done += n;
		r->iov_off += n;
		r->moved += n;
		if (r->iov_off == v->iov_len) {
			r->iov_i++;
			r->iov_off = 0;
		}
	}
	return done;
}

/* libcurl rewinds an upload it must send again (a retried connection). */
static int seek_cb(void *arg, curl_off_t offset, int origin)
{
	struct s3_req *r = arg;
	if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > r->obj->len)
		return CURL_SEEKFUNC_CANTSEEK;
	body_seek(r, (size_t)offset);
	return CURL_SEEKFUNC_OK;
}

static void keep_error_body(struct s3_req *r, const char *buf, size_t n)
{
	size_t room = sizeof(r->err) - 1 - r->err_len;
	if (n > room)
		n = room;
	memcpy(r->err + r->err_len, buf, n);
	r->err_len += n;
	r->err[r->err_len] = '\0';
}

static bool buf_append(struct s3_buf *b, const char *data, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 65536;
		while (cap < b->len + n + 1)
			cap *= 2;
		if (cap > S3_LIST_BODY_MAX) {
			b->overflow = true;
			return false;
		}
		char *d = realloc(b->data, cap);
		if (!d) {
			b->overflow = true;
			return false;
		}
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, n);
	b->len += n;
	b->data[b->len] = '\0';
	return true;
}

/* GET body: straight into the object's iovecs; error bodies aside. */
static size_t write_cb(char *buf, size_t size, size_t nmemb, void *arg)
{
	struct s3_req *r = arg;
	size_t n = size * nmemb;
	long code = 0;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
	if (code / 100 != 2 || !r->obj) {
		if (code / 100 == 2 && r->body)
			return buf_append(r->body, buf, n) ? n : 0;
		keep_error_body(r, buf, n);
		return n;
	}
	const struct store_obj *o = r->obj;
	if (r->moved + n > o->len) {
		r->too_long = true;
		return 0; /* aborts the transfer */
	}
	size_t done = 0;
	while (done < n) {
		const struct iovec *v = &o->iov[r->iov_i];
		size_t k = v->iov_len - r->iov_off;
		if (k > n - done)
			k = n - done;
		memcpy((char *)v->iov_base + r->iov_off, buf + done, k);
		done += k;
		r->iov_off += k;
		if (r->iov_off == v->iov_len) {
			r->iov_i++;
			r->iov_off = 0;
		}
	}
	r->moved += n;
	return n;
}

static int payload_sha256(struct s3_be *be, struct s3_req *r)
{
	unsigned char md[32];
	unsigned mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	bool ok = ctx && EVP_DigestInit_ex(ctx, be->sha256, NULL);
	for (unsigned i = 0; ok && i < r->obj->iovcnt; i++)
		ok = EVP_DigestUpdate(ctx, r->obj->iov[i].iov_base, r->obj->iov[i].iov_len);
	ok = ok && EVP_DigestFinal_ex(ctx, md, &mdlen) && mdlen == 32;
	EVP_MD_CTX_free(ctx);
	if (!ok)
		return -ENOMEM;
	static const char hex[] = "0123456789abcdef";
	for (unsigned i = 0; i < 32; i++) {
		r->sha[2 * i] = hex[md[i] >> 4];
		r->sha[2 * i + 1] = hex[md[i] & 15];
	}
	r->sha[64] = '\0';
	r->hashed = true;
	return 0;
}

static struct curl_slist *add_header(struct curl_slist *l, const char *h, bool *ok)
{
	struct curl_slist *n = curl_slist_append(l, h);
	if (!n) {
		*ok = false;
		return l;
	}
	return n;
}

/* Set up r on easy. Returns 0 or -ENOMEM. */
static int req_prepare(struct s3_be *be, struct s3_req *r, CURL *easy)
{
	const struct s3_conf *c = &be->c;
	char hdr[96];
	bool ok = true;
	r->easy = easy;
	r->err_len = 0;
	r->err[0] = '\0';
	r->curl_err[0] = '\0';
	r->too_long = false;
	r->status = 0;
	if (r->obj)
		body_seek(r, 0);
	if (r->body)
		r->body->len = 0;
	curl_easy_reset(easy);
	curl_easy_setopt(easy, CURLOPT_URL, r->url);
	curl_easy_setopt(easy, CURLOPT_PRIVATE, r);
	curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, c->sigv4);
	curl_easy_setopt(easy, CURLOPT_USERPWD, c->userpwd);
	curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, c->timeout_ms);
	curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
			 c->timeout_ms < S3_CONNECT_TIMEOUT_MS ? c->timeout_ms
							       : (long)S3_CONNECT_TIMEOUT_MS);
	curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, (long)S3_BUFFER_BYTES);
	curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, r->curl_err);
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(easy, CURLOPT_WRITEDATA, r);
	if (c->ca_bundle[0])
		curl_easy_setopt(easy, CURLOPT_CAINFO, c->ca_bundle);

	const char *sha = S3_EMPTY_SHA256;
	switch (r->method) {
	case S3_PUT:
		if (c->unsigned_payload) {
			sha = "UNSIGNED-PAYLOAD";
		} else {
			if (!r->hashed && payload_sha256(be, r))
				return -ENOMEM;
			sha = r->sha;
		}
		curl_easy_setopt(easy, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(easy, CURLOPT_UPLOAD_BUFFERSIZE, (long)S3_BUFFER_BYTES);
		curl_easy_setopt(easy, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->obj->len);
		curl_easy_setopt(easy, CURLOPT_READFUNCTION, read_cb);
		curl_easy_setopt(easy, CURLOPT_READDATA, r);
		curl_easy_setopt(easy, CURLOPT_SEEKFUNCTION, seek_cb);
		curl_easy_setopt(easy, CURLOPT_SEEKDATA, r);
		r->headers = add_header(r->headers, "If-None-Match: *", &ok);
		break;
	case S3_GET:
	case S3_LIST:
		break;
	case S3_HEAD:
		curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
		break;
	case S3_DELETE:
		curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, "DELETE");
		break;
	}
	snprintf(hdr, sizeof(hdr), "x-amz-content-sha256: %s", sha);
	r->headers = add_header(r->headers, hdr, &ok);
	if (c->token_header)
		r->headers = add_header(r->headers, c->token_header, &ok);
	curl_easy_setopt(easy, CURLOPT_HTTPHEADER, r->headers);
	return ok ? 0 : -ENOMEM;
}

static void req_release(struct s3_req *r)
{
	curl_slist_free_all(r->headers);
	r->headers = NULL;
	r->easy = NULL;
}

/* The <Code> of an S3 error body, or "". */
static void error_code(const struct s3_req *r, char *out, size_t size)
{
	out[0] = '\0';
	const char *a = strstr(r->err, "<Code>");
	if (!a)
		return;
	a += 6;
	const char *b = strstr(a, "</Code>");
	if (!b)
		return;
	size_t n = (size_t)(b - a);
	if (n >= size)
		n = size - 1;
	memcpy(out, a, n);
	out[n] = '\0';
}

static bool is_down(struct s3_be *be, int64_t now)
{
	return now < atomic_load_explicit(&be->down_until_ms, memory_order_relaxed);
}

static void mark_down(struct s3_be *be, const struct s3_req *r, int64_t now)
{
	atomic_store(&be->down_until_ms, now + S3_DOWN_MS);
	if (!atomic_exchange(&be->said_down, true))
		log_warn("s3 store: endpoint %s://%s is unreachable (%s); requests fail at once "
			 "until it answers again", be->c.scheme, be->c.host,
			 r->curl_err[0] ? r->curl_err : curl_easy_strerror(r->curl_rc));
}

static void mark_up(struct s3_be *be)
{
	if (atomic_load_explicit(&be->said_down, memory_order_relaxed) &&
	    atomic_exchange(&be->said_down, false))
		log_info("s3 store: endpoint %s://%s answers again", be->c.scheme, be->c.host);
}

/* A configuration error is worth one line, not one per page. */
static void config_error_once(_Atomic bool *flag, const char *fmt, ...) UTIL_PRINTF(2, 3);

static void config_error_once(_Atomic bool *flag, const char *fmt, ...)
{
	if (atomic_exchange(flag, true))
		return;
	va_list ap;
	va_start(ap, fmt);
	util_vlog(HC_LOG_ERROR, fmt, ap);
	va_end(ap);
}

/* Outcome of a finished transfer: the result, and whether to try again. */
static int classify(struct s3_be *be, struct s3_req *r, bool *retry, bool *down)
{
	*retry = false;
	*down = false;
	switch (r->curl_rc) {
	case CURLE_OK:
		break;
	case CURLE_WRITE_ERROR:
		return r->too_long ? -EFBIG : -EIO;
	case CURLE_COULDNT_CONNECT:
		*down = true;
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
		*down = true;
		return -EHOSTUNREACH;
	case CURLE_OPERATION_TIMEDOUT: {
		/* Never connected: a silent endpoint is as down as a refusing one. */
		curl_off_t connected = 0;
		curl_easy_getinfo(r->easy, CURLINFO_CONNECT_TIME_T, &connected);
		*down = connected == 0;
		*retry = !*down;
		return -ETIMEDOUT;
	}
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
		*retry = true;
		return -ECONNRESET;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CACERT_BADFILE:
		config_error_once(&be->said_tls, "s3 store: TLS with %s failed: %s (check "
				  "'ca_bundle' and 'scheme')", be->c.host,
				  r->curl_err[0] ? r->curl_err : curl_easy_strerror(r->curl_rc));
		return -EPROTO;
	default:
		return -EIO;
	}
	long code = r->status;
	char s3code[64];
	if (code / 100 == 2) {
		switch (r->method) {
		case S3_GET:
			return r->moved == r->obj->len ? 0 : -ENODATA;
		case S3_HEAD: {
			curl_off_t len = -1;
			curl_easy_getinfo(r->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
			return r->obj && len != (curl_off_t)r->obj->len ? -ENOENT : 0;
		}
		default:
			return 0;
		}
	}
	error_code(r, s3code, sizeof(s3code));
	if (code == 404 && !strcmp(s3code, "NoSuchBucket")) {
		config_error_once(&be->said_no_bucket, "s3 store: bucket '%s' does not exist "
				  "at %s://%s (configuration error: 'bucket' / AWS_DEFAULT_BUCKET)",
				  be->c.bucket, be->c.scheme, be->c.host);
		return -ENOENT;
	}
	if (code == 404)
		return -ENOENT;
	if (code == 412 && r->method == S3_PUT)
		return -EEXIST;
	if (code == 403) {
		config_error_once(&be->said_denied, "s3 store: access denied (HTTP 403%s%s) to "
				  "bucket '%s' at %s://%s (configuration error: check access_key "
				  "and secret_key, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
				  "and the bucket's policy)", s3code[0] ? " " : "", s3code,
				  be->c.bucket, be->c.scheme, be->c.host);
		return -EACCES;
	}
	if (code >= 500 || code == 429) {
		*retry = true;
		return code == 503 ? -EAGAIN : -EIO;
	}
	return -EIO;
}

static void finish(struct s3_req *r, int rc)
{
	r->result = rc;
	if (r->obj)
		r->obj->result = rc;
}

/* Run every request of reqs, at most max_inflight at once, retrying what
 * may succeed later. Each request's result is set; returns 0 or -ENOMEM
 * (no session: every result is -ENOMEM). */
static int run_requests(struct s3_be *be, struct s3_req *reqs, size_t n)
{
	if (!n)
		return 0;
	struct s3_session *s = session_get(be);
	struct s3_req **waiting = malloc(n * sizeof(*waiting));
	if (!s || !waiting) {
		if (s)
			session_put(be, s);
		free(waiting);
		for (size_t i = 0; i < n; i++)
			finish(&reqs[i], -ENOMEM);
		return -ENOMEM;
	}
	size_t next = 0, done = 0, nwait = 0, active = 0;
	size_t failed = 0;
	struct s3_req *first_failed = NULL;
	while (done < n) {
		int64_t now = now_ms();
		/* Start what may start: retries whose time has come, then new ones. */
		while (active < s->neasy) {
			struct s3_req *r = NULL;
			for (size_t i = 0; i < nwait; i++) {
				if (waiting[i]->not_before_ms <= now) {
					r = waiting[i];
					waiting[i] = waiting[--nwait];
					break;
				}
			}
			if (!r && next < n)
				r = &reqs[next++];
			if (!r)
				break;
			if (is_down(be, now)) {
				finish(r, -ECONNREFUSED);
				done++;
				continue;
			}
			CURL *easy = s->free_easy[--s->nfree];
			int rc = req_prepare(be, r, easy);
			if (!rc && curl_multi_add_handle(s->multi, easy) != CURLM_OK)
				rc = -ENOMEM;
			if (rc) {
				req_release(r);
				s->free_easy[s->nfree++] = easy;
				finish(r, rc);
				done++;
				continue;
			}
			active++;
		}
		if (done == n)
			break;
		int running = 0;
		curl_multi_perform(s->multi, &running);
		CURLMsg *m;
		int left;
		while ((m = curl_multi_info_read(s->multi, &left))) {
			if (m->msg != CURLMSG_DONE)
				continue;
			CURL *easy = m->easy_handle;
			struct s3_req *r = NULL;
			curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&r);
			r->curl_rc = m->data.result;
			curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &r->status);
			bool retry, down;
			int rc = classify(be, r, &retry, &down);
			curl_multi_remove_handle(s->multi, easy);
			req_release(r);
			s->free_easy[s->nfree++] = easy;
			active--;
			now = now_ms();
			if (down)
				mark_down(be, r, now);
			else if (r->curl_rc == CURLE_OK)
				mark_up(be);
			if (retry && r->attempt < be->c.retries) {
				r->attempt++;
				r->not_before_ms = now + backoff_ms(r->attempt);
				waiting[nwait++] = r;
				continue;
			}
			finish(r, rc);
			done++;
			/* Misses and wrong sizes are the store core's to judge. */
			bool expected = rc == 0 || rc == -ENOENT || rc == -EEXIST ||
					rc == -ENODATA || rc == -EFBIG;
			if (!expected && r->obj) {
				failed++;
				if (!first_failed)
					first_failed = r;
			}
		}
		if (done == n)
			break;
		/* Start the next request at once when a handle is free; else
		 * sleep until a socket is ready or the next retry is due. */
		int64_t soonest = INT64_MAX;
		for (size_t i = 0; i < nwait; i++)
			if (waiting[i]->not_before_ms < soonest)
				soonest = waiting[i]->not_before_ms;
		now = now_ms();
		if (s->nfree && (next < n || soonest <= now))
			continue;
		int64_t d = soonest == INT64_MAX ? 1000 : soonest - now;
		int timeout = d < 0 ? 0 : d > 1000 ? 1000 : (int)d;
		curl_multi_poll(s->multi, NULL, 0, timeout, NULL);
	}
	session_put(be, s);
	free(waiting);
	if (failed && first_failed->result != -ECONNREFUSED && first_failed->result != -EACCES) {
		char s3code[64];
		error_code(first_failed, s3code, sizeof(s3code));
		log_warn("s3 store: %zu of %zu %s requests failed; first: %s: %s (HTTP %ld %s%s)",
			 failed, n, method_names[first_failed->method], first_failed->obj->name,
			 hc_strerror(first_failed->result), first_failed->status, s3code,
			 first_failed->curl_err);
	}
	return 0;
}

/* ---- the ops ---- */

static char *object_url(const struct s3_be *be, const char *name)
{
	size_t pl = strlen(be->c.prefix), nl = strlen(name);
	char *key = malloc(pl + nl + 1);
	if (!key)
		return NULL;
	memcpy(key, be->c.prefix, pl);
	memcpy(key + pl, name, nl + 1);
	char *enc = encode(key, true);
	free(key);
	if (!enc)
		return NULL;
	char *url;
	if (asprintf(&url, "%s%s", be->c.base, enc) < 0)
		url = NULL;
	free(enc);
	return url;
}

static void reqs_free(struct s3_req *reqs, size_t n)
{
	if (!reqs)
		return;
	for (size_t i = 0; i < n; i++)
		free(reqs[i].url);
	free(reqs);
}

/* Requests for objs; on failure every result is rc and NULL is returned. */
static struct s3_req *reqs_for(struct s3_be *be, struct store_obj *objs, size_t n,
			       enum s3_method m)
{
	struct s3_req *reqs = calloc(n ? n : 1, sizeof(*reqs));
	bool ok = reqs != NULL;
	for (size_t i = 0; ok && i < n; i++) {
		reqs[i].method = m;
		reqs[i].obj = &objs[i];
		reqs[i].url = object_url(be, objs[i].name);
		ok = reqs[i].url != NULL;
	}
	if (!ok) {
		reqs_free(reqs, n);
		for (size_t i = 0; i < n; i++)
			objs[i].result = -ENOMEM;
		return NULL;
	}
	return reqs;
}

static int s3_batch(void *p, struct store_obj *objs, size_t n, enum s3_method m)
{
	struct s3_be *be = p;
	struct s3_req *reqs = reqs_for(be, objs, n, m);
	if (!reqs)
		return -ENOMEM;
	int rc = run_requests(be, reqs, n);
	reqs_free(reqs, n);
	return rc;
}

static int s3_put(void *p, struct store_obj *objs, size_t n)
{
	return s3_batch(p, objs, n, S3_PUT);
}

static int s3_get(void *p, struct store_obj *objs, size_t n)
{
	return s3_batch(p, objs, n, S3_GET);
}

static int64_t s3_exists(void *p, struct store_obj *objs, size_t n, bool stop_at_miss)
{
	int rc = s3_batch(p, objs, n, S3_HEAD);
	if (rc)
		return rc;
	int64_t lead = 0;
	bool missed = false;
	for (size_t i = 0; i < n; i++) {
		/* Anything but a hit (also a failure) is a miss to a caller of exists. */
		bool hit = objs[i].result == 0 && !(missed && stop_at_miss);
		objs[i].result = hit ? 0 : -ENOENT;
		if (hit && !missed)
			lead++;
		if (!hit)
			missed = true;
	}
	return lead;
}

static int s3_remove(void *p, struct store_obj *objs, size_t n)
{
	return s3_batch(p, objs, n, S3_DELETE);
}

static size_t s3_alignment(void *p)
{
	(void)p;
	return 1;
}

static const char *s3_engine(void *p)
{
	(void)p;
	return "curl";
}

static void s3_close(void *p)
{
	struct s3_be *be = p;
	if (!be)
		return;
	while (be->idle) {
		struct s3_session *s = be->idle;
		be->idle = s->next;
		session_free(s);
	}
	EVP_MD_free(be->sha256);
	conf_free(&be->c);
	pthread_mutex_destroy(&be->lock);
	free(be);
}

/* HEAD the bucket: wrong credentials and a missing bucket fail the open
 * with a message; an endpoint that does not answer only warns (the store
 * works, missing, until it does). */
static int check_bucket(struct s3_be *be)
{
	struct s3_req r = {.method = S3_HEAD, .url = be->c.bucket_url};
	int rc = run_requests(be, &r, 1);
	if (rc)
		return rc;
	const struct s3_conf *c = &be->c;
	if (r.result == 0)
		return 0;
	if (r.curl_rc != CURLE_OK) {
		log_warn("s3 store: %s://%s does not answer now (%s); pages miss until it does",
			 c->scheme, c->host, hc_strerror(r.result));
		return 0;
	}
	if (r.status == 403)
		return util_fail(-EACCES, "s3 store: access denied (HTTP 403) to bucket '%s' at "
				 "%s://%s: check access_key and secret_key (or AWS_ACCESS_KEY_ID "
				 "and AWS_SECRET_ACCESS_KEY) and the bucket's policy", c->bucket,
				 c->scheme, c->host);
	if (r.status == 404)
		return util_fail(-ENOENT, "s3 store: bucket '%s' does not exist at %s://%s (set "
				 "'bucket' or AWS_DEFAULT_BUCKET)", c->bucket, c->scheme, c->host);
	if (r.status == 301 || r.status == 400)
		return util_fail(-EINVAL, "s3 store: bucket '%s' at %s://%s answers HTTP %ld: "
				 "wrong 'region' (%s) or addressing style?", c->bucket, c->scheme,
				 c->host, r.status, c->region);
	log_warn("s3 store: bucket '%s' at %s://%s answers HTTP %ld; trying anyway", c->bucket,
		 c->scheme, c->host, r.status);
	return 0;
}

static int s3_open(const struct hc_config *cfg, void **out)
{
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return util_fail(-ENOMEM, "s3 store: libcurl cannot start: %s",
				 curl_easy_strerror(curl_init_rc));
	struct s3_be *be = calloc(1, sizeof(*be));
	if (!be)
		return -ENOMEM;
	pthread_mutex_init(&be->lock, NULL);
	int rc = conf_load(cfg, &be->c);
	if (rc)
		goto fail;
	be->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
	if (!be->sha256) {
		rc = util_fail(-ENOMEM, "s3 store: OpenSSL has no SHA-256");
		goto fail;
	}
	rc = check_bucket(be);
	if (rc)
		goto fail;
	log_info("s3 store: %s://%s bucket '%s' prefix '%s' (%s addressing), %u in flight, "
		 "%s payloads", be->c.scheme, be->c.host, be->c.bucket, be->c.prefix,
		 be->c.virtual_hosted ? "virtual-hosted" : "path-style", be->c.max_inflight,
		 be->c.unsigned_payload ? "unsigned" : "signed");
	*out = be;
	return 0;
fail:
	s3_close(be);
	return rc;
}

const struct store_backend_ops store_s3_ops = {
	.name = "s3",
	.open = s3_open,
	.close = s3_close,
	.alignment = s3_alignment,
	.engine = s3_engine,
	.put = s3_put,
	.get = s3_get,
	.exists = s3_exists,
	.remove = s3_remove,
};

/* ---- ls and gc over a bucket (ListObjectsV2) ---- */

struct s3_listed {
	char *name;      /* below the prefix; may hold "sub/" parts */
	size_t page_len; /* name[0, page_len) names the page: sub parts + 64 hex */
	uint64_t bytes;
	int64_t mtime_ns;
};

struct s3_listing {
	struct s3_listed *objs;
	size_t n, cap;
	uint64_t bytes;
	int64_t oldest_ns, newest_ns;
};

static void listing_free(struct s3_listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->objs[i].name);
	free(l->objs);
	memset(l, 0, sizeof(*l));
}

/* The text of <tag>...</tag> from *pos within end, XML entities decoded. */
static char *xml_take(const char **pos, const char *end, const char *tag)
{
	char open[48], close[48];
	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	const char *a = memmem(*pos, (size_t)(end - *pos), open, strlen(open));
	if (!a)
		return NULL;
	a += strlen(open);
	const char *b = memmem(a, (size_t)(end - a), close, strlen(close));
	if (!b)
		return NULL;
	*pos = b + strlen(close);
	char *out = malloc((size_t)(b - a) + 1), *o = out;
	if (!out)
		return NULL;
	static const struct { const char *ent; char ch; } ents[] = {
		{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
	while (a < b) {
		bool decoded = false;
		for (size_t i = 0; *a == '&' && i < sizeof(ents) / sizeof(ents[0]); i++) {
			size_t el = strlen(ents[i].ent);
			if ((size_t)(b - a) >= el && !memcmp(a, ents[i].ent, el)) {
				*o++ = ents[i].ch;
				a += el;
				decoded = true;
				break;
			}
		}
		if (!decoded)
			*o++ = *a++;
	}
	*o = '\0';
	return out;
}

/* "2026-11-30T05:34:34.388Z" -> ns since the epoch; 0 if unreadable. */
static int64_t parse_time(const char *s)
{
	struct tm tm = {0};
	unsigned ms = 0;
	const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!rest)
		return 0;
	if (*rest == '.') {
		unsigned scale = 100;
		for (rest++; isdigit((unsigned char)*rest); rest++, scale /= 10)
			ms += (unsigned)(*rest - '0') * scale;
	}
	return (int64_t)timegm(&tm) * 1000000000 + (int64_t)ms * 1000000;
}

static int listing_add(struct s3_listing *l, char *name, size_t page_len, uint64_t bytes,
		       int64_t mtime)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 1024;
		struct s3_listed *o = realloc(l->objs, cap * sizeof(*o));
		if (!o)
			return -ENOMEM;
		l->objs = o;
		l->cap = cap;
	}
	l->objs[l->n++] = (struct s3_listed){name, page_len, bytes, mtime};
	l->bytes += bytes;
	if (!l->oldest_ns || mtime < l->oldest_ns)
		l->oldest_ns = mtime;
	if (mtime > l->newest_ns)
		l->newest_ns = mtime;
	return 0;
}

/* "<64 lowercase hex><more>": the names the store writes. */
static bool is_object_name(const char *name)
{
	return strlen(name) > 64 && strspn(name, "0123456789abcdef") >= 64;
}

static const char *base_name(const char *key)
{
	const char *slash = strrchr(key, '/');
	return slash ? slash + 1 : key;
}

/* Parse one ListObjectsV2 page; *token gets the continuation (or NULL). */
static int parse_list(const struct s3_be *be, const char *xml, size_t len, struct s3_listing *l,
		      char **token, uint64_t *foreign)
{
	const char *pos = xml, *end = xml + len;
	size_t pl = strlen(be->c.prefix);
	*token = NULL;
	for (;;) {
		const char *a = memmem(pos, (size_t)(end - pos), "<Contents>", 10);
		if (!a)
			break;
		const char *b = memmem(a, (size_t)(end - a), "</Contents>", 11);
		if (!b)
			return util_fail(-EPROTO, "s3 store: a listing has an unterminated <Contents>");
		const char *p = a;
		char *key = xml_take(&p, b, "Key");
		p = a;
		char *size = xml_take(&p, b, "Size");
		p = a;
		char *mtime = xml_take(&p, b, "LastModified");
		int rc = 0;
		char *end_num = NULL;
		unsigned long long bytes = size ? strtoull(size, &end_num, 10) : 0;
		if (!key || !size || !end_num || *end_num || strncmp(key, be->c.prefix, pl)) {
			rc = util_fail(-EPROTO, "s3 store: a listing entry has no usable Key/Size");
		} else if (!is_object_name(base_name(key + pl))) {
			(*foreign)++;
		} else {
			/* Stores under longer prefixes below this one count too. */
			char *name = strdup(key + pl);
			size_t page_len = (size_t)(base_name(key + pl) - (key + pl)) + 64;
			rc = name ? listing_add(l, name, page_len, bytes,
						mtime ? parse_time(mtime) : 0)
				  : -ENOMEM;
			if (rc)
				free(name);
		}
		free(key);
		free(size);
		free(mtime);
		if (rc)
			return rc;
		pos = b + 11;
	}
	const char *p = xml;
	char *trunc = xml_take(&p, end, "IsTruncated");
	bool more = trunc && !strcmp(trunc, "true");
	free(trunc);
	if (more) {
		p = xml;
		*token = xml_take(&p, end, "NextContinuationToken");
		if (!*token)
			return util_fail(-EPROTO, "s3 store: a truncated listing has no "
					 "NextContinuationToken");
	}
	return 0;
}

/* Every object under the prefix. */
static int list_all(struct s3_be *be, struct s3_listing *l, uint64_t *foreign)
{
	struct s3_buf body = {0};
	char *token = NULL;
	int rc = 0;
	memset(l, 0, sizeof(*l));
	do {
		char *enc_prefix = encode(be->c.prefix, false), *enc_token = NULL, *url = NULL;
		if (token)
			enc_token = encode(token, false);
		/* SigV4 wants the query sorted by name. */
		int n = enc_prefix && (!token || enc_token)
				? asprintf(&url, "%s?%s%s%slist-type=2&prefix=%s", be->c.bucket_url,
					   token ? "continuation-token=" : "", token ? enc_token : "",
					   token ? "&" : "", enc_prefix)
				: -1;
		free(enc_prefix);
		free(enc_token);
		free(token);
		token = NULL;
		if (n < 0) {
			rc = -ENOMEM;
			break;
		}
		struct s3_req r = {.method = S3_LIST, .url = url, .body = &body};
		rc = run_requests(be, &r, 1);
		free(url);
		if (!rc && r.result)
			rc = util_fail(r.result, "s3 store: listing bucket '%s' at %s://%s failed: "
				       "%s (HTTP %ld)", be->c.bucket, be->c.scheme, be->c.host,
				       hc_strerror(r.result), r.status);
		if (!rc && body.overflow)
			rc = util_fail(-EFBIG, "s3 store: a listing page is over %u bytes",
				       S3_LIST_BODY_MAX);
		if (!rc)
			rc = parse_list(be, body.data ? body.data : "", body.len, l, &token, foreign);
	} while (!rc && token);
	free(token);
	free(body.data);
	if (rc)
		listing_free(l);
	return rc;
}

bool s3_is_url(const char *s)
{
	return s && !strncmp(s, "s3://", 5);
}

/* Open a backend on the bucket and prefix of an s3:// URL, the rest of the
 * configuration from the environment. */
static int open_url(const char *url, struct s3_be **out)
{
	*out = NULL;
	if (!s3_is_url(url))
		return util_fail(-EINVAL, "'%s' is not an s3://bucket/prefix URL", url);
	const char *b = url + 5, *slash = strchr(b, '/');
	char *bucket = slash ? strndup(b, (size_t)(slash - b)) : strdup(b);
	if (!bucket)
		return -ENOMEM;
	struct hc_config *cfg = NULL;
	int rc = hc_config_create(NULL, &cfg);
	if (!rc && !*bucket)
		rc = util_fail(-EINVAL, "'%s': no bucket (s3://bucket/prefix)", url);
	if (!rc)
		rc = hc_config_set(cfg, "bucket", bucket);
	if (!rc)
		rc = hc_config_set(cfg, "prefix", slash ? slash + 1 : "");
	void *be = NULL;
	if (!rc)
		rc = s3_open(cfg, &be);
	hc_config_destroy(cfg);
	free(bucket);
	*out = be;
	return rc;
}

int s3_tool_ls(const char *url, struct hc_ls_report *out)
{
	struct s3_be *be;
	int rc = open_url(url, &be);
	if (rc)
		return rc;
	struct s3_listing l;
	uint64_t foreign = 0;
	rc = list_all(be, &l, &foreign);
	if (!rc) {
		uint64_t pages = 0;
		const char *last = NULL;
		/* Listings come sorted by key, so a page's objects are adjacent. */
		for (size_t i = 0; i < l.n; i++) {
			if (!last || strncmp(last, l.objs[i].name, l.objs[i].page_len))
				pages++;
			last = l.objs[i].name;
		}
		*out = (struct hc_ls_report){
			.pages = pages,
			.objects = l.n,
			.bytes = l.bytes,
			.oldest_ns = l.oldest_ns,
			.newest_ns = l.newest_ns,
		};
		listing_free(&l);
	}
	s3_close(be);
	return rc;
}

struct s3_page {
	size_t first, count; /* objects [first, first + count) of the listing */
	uint64_t bytes;
	int64_t age_ns;
};

static int page_cmp(const void *x, const void *y)
{
	const struct s3_page *a = x, *b = y;
	return (a->age_ns > b->age_ns) - (a->age_ns < b->age_ns);
}

int s3_tool_gc(const char *url, uint64_t capacity_bytes, uint64_t *removed_pages,
	       uint64_t *removed_bytes)
{
	struct s3_be *be;
	int rc = open_url(url, &be);
	if (rc)
		return rc;
	struct s3_listing l;
	uint64_t foreign = 0, gone_pages = 0, gone_bytes = 0;
	rc = list_all(be, &l, &foreign);
	if (rc) {
		s3_close(be);
		return rc;
	}
	struct s3_page *pages = malloc((l.n ? l.n : 1) * sizeof(*pages));
	struct store_obj *objs = malloc((l.n ? l.n : 1) * sizeof(*objs));
	size_t np = 0;
	if (!pages || !objs) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < l.n; i++) {
		if (!np || strncmp(l.objs[pages[np - 1].first].name, l.objs[i].name,
				   l.objs[i].page_len))
			pages[np++] = (struct s3_page){.first = i};
		struct s3_page *pg = &pages[np - 1];
		pg->count++;
		pg->bytes += l.objs[i].bytes;
		if (l.objs[i].mtime_ns > pg->age_ns)
			pg->age_ns = l.objs[i].mtime_ns;
	}
	qsort(pages, np, sizeof(*pages), page_cmp);
	/* The oldest pages whose removal brings the total to the cap. */
	uint64_t total = l.bytes;
	size_t nobj = 0, npages = 0;
	for (size_t p = 0; p < np && total > capacity_bytes; p++, npages++) {
		for (size_t i = 0; i < pages[p].count; i++) {
			const struct s3_listed *o = &l.objs[pages[p].first + i];
			objs[nobj++] = (struct store_obj){.name = o->name, .len = o->bytes,
							  .result = -EIO};
		}
		total -= pages[p].bytes;
	}
	rc = s3_remove(be, objs, nobj);
	for (size_t p = 0, k = 0; !rc && p < npages; p++) {
		bool all = true;
		for (size_t i = 0; i < pages[p].count; i++, k++) {
			if (objs[k].result == 0 || objs[k].result == -ENOENT)
				gone_bytes += objs[k].len;
			else
				all = false;
		}
		gone_pages += all;
	}
	for (size_t k = 0; !rc && k < nobj; k++)
		if (objs[k].result && objs[k].result != -ENOENT)
			rc = util_fail(objs[k].result, "s3 gc: deleting %s failed: %s", objs[k].name,
				       hc_strerror(objs[k].result));
out:
	if (removed_pages)
		*removed_pages = gone_pages;
	if (removed_bytes)
		*removed_bytes = gone_bytes;
	free(pages);
	free(objs);
	listing_free(&l);
	s3_close(be);
	return rc;
}
