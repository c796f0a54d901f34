/* The S3 backend's HTTP layer: libcurl sessions (a multi handle each),
 * request set-up and signing headers, body callbacks over the objects'
 * iovecs, classification of outcomes, retries and the endpoint's down state
 * (see s3.c for the design). */
#define _GNU_SOURCE
#include "store/backend/s3/s3_http.h"
#include "util/util.h"

#include <hicache/store.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const method_names[] = {"PUT", "GET", "HEAD", "DELETE", "GET"};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

CURLcode s3_curl_start(void)
{
	pthread_once(&curl_once, curl_init);
	return curl_init_rc;
}

int64_t s3_now_ms(void)
{
	return (int64_t)(util_mono_ns() / 1000000u);
}

/* Jitter only needs to differ between threads and calls. */
static uint64_t jitter_next(void)
{
	static _Thread_local uint64_t state;
	if (!state) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		state = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)(uintptr_t)&state ^
			0x9e3779b97f4a7c15ull;
	}
	state ^= state << 13;
	state ^= state >> 7;
	state ^= state << 17;
	return state;
}

static int64_t backoff_max_ms(unsigned attempt)
{
	int64_t d = S3_BACKOFF_BASE_MS;
	for (unsigned i = 1; i < attempt && d < S3_BACKOFF_CAP_MS; i++)
		d *= 2;
	return d > S3_BACKOFF_CAP_MS ? S3_BACKOFF_CAP_MS : d;
}

/* Exponential backoff with "equal jitter": half fixed, half random. */
static int64_t backoff_ms(unsigned attempt)
{
	int64_t d = backoff_max_ms(attempt);
	return d / 2 + (int64_t)(jitter_next() % (uint64_t)(d / 2 + 1));
}

/* ---- sessions ---- */

void s3_session_free(struct s3_session *s)
{
	if (!s)
		return;
	if (s->multi)
		curl_multi_cleanup(s->multi);
	free(s);
}

static struct s3_session *session_new(const struct s3_be *be)
{
	struct s3_session *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->slots = be->c.max_inflight;
	s->multi = curl_multi_init();
	if (!s->multi) {
		free(s);
		return NULL;
	}
	curl_multi_setopt(s->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)s->slots);
	curl_multi_setopt(s->multi, CURLMOPT_MAXCONNECTS, (long)s->slots);
	return s;
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
			b->nomem = true;
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
	if (r->body) {
		r->body->len = 0;
		r->body->overflow = false;
		r->body->nomem = false;
	}
	curl_easy_setopt(easy, CURLOPT_URL, r->url);
	curl_easy_setopt(easy, CURLOPT_PRIVATE, r);
	curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
	/* Keys go as named: libcurl would otherwise fold "a/../b" to "b". */
	curl_easy_setopt(easy, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, c->sigv4);
	curl_easy_setopt(easy, CURLOPT_USERPWD, c->userpwd);
	curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, r->timeout_ms);
	curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
			 r->timeout_ms < S3_CONNECT_TIMEOUT_MS ? r->timeout_ms
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

/* Should r fail at once? While the endpoint is down, yes; once a stalled
 * endpoint's back-off is over, r may be the probe (one at a time). */
static int down_result(struct s3_be *be, struct s3_req *r, int64_t now)
{
	bool stalled = atomic_load_explicit(&be->stalled, memory_order_relaxed);
	if (now < atomic_load_explicit(&be->down_until_ms, memory_order_relaxed))
		return stalled ? -ETIMEDOUT : -ECONNREFUSED;
	if (!stalled)
		return 0;
	bool expected = false;
	if (!atomic_compare_exchange_strong(&be->probing, &expected, true))
		return -ETIMEDOUT;
	r->probe = true;
	return 0;
}

static void mark_down(struct s3_be *be, const struct s3_req *r, int64_t now, bool stalled)
{
	int64_t ms = S3_DOWN_MS;
	if (stalled) {
		/* Each failed probe doubles the back-off. */
		ms = atomic_load(&be->stall_backoff_ms);
		ms = ms ? (2 * ms > S3_STALL_DOWN_MAX_MS ? S3_STALL_DOWN_MAX_MS : 2 * ms)
			: S3_STALL_DOWN_MS;
		atomic_store(&be->stall_backoff_ms, ms);
		atomic_store(&be->stalled, true);
	}
	atomic_store(&be->down_until_ms, now + ms);
	if (!atomic_exchange(&be->said_down, true))
		log_warn("s3 store: endpoint %s://%s is %s (%s); requests fail at once until it "
			 "answers again",
			 be->c.scheme, be->c.host, stalled ? "not answering" : "unreachable",
			 r->curl_err[0] ? r->curl_err : curl_easy_strerror(r->curl_rc));
}

