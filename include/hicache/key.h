/*
 * hicache — page keys, physical names and routing.
 *
 * A page key is a SHA-256 chain over the token ids of full pages:
 *
 *   key[0] = SHA-256( [seed] || tok[0] || ... || tok[P-1] )
 *   key[i] = SHA-256( key[i-1] || tok[i*P] || ... || tok[i*P+P-1] )
 *
 * each token as 4-byte little-endian unsigned, P the page size in tokens.
 * The optional namespace seed (cache salt / extra key) is
 *   SHA-256("sglang-cache-namespace-v1" || f(extra_key) || f(cache_salt)),
 *   f(absent) = 0x00, f(s) = 0x01 || u64le(len(s)) || s.
 * Byte-identical to SGLang HiCache, so keys are shared with it.
 *
 * Physical name of one stored object:
 *   <64 hex digits><suffix><component>
 *   suffix    = "_<model>" (rank-replicated pools: MLA)
 *             | "_<model>_<tp_rank>_<tp_size>" (otherwise)
 *   component = "" | "_k" | "_v" | "_mamba_temporal" | "_mamba_conv_<i>"
 *             | "_<pool>_k" | "_<pool>_v" | "_<pool>_<i>" | "_<pool>"
 * Model names are sanitised so that a name never leaves its directory.
 *
 * Routing: h = XXH3-64(physical name); bucket = h & 0xff (two lowercase hex
 * digits), disk = (h >> 16) % number of base dirs.
 *
 * Thread-safety: every function here is pure and thread-safe.
 */
#ifndef HICACHE_KEY_H
#define HICACHE_KEY_H

#include <hicache/common.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HC_KEY_BYTES 32
#define HC_KEY_HEX_LEN 64
/* Longest sanitised model name. Keeps every physical name under NAME_MAX. */
#define HC_MODEL_NAME_MAX 120
/* Longest pool name ([a-z0-9_], not empty). */
#define HC_POOL_NAME_MAX 32
/* Buffer size that holds any physical name with its NUL. */
#define HC_NAME_MAX 256
/* Buffer size that holds any suffix with its NUL. */
#define HC_SUFFIX_MAX 176

struct hc_key {
	uint8_t bytes[HC_KEY_BYTES];
};

/* Namespace seed from an optional extra key and an optional cache salt
 * (NULL = absent; a present empty string is not absent). Returns 0 or
 * -EINVAL (out NULL) / -EIO (libcrypto failed). */
HC_API int hc_key_seed(const char *extra_key, const char *cache_salt, struct hc_key *out);

/* Chain keys over the full pages of tokens[0..ntokens): writes
 * min(ntokens / page_size, max_keys) keys to out. prior is the key of the
 * page before tokens[0] (or a namespace seed for the first page), NULL for
 * none. Returns the number of keys written, or -EINVAL (page_size 0, NULL
 * pointers) / -EIO. */
HC_API int64_t hc_key_chain(const struct hc_key *prior, const uint32_t *tokens, size_t ntokens,
			    uint32_t page_size, struct hc_key *out, size_t max_keys);

/* Write the key as 64 lowercase hex digits and a NUL. */
HC_API void hc_key_to_hex(const struct hc_key *key, char out[HC_KEY_HEX_LEN + 1]);
/* Parse 64 hex digits (either case). Returns 0 or -EINVAL. */
HC_API int hc_key_from_hex(const char *hex, struct hc_key *out);

/* Sanitise a model name for use in a file or object name: '/' becomes '-',
 * every byte outside [A-Za-z0-9._-] becomes '_', a leading '.' becomes '_',
 * and a '.' right after another '.' becomes '_' (so no "..").
 * Returns the length written, -EINVAL (NULL or empty model), -ENAMETOOLONG
 * (longer than HC_MODEL_NAME_MAX) or -ENOSPC (out too small). */
HC_API int hc_key_sanitize_model(const char *model, char *out, size_t out_size);

/* The name suffix of a model and rank: "_<model>" when rank_replicated (MLA) or tp_size is 0, else
 * "_<model>_<tp_rank>_<tp_size>"; model sanitised. model NULL or "" gives
 * no model part ("" or "_<rank>_<size>"). Returns the length, or -EINVAL
 * (tp_rank >= tp_size), -ENAMETOOLONG, -ENOSPC. */
HC_API int hc_key_suffix(const char *model, uint32_t tp_rank, uint32_t tp_size,
			 bool rank_replicated, char *out, size_t out_size);

/* Is a pool name valid ([a-z0-9_]{1,HC_POOL_NAME_MAX})? */
HC_API bool hc_key_pool_name_ok(const char *pool);

/* Which object of a page. */
enum hc_component {
	HC_COMP_PLAIN,          /* "" : the whole flat page (KV layer_first, page_head) */
	HC_COMP_K,              /* "_k" (also MLA zero-copy) */
	HC_COMP_V,              /* "_v" */
	HC_COMP_MAMBA_TEMPORAL, /* "_mamba_temporal" */
	HC_COMP_MAMBA_CONV,     /* "_mamba_conv_<index>" */
	HC_COMP_POOL,           /* "_<pool>" : one-object side pool, or anchor marker */
	HC_COMP_POOL_K,         /* "_<pool>_k" */
	HC_COMP_POOL_V,         /* "_<pool>_v" */
	HC_COMP_POOL_INDEX,     /* "_<pool>_<index>" */
};

/* The component text ("_k", "_mamba_conv_2", "_swa_v", ...). pool is used
 * by the HC_COMP_POOL* kinds, index by HC_COMP_MAMBA_CONV and
 * HC_COMP_POOL_INDEX. Returns the length, or -EINVAL (bad kind, missing or
 * invalid pool name) / -ENOSPC. */
HC_API int hc_key_component(enum hc_component kind, const char *pool, uint32_t index, char *out,
			    size_t out_size);

/* The physical name of one object: "<hex><suffix><component>". suffix
 * and component may be NULL or "".
 * Returns the length, -EINVAL (NULL key or out, '/' in suffix or
 * component), -ENAMETOOLONG (longer than HC_NAME_MAX - 1) or -ENOSPC. */
HC_API int hc_key_name(const struct hc_key *key, const char *suffix, const char *component,
		       char *out, size_t out_size);

/* XXH3-64 of the NUL-terminated physical name. */
HC_API uint64_t hc_key_route_hash(const char *name);
/* Bucket index 0..255 of a route hash. */
HC_API unsigned hc_key_bucket(uint64_t route_hash);
/* Bucket as two lowercase hex digits and a NUL. */
HC_API void hc_key_bucket_hex(uint64_t route_hash, char out[3]);
/* Index of the base dir, 0..ndirs-1 (0 when ndirs is 0). */
HC_API unsigned hc_key_disk(uint64_t route_hash, unsigned ndirs);

#ifdef __cplusplus
}
#endif

#endif /* HICACHE_KEY_H */
