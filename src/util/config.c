/*
 * Configuration: one declarative table of keys. Every layer's keys live in
 * config_table[] below, so docs/CONFIG.md, `hicache config` and the strict
 * checks all come from one place.
 *
 * Precedence: JSON (text or @file) > HICACHE_* environment > default. The
 * table is applied in three passes in the opposite order, each overwriting
 * the last; every pass validates what it reads and names the key on error.
 */
#define _GNU_SOURCE
#include "util/util.h"

#include <hicache/config.h>

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONFIG_FILE_MAX (16u << 20)

struct config_key {
	const char *name;
	enum hc_config_type type;
	const char *env;
	const char *def;            /* default, as environment text */
	double min, max;            /* INT and NUMBER bounds */
	const char *const *choices; /* STRING: allowed values (case-insensitive), NULL = any */
	const char *doc;
};

/* Credentials: their values are never shown (hc_config_foreach says
 * "(set)"), and no message quotes them. */
static const char *const secret_keys[] = {"access_key", "secret_key", "session_token", NULL};

/* An endpoint URL with any "user:password@" shown as "***@". */
static void redact_userinfo(const char *url, char *out, size_t size)
{
	const char *sep = strstr(url, "://");
	size_t start = sep ? (size_t)(sep - url) + 3 : 0;
	size_t end = start + strcspn(url + start, "/?#");
	const char *at = memrchr(url + start, '@', end - start);
	if (at)
		snprintf(out, size, "%.*s***@%s", (int)start, url, at + 1);
	else
		snprintf(out, size, "%s", url);
}

static bool key_is_secret(const char *name)
{
	for (const char *const *k = secret_keys; *k; k++)
		if (!strcmp(*k, name))
			return true;
	return false;
}

static const char *const huge_sizes[] = {"2MB", "1GB", "2M", "1G", NULL};
static const char *const huge_modes[] = {"off", "thp", "prefer", "required", NULL};
static const char *const io_engines[] = {"auto", "uring", "threads", NULL};
static const char *const s3_schemes[] = {"https", "http", NULL};

