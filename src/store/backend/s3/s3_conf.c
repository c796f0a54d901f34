/* The S3 backend's configuration: keys, credentials, endpoint and the URLs
 * built from them (see s3.c for the design). */
#define _GNU_SOURCE
#include "store/backend/s3/s3_conf.h"
#include "util/util.h"

#include <hicache/config.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void s3_conf_free(struct s3_conf *c)
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

/* RFC 3986 unreserved, in ASCII whatever the locale (an embedding program
 * may set one where isalnum() accepts bytes above 0x7f: a name's UTF-8 or
 * Latin-1 bytes must still be percent-encoded). */
static bool unreserved(unsigned char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
	       ch == '-' || ch == '_' || ch == '.' || ch == '~';
}

/* Percent-encode with uppercase hex, as SigV4 canonicalises (libcurl signs
 * the URL as written). keep_slash: a path, where '/' separates segments. */
char *s3_encode(const char *s, bool keep_slash)
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

const char *s3_redact(const char *url, char *out, size_t size)
{
	if (!size)
		return out;
	const char *sep = strstr(url, "://");
	size_t start = sep ? (size_t)(sep - url) + 3 : 0;
	size_t end = start + strcspn(url + start, "/?#");
	const char *at = NULL;
	for (size_t i = start; i < end; i++)
		if (url[i] == '@')
			at = url + i;
	if (at)
		snprintf(out, size, "%.*s***@%s", (int)start, url, at + 1);
	else
		snprintf(out, size, "%s", url);
	/* Nothing unprintable in a message either. */
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return out;
}

static int dup_or_fail(char **dst, const char *src)
{
	*dst = strdup(src ? src : "");
	return *dst ? 0 : -ENOMEM;
}

bool s3_key_has_dot_segment(const char *key)
{
	for (const char *s = key;;) {
		size_t n = strcspn(s, "/");
		if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
			return true;
		if (!s[n])
			return false;
		s += n + 1;
	}
}

/* The configuration's values as read, before they are checked and kept. */
struct conf_in {
	const char *endpoint, *bucket, *region, *prefix, *access, *secret, *token, *scheme, *ca;
	bool virt, unsigned_payload;
	int64_t inflight, timeout, retries;
};

static int conf_read(const struct hc_config *cfg, struct conf_in *in)
{
	int rc;
	if ((rc = hc_config_get_string(cfg, "endpoint", &in->endpoint)) ||
	    (rc = hc_config_get_string(cfg, "bucket", &in->bucket)) ||
	    (rc = hc_config_get_string(cfg, "region", &in->region)) ||
	    (rc = hc_config_get_string(cfg, "prefix", &in->prefix)) ||
	    (rc = hc_config_get_string(cfg, "access_key", &in->access)) ||
	    (rc = hc_config_get_string(cfg, "secret_key", &in->secret)) ||
	    (rc = hc_config_get_string(cfg, "session_token", &in->token)) ||
	    (rc = hc_config_get_string(cfg, "scheme", &in->scheme)) ||
	    (rc = hc_config_get_string(cfg, "ca_bundle", &in->ca)) ||
	    (rc = hc_config_get_bool(cfg, "use_virtual_addressing", &in->virt)) ||
	    (rc = hc_config_get_bool(cfg, "unsigned_payload", &in->unsigned_payload)) ||
	    (rc = hc_config_get_int(cfg, "max_inflight", &in->inflight)) ||
	    (rc = hc_config_get_int(cfg, "timeout_ms", &in->timeout)) ||
	    (rc = hc_config_get_int(cfg, "retries", &in->retries)))
		return rc;
	return 0;
}

