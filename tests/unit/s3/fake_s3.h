/*
 * The S3 backend opened straight (its ops table, no store core) against
 * the fake server of fake_http.h: bucket "fake", prefix "p/", made-up
 * keys. A test sees each object's result as the backend gives it.
 */
#ifndef HC_FAKE_S3_H
#define HC_FAKE_S3_H

#include "fake_http.h"
#include "store/backend.h"

#include <hicache/config.h>
#include <hicache/common.h>
#include <hicache/log.h>

#include <fcntl.h>
#include <time.h>

/* Backend on s; extra: more JSON members or NULL. Returns open's code. */
static inline int fs3_open(const struct fh_server *s, const char *extra, void **be)
{
	char json[1024], ep[64];
	fh_endpoint(s, ep, sizeof(ep));
	snprintf(json, sizeof(json),
		 "{\"endpoint\": \"%s\", \"bucket\": \"fake\", \"prefix\": \"p/\", \"access_key\": "
		 "\"AK\", \"secret_key\": \"SK\", \"region\": \"us-east-1\"%s%s}",
		 ep, extra ? ", " : "", extra ? extra : "");
	struct hc_config *cfg;
	int rc = hc_config_create(json, &cfg);
	if (rc)
		return rc;
	rc = store_s3_ops.open(cfg, be);
	hc_config_destroy(cfg);
	return rc;
}

static inline int64_t fs3_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One object of len bytes into buf; returns its result. */
static inline int fs3_get(void *be, const char *name, void *buf, size_t len)
{
	struct iovec v = {buf, len};
	struct store_obj o = {.name = name, .iov = &v, .iovcnt = 1, .len = len, .result = 1};
	int rc = store_s3_ops.get(be, &o, 1);
	return rc ? rc : o.result;
}

static inline int fs3_put(void *be, const char *name, const void *buf, size_t len)
{
	struct iovec v = {(void *)buf, len};
	struct store_obj o = {.name = name, .iov = &v, .iovcnt = 1, .len = len, .result = 1};
	int rc = store_s3_ops.put(be, &o, 1);
	return rc ? rc : o.result;
}

static inline int fs3_exists(void *be, const char *name, size_t len)
{
	struct store_obj o = {.name = name, .len = len, .result = 1};
	int64_t rc = store_s3_ops.exists(be, &o, 1, false);
	return rc < 0 ? (int)rc : o.result;
}

static inline unsigned fs3_count_fds(void)
{
	unsigned n = 0;
	for (int fd = 0; fd < 4096; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

#endif
