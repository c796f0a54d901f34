/* The S3 backend's configuration (s3_conf.c): the bottom of the backend's
 * files, including none of them. Also the key and URL text helpers every
 * layer above uses. */
#ifndef HC_SRC_STORE_BACKEND_S3_CONF_H
#define HC_SRC_STORE_BACKEND_S3_CONF_H

#include <stdbool.h>
#include <stddef.h>

struct hc_config;

struct s3_conf {
	char *scheme; /* "http" or "https" */
	char *host;   /* "name[:port]" */
	char *bucket;
	char *region;
	char *prefix;
	char *userpwd; /* "access:secret", for libcurl only */
	char *token_header;
	char *sigv4; /* "aws:amz:<region>:s3" */
	char *ca_bundle;
	char *base; /* URL up to the key: ".../bucket/" or "...host/" */
	char *bucket_url;
	bool virtual_hosted;
	bool unsigned_payload;
	unsigned max_inflight;
	unsigned retries;
	long timeout_ms;
};

/* Fill c from cfg, checked; 0 or -errno with a message (c left empty). */
int s3_conf_load(const struct hc_config *cfg, struct s3_conf *c);
void s3_conf_free(struct s3_conf *c);
/* Percent-encode with uppercase hex (SigV4's canonical form); keep_slash:
 * a path, where '/' separates segments. NULL: no memory. */
char *s3_encode(const char *s, bool keep_slash);

/* url with any user-info ("user:password@") replaced by "***@" and
 * control characters by '?', in out (truncated to size); returns out. */
const char *s3_redact(const char *url, char *out, size_t size);

/* Has key a "." or ".." path segment? (A prefix may not; a listed key that
 * has one is never acted on.) */
bool s3_key_has_dot_segment(const char *key);

#endif