/* Bucket, credentials, region and prefix, each with what was wrong. */
static int conf_check(const struct conf_in *in)
{
	const char *bucket = in->bucket, *region = in->region, *prefix = in->prefix;
	if (!bucket || !*bucket)
		return util_fail(-EINVAL, "s3 store: no bucket; set config 'bucket' or "
					  "AWS_DEFAULT_BUCKET");
	if (!bucket_name_ok(bucket))
		return util_fail(-EINVAL,
				 "s3 store: bucket '%s' is not a valid S3 bucket name "
				 "(3..63 of a-z, 0-9, '.', '-')",
				 bucket);
	if (!in->access || !*in->access || !in->secret || !*in->secret)
		return util_fail(-EINVAL,
				 "s3 store: no credentials; set config 'access_key' and "
				 "'secret_key' or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
	if (strchr(in->access, ':'))
		return util_fail(-EINVAL, "s3 store: access_key must not contain ':'");
	if (!region || !*region ||
	    strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(region))
		return util_fail(-EINVAL, "s3 store: region '%s' is not [a-z0-9-]+",
				 region ? region : "");
	for (const char *p = prefix; p && *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return util_fail(-EINVAL, "s3 store: prefix has a control character");
	if (prefix && s3_key_has_dot_segment(prefix))
		return util_fail(-EINVAL, "s3 store: prefix '%s' has a '.' or '..' segment",
				 prefix);
	return 0;
}

/* endpoint: [scheme://]host[:port][/]; its scheme wins over 'scheme'.
 * Sets *host (allocated) and *scheme (the config's, or scheme_buf).
 * Messages show it redacted: it may hold user:password@. */
static int conf_endpoint(const struct conf_in *in, char scheme_buf[8], const char **scheme,
			 char **host_out)
{
	const char *endpoint = in->endpoint;
	char shown[256];
	const char *host = endpoint && *endpoint ? endpoint : NULL;
	char aws_host[128];
	if (!host) {
		snprintf(aws_host, sizeof(aws_host), "s3.%s.amazonaws.com", in->region);
		host = aws_host;
	}
	const char *sep = strstr(host, "://");
	*scheme = in->scheme;
	if (sep) {
		size_t sl = (size_t)(sep - host);
		if (sl >= 8 || (strncasecmp(host, "http", sl) && strncasecmp(host, "https", sl)) ||
		    (sl != 4 && sl != 5))
			return util_fail(-EINVAL,
					 "s3 store: endpoint '%s': the scheme must be http "
					 "or https",
					 s3_redact(endpoint, shown, sizeof(shown)));
		for (size_t i = 0; i < sl; i++)
			scheme_buf[i] = (char)tolower((unsigned char)host[i]);
		scheme_buf[sl] = '\0';
		*scheme = scheme_buf;
		host = sep + 3;
	}
	size_t hl = strlen(host);
	while (hl && host[hl - 1] == '/')
		hl--;
	char *h = strndup(host, hl);
	if (!h)
		return -ENOMEM;
	if (!host_ok(h)) {
		int rc = util_fail(-EINVAL,
				   "s3 store: endpoint '%s' is not [http[s]://]host[:port] "
				   "(no path, no user)",
				   s3_redact(endpoint && *endpoint ? endpoint : host, shown,
					     sizeof(shown)));
		free(h);
		return rc;
	}
	*host_out = h;
	return 0;
}

/* The strings c keeps (c->host set): copies, credentials, the URLs. */
static int conf_keep(struct s3_conf *c, const struct conf_in *in, const char *scheme)
{
	int rc;
	if ((rc = dup_or_fail(&c->scheme, scheme)) || (rc = dup_or_fail(&c->bucket, in->bucket)) ||
	    (rc = dup_or_fail(&c->region, in->region)) ||
	    (rc = dup_or_fail(&c->prefix, in->prefix)) || (rc = dup_or_fail(&c->ca_bundle, in->ca)))
		return rc;
	for (char *p = c->scheme; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	if (asprintf(&c->userpwd, "%s:%s", in->access, in->secret) < 0) {
		c->userpwd = NULL;
		return -ENOMEM;
	}
	if (in->token && *in->token &&
	    asprintf(&c->token_header, "x-amz-security-token: %s", in->token) < 0) {
		c->token_header = NULL;
		return -ENOMEM;
	}
	if (asprintf(&c->sigv4, "aws:amz:%s:s3", in->region) < 0) {
		c->sigv4 = NULL;
		return -ENOMEM;
	}
	int n = in->virt ? asprintf(&c->bucket_url, "%s://%s.%s/", c->scheme, in->bucket, c->host)
			 : asprintf(&c->bucket_url, "%s://%s/%s", c->scheme, c->host, in->bucket);
	if (n < 0) {
		c->bucket_url = NULL;
		return -ENOMEM;
	}
	n = in->virt ? asprintf(&c->base, "%s", c->bucket_url)
		     : asprintf(&c->base, "%s/", c->bucket_url);
	if (n < 0) {
		c->base = NULL;
		return -ENOMEM;
	}
	return 0;
}

int s3_conf_load(const struct hc_config *cfg, struct s3_conf *c)
{
	struct conf_in in = {0};
	char scheme_buf[8];
	const char *scheme;
	memset(c, 0, sizeof(*c));
	int rc = conf_read(cfg, &in);
	if (!rc)
		rc = conf_check(&in);
	if (!rc)
		rc = conf_endpoint(&in, scheme_buf, &scheme, &c->host);
	if (rc)
		return rc;
	c->virtual_hosted = in.virt;
	c->unsigned_payload = in.unsigned_payload;
	c->max_inflight = (unsigned)in.inflight;
	c->retries = (unsigned)in.retries;
	c->timeout_ms = (long)in.timeout;
	rc = conf_keep(c, &in, scheme);
	if (rc)
		s3_conf_free(c);
	return rc;
}