static void mark_up(struct s3_be *be)
{
	atomic_store_explicit(&be->timeouts, 0, memory_order_relaxed);
	if (atomic_load_explicit(&be->stalled, memory_order_relaxed)) {
		atomic_store(&be->stalled, false);
		atomic_store(&be->stall_backoff_ms, 0);
	}
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
		if (r->body && r->body->nomem)
			return -ENOMEM;
		return r->too_long || (r->body && r->body->overflow) ? -EFBIG : -EIO;
	case CURLE_COULDNT_CONNECT:
		*down = true;
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
		*down = true;
		return -EHOSTUNREACH;
	case CURLE_OPERATION_TIMEDOUT: {
		/* Never connected: a silent endpoint is as down as a refusing one.
		 * (The connect time of a reused connection is 0: ask whether the
		 * request went out, on a new connection or an old one.) */
		curl_off_t sent = 0;
		curl_easy_getinfo(r->easy, CURLINFO_PRETRANSFER_TIME_T, &sent);
		*down = sent == 0;
		*retry = !*down;
		/* Connected and no answer, again and again: a stalled gateway.
		 * Mark it down rather than wait out every retry. */
		if (!*down &&
		    (r->probe || atomic_fetch_add(&be->timeouts, 1) + 1 >= S3_STALL_TIMEOUTS)) {
			*down = true;
			*retry = false;
		}
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
		config_error_once(&be->said_tls,
				  "s3 store: TLS with %s failed: %s (check "
				  "'ca_bundle' and 'scheme')",
				  be->c.host,
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
			/* Of the wrong size: not an object of this geometry. */
			return r->obj && len != (curl_off_t)r->obj->len ? -EBADMSG : 0;
		}
		default:
			return 0;
		}
	}
	error_code(r, s3code, sizeof(s3code));
	if (code == 404 && !strcmp(s3code, "NoSuchBucket")) {
		config_error_once(&be->said_no_bucket,
				  "s3 store: bucket '%s' does not exist "
				  "at %s://%s (configuration error: 'bucket' / AWS_DEFAULT_BUCKET)",
				  be->c.bucket, be->c.scheme, be->c.host);
		return -ENOENT;
	}
	if (code == 404)
		return -ENOENT;
	if (code == 412 && r->method == S3_PUT)
		return -EEXIST;
	if (code == 403) {
		config_error_once(&be->said_denied,
				  "s3 store: access denied (HTTP 403%s%s) to "
				  "bucket '%s' at %s://%s (configuration error: check access_key "
				  "and secret_key, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
				  "and the bucket's policy)",
				  s3code[0] ? " " : "", s3code, be->c.bucket, be->c.scheme,
				  be->c.host);
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

/* One s3_run_requests call: its requests, those waiting for a retry, and
 * the one deadline of the whole call. */
struct s3_run {
	struct s3_be *be;
	struct s3_session *s;
	struct s3_req *reqs;
	size_t n;
	struct s3_req **waiting; /* retries, each with its not_before_ms */
	size_t next, done, nwait, active;
	size_t failed;
	struct s3_req *first_failed;
	long c_timeout;
	int64_t deadline;
};

/* The next request to start now: a retry whose time has come, else a new
 * one; NULL when neither. */
static struct s3_req *run_take(struct s3_run *x, int64_t now)
{
	for (size_t i = 0; i < x->nwait; i++) {
		if (x->waiting[i]->not_before_ms <= now) {
			struct s3_req *r = x->waiting[i];
			x->waiting[i] = x->waiting[--x->nwait];
			return r;
		}
	}
	return x->next < x->n ? &x->reqs[x->next++] : NULL;
}

/* Start what may start, up to the session's slots. A request that may not
 * (endpoint down, deadline passed) or cannot (no memory) is finished. */
static void run_start(struct s3_run *x, int64_t now)
{
	struct s3_be *be = x->be;
	while (x->active < x->s->slots) {
		struct s3_req *r = run_take(x, now);
		if (!r)
			break;
		int down_rc = down_result(be, r, now);
		if (!down_rc && now >= x->deadline)
			down_rc = -ETIMEDOUT;
		if (down_rc) {
			finish(r, down_rc);
			x->done++;
			continue;
		}
		r->timeout_ms = x->c_timeout < x->deadline - now ? x->c_timeout
								 : (long)(x->deadline - now);
		CURL *easy = curl_easy_init();
		int rc = easy ? req_prepare(be, r, easy) : -ENOMEM;
		if (!rc && curl_multi_add_handle(x->s->multi, easy) != CURLM_OK)
			rc = -ENOMEM;
		if (rc) {
			req_release(r);
			curl_easy_cleanup(easy);
			finish(r, rc);
			x->done++;
			continue;
		}
		x->active++;
	}
}

/* A transfer ended with rc: note the endpoint's state, then queue a retry
 * or finish the request. */
static void run_ended(struct s3_run *x, struct s3_req *r, int rc, bool retry, bool down)
{
	struct s3_be *be = x->be;
	int64_t now = s3_now_ms();
	if (r->probe) {
		r->probe = false;
		atomic_store(&be->probing, false);
	}
	if (down)
		mark_down(be, r, now, rc == -ETIMEDOUT);
	else if (r->curl_rc == CURLE_OK)
		mark_up(be);
	/* No retry that the call's deadline would cut short. */
	if (retry && r->attempt < be->c.retries &&
	    now + backoff_max_ms(r->attempt + 1) < x->deadline) {
		r->attempt++;
		r->not_before_ms = now + backoff_ms(r->attempt);
		x->waiting[x->nwait++] = r;
		return;
	}
	finish(r, rc);
	x->done++;
	/* Misses and wrong sizes are the store core's to judge. */
	bool expected = rc == 0 || rc == -ENOENT || rc == -EEXIST || rc == -ENODATA ||
			rc == -EFBIG || rc == -EBADMSG;
	if (!expected && r->obj) {
		x->failed++;
		if (!x->first_failed)
			x->first_failed = r;
	}
}

/* Drive the transfers and take in every one that has ended. */
static void run_reap(struct s3_run *x)
{
	int running = 0;
	curl_multi_perform(x->s->multi, &running);
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(x->s->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		CURL *easy = m->easy_handle;
		struct s3_req *r = NULL;
		curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&r);
		r->curl_rc = m->data.result;
		curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &r->status);
		bool retry, down;
		int rc = classify(x->be, r, &retry, &down);
		curl_multi_remove_handle(x->s->multi, easy);
		req_release(r);
		curl_easy_cleanup(easy);
		x->active--;
		run_ended(x, r, rc, retry, down);
	}
}

