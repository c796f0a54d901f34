/*
 * The S3 backend: page objects in an S3 bucket (Ceph RGW, MinIO, AWS S3),
 * so many engine instances on many machines share one L3.
 *
 *   object key   = prefix + physical name    (the same names as files)
 *   URL          = scheme://host/bucket/key  (path style, the default)
 *                  scheme://bucket.host/key  (use_virtual_addressing)
 *
 * One backend call moves a batch of objects as many HTTP requests in flight
 * at once: the call takes a session (a curl multi handle and its cache of
 * keep-alive connections) from a free list, keeps up to max_inflight
 * requests running, each on a fresh easy handle (never one reused after
 * curl_easy_reset: libcurl 7.88.1 frees a folded header twice on those),
 * and gives the session back,
 * connections still open, for the next call. Concurrent calls use different
 * sessions, so nothing is locked while requests run.
 *
 *   put     PUT with If-None-Match: * (objects are immutable; 412 = exists)
 *   get     GET; the body is written straight into the object's iovecs
 *   exists  HEAD; a hit needs the expected Content-Length
 *   remove  GET again, DELETE only an invalid copy (the store core's
 *           healing of objects it found damaged)
 *   gc, clear  DELETE (s3_delete: whole pages or a store's objects,
 *           valid ones included)
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
 * Files, top down; each includes only the headers of those below it:
 *   s3_ops.c   the ops table (store_s3_ops)
 *   s3_list.c  ListObjectsV2 listings; ls, gc and clear over them
 *   s3.c       open, close, and the object calls (put/get/exists/remove)
 *   s3_http.c  libcurl sessions, signing headers, running requests
 *   s3_conf.c  configuration, endpoint parsing, URL encoding
 *
 * Caveats:
 *   - no background cleaner: S3 buckets expire objects with lifecycle
 *     rules; `hicache gc s3://bucket/prefix` deletes the oldest pages;
 *   - each concurrent call holds its own connections: threads x
 *     max_inflight connections at most.
 */
#define _GNU_SOURCE
#include "store/backend/s3/s3.h"
#include "store/format.h"
#include "util/util.h"

#include <hicache/config.h>
#include <hicache/store.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *object_url(const struct s3_be *be, const char *name)
{
	size_t pl = strlen(be->c.prefix), nl = strlen(name);
	char *key = malloc(pl + nl + 1);
	if (!key)
		return NULL;
	memcpy(key, be->c.prefix, pl);
	memcpy(key + pl, name, nl + 1);
	char *enc = s3_encode(key, true);
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
static struct s3_req *reqs_for(struct s3_be *be, struct store_obj *objs, size_t n, enum s3_method m)
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
	int rc = s3_run_requests(be, reqs, n);
	reqs_free(reqs, n);
	return rc;
}

int s3_put(void *p, struct store_obj *objs, size_t n)
{
	return s3_batch(p, objs, n, S3_PUT);
}

int s3_get(void *p, struct store_obj *objs, size_t n)
{
	return s3_batch(p, objs, n, S3_GET);
}

int64_t s3_exists(void *p, struct store_obj *objs, size_t n, bool stop_at_miss)
{
	int rc = s3_batch(p, objs, n, S3_HEAD);
	if (rc)
		return rc;
	int64_t lead = 0;
	bool missed = false;
	for (size_t i = 0; i < n; i++) {
		/* Anything but a hit (also a failure) is a miss to a caller of exists. */
		bool hit = objs[i].result == 0 && !(missed && stop_at_miss);
		bool wrong = objs[i].result == -EBADMSG && !(missed && stop_at_miss);
		objs[i].result = hit ? 0 : wrong ? -EBADMSG : -ENOENT;
		if (hit && !missed)
			lead++;
		if (!hit)
			missed = true;
	}
	return lead;
}

/* DELETE each object, whatever it holds: gc and clear (s3_list.c) and an
 * engine's eviction (hc_store_delete), which remove valid objects on
 * purpose. S3 answers a DELETE of a missing key as of a present one. Results 0 deleted, -ENOENT, -errno. */
int s3_delete(void *p, struct store_obj *objs, size_t n)
{
	return s3_batch(p, objs, n, S3_DELETE);
}

/*
 * Healing: the store found these objects damaged when it read them. That
 * verdict may come from the caller's memory (a zero-copy payload changed
 * while it was read), and a good copy may have been published since; S3
 * has no atomic move aside as the file backend has. So each object is read
 * again, whole, into a buffer of ours, and deleted only when that copy has
 * the expected size and is not a valid object. A good copy published
 * between that read and the DELETE is lost: a miss the next set heals,
 * never wrong data. Results as the contract says: 0 deleted, -EEXIST a
 * valid object (or one of another size: another geometry's) kept,
 * -ENOENT, -errno.
 */
