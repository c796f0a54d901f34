/*
 * Page keys: the SHA-256 chain over full pages of token ids.
 *
 *   seed ──┐        key[0] ──┐        key[1] ──┐
 *          v                 v                 v
 *   SHA256(seed|page0) SHA256(key0|page1) SHA256(key1|page2) ...
 *
 * The bytes hashed must match SGLang HiCache exactly (keys are shared with
 * it), so every token goes in as 4-byte little-endian. On little-endian
 * hosts that is the array itself: one update per page, no copy.
 *
 * Speed: the hash runs on every prefetch of every request, over the whole
 * unmatched prompt tail. One context on the stack serves a whole chain call,
 * nothing is allocated per page, and a page costs an init, two updates and
 * a final: at 64-token pages about 85% of raw SHA-256 speed, the rest being
 * the padding block every page needs.
 */
#define _GNU_SOURCE
#include "util/util.h"

#include <hicache/key.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* The low-level SHA256_* calls are deprecated in OpenSSL 3 but still the
 * fastest route to the block functions; see hc_key_chain(). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

/* Fetched once: an implicit fetch (EVP_sha256()) at every init costs a
 * provider lookup per page. Never freed; it lives as long as libcrypto. */
static EVP_MD *key_sha256_md;
static pthread_once_t key_sha256_once = PTHREAD_ONCE_INIT;

static void key_sha256_fetch(void)
{
	key_sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
	if (!key_sha256_md)
		ERR_clear_error();
}

static const EVP_MD *key_sha256(void)
{
	pthread_once(&key_sha256_once, key_sha256_fetch);
	return key_sha256_md ? key_sha256_md : EVP_sha256();
}

static int key_crypto_fail(const char *what)
{
	char msg[256];
	unsigned long e = ERR_get_error();

	if (e)
		ERR_error_string_n(e, msg, sizeof(msg));
	else
		snprintf(msg, sizeof(msg), "no detail from libcrypto");
	ERR_clear_error();
	return util_fail(-EIO, "key: SHA-256 %s failed: %s", what, msg);
}

#define KEY_NS_TAG "sglang-cache-namespace-v1"

/* f(absent) = 0x00, f(s) = 0x01 || u64le(len) || s. */
static bool key_seed_part(EVP_MD_CTX *ctx, const char *s)
{
	uint8_t hdr[9];
	size_t n;

	if (!s) {
		hdr[0] = 0;
		return EVP_DigestUpdate(ctx, hdr, 1) == 1;
	}
	n = strlen(s);
	hdr[0] = 1;
	for (int i = 0; i < 8; i++)
		hdr[1 + i] = (uint8_t)((uint64_t)n >> (8 * i));
	return EVP_DigestUpdate(ctx, hdr, sizeof(hdr)) == 1 && EVP_DigestUpdate(ctx, s, n) == 1;
}

int hc_key_seed(const char *extra_key, const char *cache_salt, struct hc_key *out)
{
	EVP_MD_CTX *ctx;
	int rc = 0;

	if (!out)
		return util_fail(-EINVAL, "key: seed: NULL output key");
	ctx = EVP_MD_CTX_new();
	if (!ctx)
		return key_crypto_fail("context allocation");
	if (EVP_DigestInit_ex2(ctx, key_sha256(), NULL) != 1 ||
	    EVP_DigestUpdate(ctx, KEY_NS_TAG, sizeof(KEY_NS_TAG) - 1) != 1 ||
	    !key_seed_part(ctx, extra_key) || !key_seed_part(ctx, cache_salt) ||
	    EVP_DigestFinal_ex(ctx, out->bytes, NULL) != 1)
		rc = key_crypto_fail("namespace seed");
	EVP_MD_CTX_free(ctx);
	return rc;
}

/*
 * One page hash: init, [prior], tokens, final. Where the low-level SHA256_*
 * functions exist they are used: they run the same SHA-NI/AVX block code as
 * EVP without the provider dispatch, which at 256-byte pages is a quarter
 * of the time. OpenSSL builds without deprecated APIs get EVP.
 */