static const struct config_key config_table[] = {
	/* mem: host memory */
	{"hugepage_size", HC_CONFIG_STRING, "HICACHE_HUGEPAGE_SIZE", "2MB", 0, 0, huge_sizes,
	 "huge page size for host pools: 2MB or 1GB"},
	{"hugepage_mode", HC_CONFIG_STRING, "HICACHE_HUGEPAGE_MODE", "thp", 0, 0, huge_modes,
	 "thp (transparent huge pages where the kernel gives them) | off | prefer (hugetlb, "
	 "else THP with a warning) | required (hugetlb or fail)"},
	{"prefault_threads", HC_CONFIG_INT, "HICACHE_PREFAULT_THREADS", "0", 0, 1024, NULL,
	 "threads that pre-fault a host pool (0 = one per CPU, at most one per GiB)"},
	{"mlock", HC_CONFIG_BOOL, "HICACHE_MLOCK", "false", 0, 0, NULL,
	 "lock host pools in memory (needs RLIMIT_MEMLOCK)"},
	/* pool: host pool sizing */
	{"hicache_size", HC_CONFIG_NUMBER, "HICACHE_SIZE", "0", 0, 1e9, NULL,
	 "host pool size in GB (0 = use hicache_ratio)"},
	{"hicache_ratio", HC_CONFIG_NUMBER, "HICACHE_RATIO", "2.0", 0, 1e6, NULL,
	 "host pool size as a multiple of the device pool"},
	{"host_memory_reserve_gb", HC_CONFIG_NUMBER, "HICACHE_HOST_MEMORY_RESERVE_GB", "10", 0, 1e9,
	 NULL, "host memory (GB) a host pool must leave available"},
	/* store: L3 */
	{"verify_checksum", HC_CONFIG_BOOL, "HICACHE_VERIFY_CHECKSUM", "true", 0, 0, NULL,
	 "check the XXH3 checksum of every object read (the trailer is always checked)"},
	/* Names objects: every instance sharing a store must set it alike. */
	{"kv_one_object_max_bytes", HC_CONFIG_INT, "HICACHE_KV_ONE_OBJECT_MAX_BYTES", "0", 0,
	 1073741824, NULL,
	 "page_first(_direct) MHA KV pages of at most this many bytes are stored as one object, "
	 "not _k and _v (0 = never; changes names: set it alike on every instance of a store)"},
	/* store/file: the file backend */
	{"dirs", HC_CONFIG_LIST, "HICACHE_STORAGE_DIR", "", 0, 0, NULL,
	 "file backend base directories (pages spread over them by hash)"},
	{"use_direct_io", HC_CONFIG_BOOL, "HICACHE_USE_DIRECT_IO", "true", 0, 0, NULL,
	 "O_DIRECT for page files (probed at open; falls back to buffered I/O)"},
	{"io_engine", HC_CONFIG_STRING, "HICACHE_IO_ENGINE", "auto", 0, 0, io_engines,
	 "auto | uring (one io_uring submission per batch) | threads (worker pool)"},
	{"io_depth", HC_CONFIG_INT, "HICACHE_IO_DEPTH", "64", 1, 4096, NULL,
	 "pages per io_uring submission / in flight on the thread engine"},
	{"io_threads", HC_CONFIG_INT, "HICACHE_IO_THREADS", "8", 1, 256, NULL,
	 "worker threads of the thread engine"},
	{"object_block", HC_CONFIG_INT, "HICACHE_OBJECT_BLOCK", "0", 0, 4096, NULL,
	 "object padding and trailer block in bytes: 512, 1024, 2048 or 4096; 0 = the file "
	 "system's direct-I/O alignment (file backend), 512 (others)"},
	/* At most 1.8e10: the store converts GB * 1e9 to a 64-bit byte count. */
	{"capacity_gb", HC_CONFIG_NUMBER, "HICACHE_L3_CAPACITY_GB", "0", 0, 1.8e10, NULL,
	 "file backend capacity in GB; the cleaner deletes the oldest pages above it (0 = none)"},
	{"l3_cleaner_high_watermark", HC_CONFIG_NUMBER, "HICACHE_L3_CLEANER_HIGH_WATERMARK", "80",
	 1, 100, NULL, "file system use (%) at which the cleaner starts deleting the oldest pages"},
	{"l3_cleaner_low_watermark", HC_CONFIG_NUMBER, "HICACHE_L3_CLEANER_LOW_WATERMARK", "70", 0,
	 100, NULL, "file system use (%) the cleaner deletes down to"},
	{"l3_file_shared_group", HC_CONFIG_BOOL, "HICACHE_L3_FILE_SHARED_GROUP", "false", 0, 0,
	 NULL,
	 "file store: accept base dirs and buckets writable by their group (everyone in the "
	 "group is trusted) and make files group-readable"},
	{"l3_cleaner_interval_s", HC_CONFIG_NUMBER, "HICACHE_L3_CLEANER_INTERVAL_S", "30", 0, 86400,
	 NULL, "seconds between cleaner passes (0 = no cleaner thread)"},
	{"l3_file_temp_max_age_s", HC_CONFIG_NUMBER, "HICACHE_L3_FILE_TEMP_MAX_AGE_S", "600", 60,
	 3.1e7, NULL,
	 "file store: the cleaner removes temp files older than this (a dead "
	 "writer's)"},
	/* store/backend/mem: the in-process backend */
	{"mem_capacity_bytes", HC_CONFIG_INT, "HICACHE_MEM_CAPACITY_BYTES", "0", 0, 9e18, NULL,
	 "mem backend byte cap; least recently used objects go first (0 = none)"},
	/* store/s3: the S3 backend */
	{"endpoint", HC_CONFIG_STRING, "HICACHE_S3_ENDPOINT", "", 0, 0, NULL,
	 "s3 backend endpoint, [http[s]://]host[:port] (empty = s3.<region>.amazonaws.com)"},
	{"bucket", HC_CONFIG_STRING, "AWS_DEFAULT_BUCKET", "", 0, 0, NULL, "s3 backend bucket"},
	{"region", HC_CONFIG_STRING, "HICACHE_S3_REGION", "us-east-1", 0, 0, NULL,
	 "s3 backend region (signing scope)"},
	{"prefix", HC_CONFIG_STRING, "HICACHE_S3_PREFIX", "", 0, 0, NULL,
	 "s3 backend key prefix: object key = prefix + physical name"},
	{"access_key", HC_CONFIG_STRING, "AWS_ACCESS_KEY_ID", "", 0, 0, NULL,
	 "s3 backend access key id"},
	{"secret_key", HC_CONFIG_STRING, "AWS_SECRET_ACCESS_KEY", "", 0, 0, NULL,
	 "s3 backend secret access key"},
	{"session_token", HC_CONFIG_STRING, "AWS_SESSION_TOKEN", "", 0, 0, NULL,
	 "s3 backend session token of temporary credentials (empty = none)"},
	{"scheme", HC_CONFIG_STRING, "HICACHE_S3_SCHEME", "https", 0, 0, s3_schemes,
	 "s3 backend scheme when the endpoint has none: https or http"},
	{"ca_bundle", HC_CONFIG_STRING, "HICACHE_S3_CA_BUNDLE", "", 0, 0, NULL,
	 "s3 backend CA certificates file for https (empty = the system's)"},
	{"use_virtual_addressing", HC_CONFIG_BOOL, "HICACHE_S3_USE_VIRTUAL_ADDRESSING", "false", 0,
	 0, NULL, "s3 backend virtual-hosted URLs (bucket.host/key) instead of host/bucket/key"},
	{"unsigned_payload", HC_CONFIG_BOOL, "HICACHE_S3_UNSIGNED_PAYLOAD", "false", 0, 0, NULL,
	 "s3 backend: send UNSIGNED-PAYLOAD instead of each body's SHA-256"},
	{"max_inflight", HC_CONFIG_INT, "HICACHE_S3_MAX_INFLIGHT", "32", 1, 1024, NULL,
	 "s3 backend requests in flight per store call (keep-alive connections)"},
	{"timeout_ms", HC_CONFIG_INT, "HICACHE_S3_TIMEOUT_MS", "30000", 100, 3600000, NULL,
	 "s3 backend timeout of one request in ms (connecting: at most 3000)"},
	{"retries", HC_CONFIG_INT, "HICACHE_S3_RETRIES", "3", 0, 20, NULL,
	 "s3 backend retries of a timed-out, dropped, 5xx or 429 request (exponential backoff)"},
};