int s3_remove(void *p, struct store_obj *objs, size_t n)
{
	struct store_obj *again = util_fault_calloc(n ? n : 1, sizeof(*again));
	struct iovec *iov = util_fault_calloc(n ? n : 1, sizeof(*iov));
	size_t *del_of = util_fault_calloc(n ? n : 1, sizeof(*del_of));
	int rc = 0;
	if (!again || !iov || !del_of) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		iov[i].iov_base = objs[i].len ? util_fault_malloc(objs[i].len) : NULL;
		iov[i].iov_len = objs[i].len;
		if (objs[i].len && !iov[i].iov_base) {
			rc = -ENOMEM;
			goto out;
		}
		again[i] = (struct store_obj){.name = objs[i].name,
					      .route = objs[i].route,
					      .iov = &iov[i],
					      .iovcnt = 1,
					      .len = objs[i].len};
	}
	rc = s3_batch(p, again, n, S3_GET);
	if (rc)
		goto out;
	size_t ndel = 0;
	for (size_t i = 0; i < n; i++) {
		struct store_trailer t;
		int r = again[i].result;
		if (r == -ENODATA || r == -EFBIG)
			objs[i].result = -EEXIST; /* another size: not ours to judge */
		else if (r)
			objs[i].result = r;
		else if (!format_check_image(iov[i].iov_base, objs[i].len, objs[i].name, &t))
			objs[i].result = -EEXIST;
		else
			del_of[ndel++] = i;
	}
	for (size_t k = 0; k < ndel; k++)
		again[k] = objs[del_of[k]];
	if (ndel)
		rc = s3_batch(p, again, ndel, S3_DELETE);
	for (size_t k = 0; k < ndel; k++)
		objs[del_of[k]].result = again[k].result;
out:
	if (rc)
		for (size_t i = 0; i < n; i++)
			if (!objs[i].result)
				objs[i].result = rc;
	if (iov)
		for (size_t i = 0; i < n; i++)
			free(iov[i].iov_base);
	free(iov);
	free(again);
	free(del_of);
	return rc;
}

void s3_close(void *p)
{
	struct s3_be *be = p;
	if (!be)
		return;
	while (be->idle) {
		struct s3_session *s = be->idle;
		be->idle = s->next;
		s3_session_free(s);
	}
	EVP_MD_free(be->sha256);
	s3_conf_free(&be->c);
	pthread_mutex_destroy(&be->lock);
	free(be);
}

/* HEAD the bucket: wrong credentials and a missing bucket fail the open
 * with a message; an endpoint that does not answer only warns (the store
 * works, missing, until it does). */
static int check_bucket(struct s3_be *be)
{
	struct s3_req r = {.method = S3_HEAD, .url = be->c.bucket_url};
	int rc = s3_run_requests(be, &r, 1);
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
		return util_fail(-EACCES,
				 "s3 store: access denied (HTTP 403) to bucket '%s' at "
				 "%s://%s: check access_key and secret_key (or AWS_ACCESS_KEY_ID "
				 "and AWS_SECRET_ACCESS_KEY) and the bucket's policy",
				 c->bucket, c->scheme, c->host);
	if (r.status == 404)
		return util_fail(-ENOENT,
				 "s3 store: bucket '%s' does not exist at %s://%s (set "
				 "'bucket' or AWS_DEFAULT_BUCKET)",
				 c->bucket, c->scheme, c->host);
	if (r.status == 301 || r.status == 400)
		return util_fail(-EINVAL,
				 "s3 store: bucket '%s' at %s://%s answers HTTP %ld: "
				 "wrong 'region' (%s) or addressing style?",
				 c->bucket, c->scheme, c->host, r.status, c->region);
	log_warn("s3 store: bucket '%s' at %s://%s answers HTTP %ld; trying anyway", c->bucket,
		 c->scheme, c->host, r.status);
	return 0;
}

int s3_open(const struct hc_config *cfg, void **out)
{
	CURLcode crc = s3_curl_start();
	if (crc != CURLE_OK)
		return util_fail(-ENOMEM, "s3 store: libcurl cannot start: %s",
				 curl_easy_strerror(crc));
	struct s3_be *be = calloc(1, sizeof(*be));
	if (!be)
		return -ENOMEM;
	pthread_mutex_init(&be->lock, NULL);
	int rc = s3_conf_load(cfg, &be->c);
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
		 "%s payloads",
		 be->c.scheme, be->c.host, be->c.bucket, be->c.prefix,
		 be->c.virtual_hosted ? "virtual-hosted" : "path-style", be->c.max_inflight,
		 be->c.unsigned_payload ? "unsigned" : "signed");
	*out = be;
	return 0;
fail:
	s3_close(be);
	return rc;
}