#if !defined(OPENSSL_NO_DEPRECATED_3_0)
#define KEY_SHA_LOWLEVEL 1
typedef SHA256_CTX key_sha_ctx;
#define key_sha_update(c, p, n) (SHA256_Update((c), (p), (n)) == 1)
#else
#define KEY_SHA_LOWLEVEL 0
typedef EVP_MD_CTX *key_sha_ctx;
#define key_sha_update(c, p, n) (EVP_DigestUpdate(*(c), (p), (n)) == 1)
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static bool key_update_tokens(key_sha_ctx *ctx, const uint32_t *tok, uint32_t n)
{
	return key_sha_update(ctx, tok, (size_t)n * sizeof(*tok));
}
#else
static bool key_update_tokens(key_sha_ctx *ctx, const uint32_t *tok, uint32_t n)
{
	uint8_t buf[4 * 256];

	while (n) {
		uint32_t m = n < 256 ? n : 256;
		for (uint32_t i = 0; i < m; i++) {
			buf[4 * i + 0] = (uint8_t)tok[i];
			buf[4 * i + 1] = (uint8_t)(tok[i] >> 8);
			buf[4 * i + 2] = (uint8_t)(tok[i] >> 16);
			buf[4 * i + 3] = (uint8_t)(tok[i] >> 24);
		}
		if (!key_sha_update(ctx, buf, 4 * (size_t)m))
			return false;
		tok += m;
		n -= m;
	}
	return true;
}
#endif

int64_t hc_key_chain(const struct hc_key *prior, const uint32_t *tokens, size_t ntokens,
		     uint32_t page_size, struct hc_key *out, size_t max_keys)
{
	key_sha_ctx ctx;
	size_t n;
	int64_t rc;

	if (!page_size)
		return util_fail(-EINVAL, "key: chain: page size is 0");
	if (!tokens || !out)
		return util_fail(-EINVAL, "key: chain: NULL %s", tokens ? "output keys" : "tokens");
	n = ntokens / page_size;
	if (n > max_keys)
		n = max_keys;
	if (n > INT64_MAX)
		n = INT64_MAX;
	if (!n)
		return 0;
	rc = (int64_t)n;

#if KEY_SHA_LOWLEVEL
	for (size_t i = 0; i < n; i++) {
		/* out[i] is written only by the final, after prior has been read,
		 * so prior may alias out[i]. */
		if (SHA256_Init(&ctx) != 1 ||
		    (prior && !key_sha_update(&ctx, prior->bytes, HC_KEY_BYTES)) ||
		    !key_update_tokens(&ctx, tokens + i * page_size, page_size) ||
		    SHA256_Final(out[i].bytes, &ctx) != 1) {
			rc = key_crypto_fail("page hash");
			break;
		}
		prior = &out[i];
	}
	/* The context still holds prompt bytes of the last page. */
	OPENSSL_cleanse(&ctx, sizeof(ctx));
#else
	const EVP_MD *md = key_sha256();
	ctx = EVP_MD_CTX_new();
	if (!ctx)
		return key_crypto_fail("context allocation");
	for (size_t i = 0; i < n; i++) {
		if (EVP_DigestInit_ex2(ctx, md, NULL) != 1 ||
		    (prior && !key_sha_update(&ctx, prior->bytes, HC_KEY_BYTES)) ||
		    !key_update_tokens(&ctx, tokens + i * page_size, page_size) ||
		    EVP_DigestFinal_ex(ctx, out[i].bytes, NULL) != 1) {
			rc = key_crypto_fail("page hash");
			break;
		}
		prior = &out[i];
	}
	EVP_MD_CTX_free(ctx);
#endif
	return rc;
}

void hc_key_to_hex(const struct hc_key *key, char out[HC_KEY_HEX_LEN + 1])
{
	static const char digits[] = "0123456789abcdef";

	if (!out)
		return;
	if (!key) {
		out[0] = '\0';
		return;
	}
	for (int i = 0; i < HC_KEY_BYTES; i++) {
		out[2 * i] = digits[key->bytes[i] >> 4];
		out[2 * i + 1] = digits[key->bytes[i] & 0xf];
	}
	out[HC_KEY_HEX_LEN] = '\0';
}

static int key_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Exactly 64 digits: a longer string is not a key, and accepting a prefix
 * would let "<hex>garbage" pass as a valid name. out is left untouched on
 * failure. */
int hc_key_from_hex(const char *hex, struct hc_key *out)
{
	struct hc_key k;

	if (!hex || !out)
		return util_fail(-EINVAL, "key: from_hex: NULL %s", hex ? "output key" : "text");
	for (int i = 0; i < HC_KEY_BYTES; i++) {
		int hi = key_hex_digit(hex[2 * i]);
		int lo = hi < 0 ? -1 : key_hex_digit(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return util_fail(-EINVAL, "key: hex key: no hex digit at position %d of %d",
					 2 * i + (hi >= 0), HC_KEY_HEX_LEN);
		k.bytes[i] = (uint8_t)(hi << 4 | lo);
	}
	if (hex[HC_KEY_HEX_LEN] != '\0')
		return util_fail(-EINVAL, "key: hex key longer than %d digits", HC_KEY_HEX_LEN);
	*out = k;
	return 0;
}