#define CONFIG_NKEYS (sizeof(config_table) / sizeof(config_table[0]))

struct config_value {
	enum hc_config_source source;
	bool b;
	int64_t i;
	double d;
	char *s;
	char **items;
	size_t nitems;
};

struct hc_config {
	struct config_value values[CONFIG_NKEYS];
};

static const struct config_key *find_key(const char *name, size_t *index)
{
	for (size_t i = 0; i < CONFIG_NKEYS; i++) {
		if (!strcmp(config_table[i].name, name)) {
			if (index)
				*index = i;
			return &config_table[i];
		}
	}
	return NULL;
}

static void value_clear(struct config_value *v)
{
	free(v->s);
	v->s = NULL;
	for (size_t i = 0; i < v->nitems; i++)
		free(v->items[i]);
	free(v->items);
	v->items = NULL;
	v->nitems = 0;
}

static const char *type_name(enum hc_config_type t)
{
	switch (t) {
	case HC_CONFIG_BOOL:
		return "a boolean";
	case HC_CONFIG_INT:
		return "an integer";
	case HC_CONFIG_NUMBER:
		return "a number";
	case HC_CONFIG_STRING:
		return "a string";
	case HC_CONFIG_LIST:
		return "a list of strings";
	}
	return "?";
}

static int check_range(const struct config_key *k, double x, const char *origin)
{
	if (!(x >= k->min && x <= k->max))
		return util_fail(-EINVAL, "config key '%s' (%s): %g is out of range [%g, %g]",
				 k->name, origin, x, k->min, k->max);
	return 0;
}

static int check_choice(const struct config_key *k, const char *s, const char *origin)
{
	if (!k->choices)
		return 0;
	for (const char *const *c = k->choices; *c; c++)
		if (!strcasecmp(*c, s))
			return 0;
	char allowed[256] = "";
	size_t used = 0;
	for (const char *const *c = k->choices; *c && used < sizeof(allowed); c++)
		used += (size_t)snprintf(allowed + used, sizeof(allowed) - used, "%s%s",
					 c == k->choices ? "" : "|", *c);
	return util_fail(-EINVAL, "config key '%s' (%s): '%s' is not one of %s", k->name, origin, s,
			 allowed);
}

