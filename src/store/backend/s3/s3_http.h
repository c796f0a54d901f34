/* The S3 backend's HTTP layer (s3_http.c): the backend handle, its
 * sessions and requests, and the call that runs a batch of requests. It
 * includes only s3_conf.h of the backend's files. */
#ifndef HC_SRC_STORE_BACKEND_S3_HTTP_H
#define HC_SRC_STORE_BACKEND_S3_HTTP_H

#include "store/backend.h"
#include "store/backend/s3/s3_conf.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define S3_BACKOFF_BASE_MS 50
#define S3_BACKOFF_CAP_MS 2000
#define S3_DOWN_MS 1000              /* fail at once for this long after a refused connect */
#define S3_STALL_TIMEOUTS 2          /* consecutive answerless timeouts: the endpoint stalls */
#define S3_STALL_DOWN_MS 1000        /* first back-off of a stalled endpoint, doubling */
#define S3_STALL_DOWN_MAX_MS 30000   /* ... up to this */
#define S3_CONNECT_TIMEOUT_MS 3000   /* at most; timeout_ms when smaller */
#define S3_BUFFER_BYTES (256 * 1024) /* curl's send and receive buffers per handle */
#define S3_ERR_BODY 512
#define S3_LIST_BODY_MAX (64u << 20)
#define S3_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* One caller's multi handle and its cache of keep-alive connections. Easy
 * handles are made per request and freed when it ends: libcurl 7.88.1
 * mishandles a folded header on an easy handle reused after
 * curl_easy_reset (use after free, curl issue 11101), and the connections
 * live in the multi handle anyway, so a fresh handle keeps keep-alive. */
struct s3_session {
	struct s3_session *next;
	CURLM *multi;
	unsigned slots; /* requests in flight at most */
};

struct s3_be {
	struct s3_conf c;
	EVP_MD *sha256;
	pthread_mutex_t lock;
	struct s3_session *idle;
	_Atomic int64_t down_until_ms;
	/* A stalled endpoint (connects, never answers): after the back-off
	 * one request at a time probes it, the others fail at once. */
	_Atomic unsigned timeouts; /* consecutive timeouts, reset by any answer */
	_Atomic bool stalled, probing;
	_Atomic int64_t stall_backoff_ms;
	_Atomic bool said_down, said_denied, said_no_bucket, said_tls;
};

enum s3_method { S3_PUT, S3_GET, S3_HEAD, S3_DELETE, S3_LIST };

/* A growing buffer for list responses. */
struct s3_buf {
	char *data;
	size_t len, cap;
	bool overflow; /* over S3_LIST_BODY_MAX */
	bool nomem;
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
	long timeout_ms; /* this attempt's, within the call's deadline */
	bool probe;      /* the one request let through to a stalled endpoint */
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

CURLcode s3_curl_start(void);
int64_t s3_now_ms(void);
void s3_session_free(struct s3_session *s);
/* Run every request of reqs, at most max_inflight at once, retrying what
 * may succeed later. Each request's result is set; returns 0 or -ENOMEM. */
int s3_run_requests(struct s3_be *be, struct s3_req *reqs, size_t n);

#endif
