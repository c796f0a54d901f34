/*
 * hicache — configuration.
 *
 * One declarative table of keys (docs/CONFIG.md lists them all). A value
 * comes from, in order of precedence:
 *   1. the JSON object given to hc_config_create(): JSON text, or
 *      "@path/to/file.json" to read it from a file;
 *   2. the key's environment variable (HICACHE_*; the S3 credentials and
 *      bucket also read the standard AWS_* names);
 *   3. the key's default.
 * An unknown key, a value of the wrong type or out of bounds (in the JSON or
 * in the environment) is an error whose message names the key (see
 * hc_last_error()).
 *
 * Thread-safety: a config is immutable after hc_config_create() except
 * through hc_config_set(); concurrent getters are safe, a setter must not
 * race with anything else on the same config.
 */
#ifndef HICACHE_CONFIG_H
#define HICACHE_CONFIG_H

#include <hicache/common.h>

#ifdef __cplusplus
extern "C" {
#endif

struct hc_config;

enum hc_config_type {
	HC_CONFIG_BOOL,
	HC_CONFIG_INT,    /* int64 with bounds */
	HC_CONFIG_NUMBER, /* double with bounds */
	HC_CONFIG_STRING,
	HC_CONFIG_LIST, /* JSON array of strings, or a comma-separated string */
};

/* Where the effective value of a key came from. */
enum hc_config_source {
	HC_CONFIG_FROM_DEFAULT,
	HC_CONFIG_FROM_ENV,
	HC_CONFIG_FROM_JSON,
	HC_CONFIG_FROM_SET,
};

/* Create a config from JSON, the environment and the defaults (in that
 * order of precedence, above). json: NULL or "" for none, JSON text of one
 * object, or "@file.json".
 * Returns 0, -EINVAL (bad JSON, unknown key, wrong type, out of bounds),
 * -ENOENT/-EACCES (file), -ENOMEM. *out is NULL on failure. */
HC_API int hc_config_create(const char *json, struct hc_config **out);
/* Free a config. Accepts NULL. */
HC_API void hc_config_destroy(struct hc_config *cfg);

/* Set one key from text, as if it had come from the environment (the text
 * is parsed by the key's type). Returns 0, -ENOENT (unknown key), -EINVAL. */
HC_API int hc_config_set(struct hc_config *cfg, const char *key, const char *value);

/* The effective value of a key of that type. Getters return 0, -ENOENT
 * (unknown key) or -EINVAL (key has another type). */
HC_API int hc_config_get_bool(const struct hc_config *cfg, const char *key, bool *out);
HC_API int hc_config_get_int(const struct hc_config *cfg, const char *key, int64_t *out);
HC_API int hc_config_get_number(const struct hc_config *cfg, const char *key, double *out);
/* The effective value of a string key. *out points into cfg; valid until
 * cfg is destroyed or the key is set. Returns 0, -ENOENT (unknown key) or
 * -EINVAL (key has another type). */
HC_API int hc_config_get_string(const struct hc_config *cfg, const char *key, const char **out);
/* The effective value of a list key. *items points into cfg (an array of
 * *count strings); valid until cfg is destroyed or the key is set. Returns
 * 0, -ENOENT (unknown key) or -EINVAL (key has another type). */
HC_API int hc_config_get_list(const struct hc_config *cfg, const char *key,
			      const char *const **items, size_t *count);

/* Describe every key: called once per key in table order with its name,
 * type, environment variable, effective value as text, source and one-line
 * documentation. Strings are valid during the call only. */
typedef void (*hc_config_visit_fn)(const char *key, enum hc_config_type type, const char *env,
				   const char *value, enum hc_config_source source, const char *doc,
				   void *arg);
/* Call fn for every key, as hc_config_visit_fn describes, with arg.
 * Nothing happens when cfg or fn is NULL. */
HC_API void hc_config_foreach(const struct hc_config *cfg, hc_config_visit_fn fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* HICACHE_CONFIG_H */