static int list_push(struct config_value *v, const char *item, size_t len)
{
	char **grown = realloc(v->items, (v->nitems + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	v->items = grown;
	v->items[v->nitems] = strndup(item, len);
	if (!v->items[v->nitems])
		return -ENOMEM;
	v->nitems++;
	return 0;
}

/* A comma-separated list; items trimmed, empty items dropped. */
static int list_from_text(struct config_value *v, const char *text)
{
	const char *p = text;
	while (*p) {
		const char *end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		const char *a = p, *b = end;
		while (a < b && isspace((unsigned char)*a))
			a++;
		while (b > a && isspace((unsigned char)b[-1]))
			b--;
		if (b > a) {
			int rc = list_push(v, a, (size_t)(b - a));
			if (rc)
				return rc;
		}
		p = *end ? end + 1 : end;
	}
	return 0;
}

/* Parse environment-style text into a fresh value (out is cleared first). */
static int value_from_text(const struct config_key *k, const char *text, const char *origin,
			   struct config_value *out)
{
	memset(out, 0, sizeof(*out));
	switch (k->type) {
	case HC_CONFIG_BOOL: {
		static const char *const yes[] = {"1", "true", "yes", "on"};
		static const char *const no[] = {"0", "false", "no", "off"};
		for (size_t i = 0; i < 4; i++) {
			if (!strcasecmp(text, yes[i])) {
				out->b = true;
				return 0;
			}
			if (!strcasecmp(text, no[i])) {
				out->b = false;
				return 0;
			}
		}
		return util_fail(-EINVAL,
				 "config key '%s' (%s): '%s' is not a boolean "
				 "(true|false|1|0|yes|no|on|off)",
				 k->name, origin, text);
	}
	case HC_CONFIG_INT: {
		char *end = NULL;
		errno = 0;
		long long x = strtoll(text, &end, 10);
		if (errno || end == text || *end != '\0')
			return util_fail(-EINVAL, "config key '%s' (%s): '%s' is not an integer",
					 k->name, origin, text);
		out->i = x;
		return check_range(k, (double)x, origin);
	}
	case HC_CONFIG_NUMBER: {
		char *end = NULL;
		errno = 0;
		double x = strtod(text, &end);
		if (errno || end == text || *end != '\0' || !isfinite(x))
			return util_fail(-EINVAL, "config key '%s' (%s): '%s' is not a number",
					 k->name, origin, text);
		out->d = x;
		return check_range(k, x, origin);
	}
	case HC_CONFIG_STRING: {
		int rc = check_choice(k, text, origin);
		if (rc)
			return rc;
		out->s = strdup(text);
		return out->s ? 0 : -ENOMEM;
	}
	case HC_CONFIG_LIST: {
		int rc = list_from_text(out, text);
		if (rc)
			value_clear(out);
		return rc;
	}
	}
	return -EINVAL;
}

static int value_from_json(const struct config_key *k, const cJSON *item, struct config_value *out)
{
	memset(out, 0, sizeof(*out));
	bool ok = false;
	switch (k->type) {
	case HC_CONFIG_BOOL:
		ok = cJSON_IsBool(item);
		if (ok)
			out->b = cJSON_IsTrue(item);
		break;
	case HC_CONFIG_INT:
		/* Integral and exactly representable, else "1.5" would truncate. */
		ok = cJSON_IsNumber(item) && item->valuedouble == floor(item->valuedouble) &&
		     fabs(item->valuedouble) <= 9007199254740992.0;
		if (ok) {
			out->i = (int64_t)item->valuedouble;
			return check_range(k, item->valuedouble, "JSON");
		}
		break;
	case HC_CONFIG_NUMBER:
		ok = cJSON_IsNumber(item);
		if (ok) {
			out->d = item->valuedouble;
			return check_range(k, out->d, "JSON");
		}
		break;
	case HC_CONFIG_STRING:
		ok = cJSON_IsString(item);
		if (ok) {
			int rc = check_choice(k, item->valuestring, "JSON");
			if (rc)
				return rc;
			out->s = strdup(item->valuestring);
			return out->s ? 0 : -ENOMEM;
		}
		break;
	case HC_CONFIG_LIST:
		if (cJSON_IsString(item)) {
			int rc = list_from_text(out, item->valuestring);
			if (rc)
				value_clear(out);
			return rc;
		}
		if (cJSON_IsArray(item)) {
			const cJSON *e;
			cJSON_ArrayForEach(e, item) {
				if (!cJSON_IsString(e)) {
					value_clear(out);
					return util_fail(-EINVAL,
							 "config key '%s' (JSON): every "
							 "item must be a string",
							 k->name);
				}
				int rc = list_push(out, e->valuestring, strlen(e->valuestring));
				if (rc) {
					value_clear(out);
					return rc;
				}
			}
			return 0;
		}
		break;
	}
	if (!ok)
		return util_fail(-EINVAL, "config key '%s' (JSON): expected %s", k->name,
				 type_name(k->type));
	return 0;
}

static void value_replace(struct config_value *dst, struct config_value *src,
			  enum hc_config_source source)
{
	value_clear(dst);
	*dst = *src;
	dst->source = source;
	memset(src, 0, sizeof(*src));
}

static int read_file(const char *path, char **out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int rc = -errno;
		return util_fail(rc, "config file '%s': %s", path, hc_strerror(rc));
	}
	struct stat st;
	int rc = 0;
	char *buf = NULL;
	if (fstat(fd, &st) != 0) {
		rc = util_fail(-errno, "config file '%s': cannot stat", path);
		goto out;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > CONFIG_FILE_MAX) {
		rc = util_fail(-EINVAL, "config file '%s': not a regular file of at most %u bytes",
			       path, CONFIG_FILE_MAX);
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		rc = -ENOMEM;
		goto out;
	}
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = util_fail(n < 0 ? -errno : -EIO, "config file '%s': read failed",
				       path);
			goto out;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	*out = buf;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return rc;
}

static int apply_json(struct hc_config *cfg, const char *json)
{
	char *owned = NULL;
	const char *origin = "JSON text";
	if (json[0] == '@') {
		int rc = read_file(json + 1, &owned);
		if (rc)
			return rc;
		json = owned;
		origin = "JSON file";
	}
	const char *err_at = NULL;
	cJSON *root = cJSON_ParseWithOpts(json, &err_at, true);
	int rc = 0;
	if (!root) {
		size_t off = err_at ? (size_t)(err_at - json) : 0;
		rc = util_fail(-EINVAL, "config: %s is not valid JSON (error near byte %zu)",
			       origin, off);
		goto out;
	}
	if (!cJSON_IsObject(root)) {
		rc = util_fail(-EINVAL, "config: %s must be one JSON object", origin);
		goto out;
	}
	bool seen[CONFIG_NKEYS] = {false};
	const cJSON *item;
	cJSON_ArrayForEach(item, root) {
		size_t idx;
		const struct config_key *k = find_key(item->string, &idx);
		if (!k) {
			rc = util_fail(-EINVAL, "config: unknown key '%s'", item->string);
			goto out;
		}
		if (seen[idx]) {
			rc = util_fail(-EINVAL, "config: key '%s' given twice", item->string);
			goto out;
		}
		seen[idx] = true;
		struct config_value v;
		rc = value_from_json(k, item, &v);
		if (rc)
			goto out;
		value_replace(&cfg->values[idx], &v, HC_CONFIG_FROM_JSON);
	}
out:
	cJSON_Delete(root);
	free(owned);
	return rc;
}

void hc_config_destroy(struct hc_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < CONFIG_NKEYS; i++)
		value_clear(&cfg->values[i]);
	free(cfg);
}