/* Start the next request at once when a handle is free; else sleep until
 * a socket is ready or the next retry is due. */
static void run_wait(struct s3_run *x)
{
	int64_t soonest = INT64_MAX;
	for (size_t i = 0; i < x->nwait; i++)
		if (x->waiting[i]->not_before_ms < soonest)
			soonest = x->waiting[i]->not_before_ms;
	int64_t now = s3_now_ms();
	if (x->active < x->s->slots && (x->next < x->n || soonest <= now))
		return;
	int64_t d = soonest == INT64_MAX ? 1000 : soonest - now;
	int timeout = d < 0 ? 0 : d > 1000 ? 1000 : (int)d;
	curl_multi_poll(x->s->multi, NULL, 0, timeout, NULL);
}

/* Once per batch while an endpoint misbehaves: rate-limited. */
static void run_report(const struct s3_run *x)
{
	const struct s3_req *f = x->first_failed;
	if (!x->failed || f->result == -ECONNREFUSED || f->result == -EACCES)
		return;
	char s3code[64];
	error_code(f, s3code, sizeof(s3code));
	log_limited(HC_LOG_WARN,
		    "s3 store: %zu of %zu %s requests failed; first: %s: %s (HTTP %ld %s%s)",
		    x->failed, x->n, method_names[f->method], f->obj->name, hc_strerror(f->result),
		    f->status, s3code, f->curl_err);
}

/* Run every request of reqs, at most max_inflight at once, retrying what
 * may succeed later. Each request's result is set; returns 0 or -ENOMEM
 * (no session: every result is -ENOMEM). */
int s3_run_requests(struct s3_be *be, struct s3_req *reqs, size_t n)
{
	if (!n)
		return 0;
	struct s3_run x = {.be = be, .reqs = reqs, .n = n};
	x.s = session_get(be);
	x.waiting = malloc(n * sizeof(*x.waiting));
	if (!x.s || !x.waiting) {
		if (x.s)
			session_put(be, x.s);
		free(x.waiting);
		for (size_t i = 0; i < n; i++)
			finish(&reqs[i], -ENOMEM);
		return -ENOMEM;
	}
	/* One deadline for the whole call, retries included: each wave of
	 * max_inflight requests gets timeout_ms. */
	x.c_timeout = be->c.timeout_ms;
	int64_t waves = (int64_t)((n + x.s->slots - 1) / x.s->slots);
	x.deadline = s3_now_ms() + waves * (int64_t)x.c_timeout;
	while (x.done < n) {
		run_start(&x, s3_now_ms());
		if (x.done == n)
			break;
		run_reap(&x);
		if (x.done == n)
			break;
		run_wait(&x);
	}
	session_put(be, x.s);
	free(x.waiting);
	run_report(&x);
	return 0;
}