int hc_config_create(const char *json, struct hc_config **out)
{
	if (!out)
		return util_fail(-EINVAL, "hc_config_create: out is NULL");
	*out = NULL;
	struct hc_config *cfg = calloc(1, sizeof(*cfg));
	if (!cfg)
		return -ENOMEM;
	int rc = 0;
	for (size_t i = 0; i < CONFIG_NKEYS && !rc; i++) {
		const struct config_key *k = &config_table[i];
		struct config_value v;
		rc = value_from_text(k, k->def, "default", &v);
		if (!rc)
			value_replace(&cfg->values[i], &v, HC_CONFIG_FROM_DEFAULT);
	}
	for (size_t i = 0; i < CONFIG_NKEYS && !rc; i++) {
		const struct config_key *k = &config_table[i];
		const char *env = k->env ? getenv(k->env) : NULL;
		if (!env || !*env)
			continue;
		char origin[96];
		snprintf(origin, sizeof(origin), "environment %s", k->env);
		struct config_value v;
		rc = value_from_text(k, env, origin, &v);
		if (!rc)
			value_replace(&cfg->values[i], &v, HC_CONFIG_FROM_ENV);
	}
	if (!rc && json && *json)
		rc = apply_json(cfg, json);
	if (rc) {
		hc_config_destroy(cfg);
		return rc;
	}
	*out = cfg;
	return 0;
}

int hc_config_set(struct hc_config *cfg, const char *key, const char *value)
{
	if (!cfg || !key || !value)
		return util_fail(-EINVAL, "hc_config_set: NULL argument");
	size_t idx;
	const struct config_key *k = find_key(key, &idx);
	if (!k)
		return util_fail(-ENOENT, "config: unknown key '%s'", key);
	struct config_value v;
	int rc = value_from_text(k, value, "set", &v);
	if (rc)
		return rc;
	value_replace(&cfg->values[idx], &v, HC_CONFIG_FROM_SET);
	return 0;
}

static int lookup(const struct hc_config *cfg, const char *key, enum hc_config_type type,
		  const struct config_value **out)
{
	if (!cfg || !key)
		return util_fail(-EINVAL, "config getter: NULL argument");
	size_t idx;
	const struct config_key *k = find_key(key, &idx);
	if (!k)
		return util_fail(-ENOENT, "config: unknown key '%s'", key);
	if (k->type != type)
		return util_fail(-EINVAL, "config key '%s' is %s, not %s", key, type_name(k->type),
				 type_name(type));
	*out = &cfg->values[idx];
	return 0;
}

int hc_config_get_bool(const struct hc_config *cfg, const char *key, bool *out)
{
	const struct config_value *v;
	int rc = lookup(cfg, key, HC_CONFIG_BOOL, &v);
	if (!rc && out)
		*out = v->b;
	return rc;
}

int hc_config_get_int(const struct hc_config *cfg, const char *key, int64_t *out)
{
	const struct config_value *v;
	int rc = lookup(cfg, key, HC_CONFIG_INT, &v);
	if (!rc && out)
		*out = v->i;
	return rc;
}

int hc_config_get_number(const struct hc_config *cfg, const char *key, double *out)
{
	const struct config_value *v;
	int rc = lookup(cfg, key, HC_CONFIG_NUMBER, &v);
	if (!rc && out)
		*out = v->d;
	return rc;
}

int hc_config_get_string(const struct hc_config *cfg, const char *key, const char **out)
{
	const struct config_value *v;
	int rc = lookup(cfg, key, HC_CONFIG_STRING, &v);
	if (!rc && out)
		*out = v->s;
	return rc;
}

int hc_config_get_list(const struct hc_config *cfg, const char *key, const char *const **items,
		       size_t *count)
{
	const struct config_value *v;
	int rc = lookup(cfg, key, HC_CONFIG_LIST, &v);
	if (!rc) {
		if (items)
			*items = (const char *const *)v->items;
		if (count)
			*count = v->nitems;
	}
	return rc;
}

void hc_config_foreach(const struct hc_config *cfg, hc_config_visit_fn fn, void *arg)
{
	if (!cfg || !fn)
		return;
	for (size_t i = 0; i < CONFIG_NKEYS; i++) {
		const struct config_key *k = &config_table[i];
		const struct config_value *v = &cfg->values[i];
		char text[1024] = "";
		switch (k->type) {
		case HC_CONFIG_BOOL:
			snprintf(text, sizeof(text), "%s", v->b ? "true" : "false");
			break;
		case HC_CONFIG_INT:
			snprintf(text, sizeof(text), "%lld", (long long)v->i);
			break;
		case HC_CONFIG_NUMBER:
			snprintf(text, sizeof(text), "%g", v->d);
			break;
		case HC_CONFIG_STRING:
			if (key_is_secret(k->name))
				snprintf(text, sizeof(text), "%s", v->s && *v->s ? "(set)" : "");
			else if (v->s && !strcmp(k->name, "endpoint"))
				redact_userinfo(v->s, text, sizeof(text));
			else
				snprintf(text, sizeof(text), "%s", v->s ? v->s : "");
			break;
		case HC_CONFIG_LIST: {
			size_t used = 0;
			for (size_t j = 0; j < v->nitems && used < sizeof(text); j++)
				used += (size_t)snprintf(text + used, sizeof(text) - used, "%s%s",
							 j ? "," : "", v->items[j]);
			break;
		}
		}
		fn(k->name, k->type, k->env, text, v->source, k->doc, arg);
	}
}
