/*
 * Physical names and routing.
 *
 *   <64 hex><suffix><component>   e.g.  3fa1…9c_Qwen-Qwen3-8B_0_2_k
 *
 * The name is a file name inside a bucket directory and an object key in
 * S3, so nothing a user controls (the model name) may steer it out of its
 * directory: the sanitiser maps every byte to one byte of [A-Za-z0-9._-]
 * and breaks up leading dots and "..". The hex prefix already keeps a full
 * name from starting with '.'; '/' in a suffix or component passed in by
 * a caller is refused for the same reason.
 *
 * Routing hashes the whole physical name, so the components of one page
 * land in different buckets and disks; that spreads load and matches the
 * reference's layout on disk.
 */
#define _GNU_SOURCE
#include "util/util.h"

#include <hicache/key.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <xxhash.h>

/* A full name must stay a valid single path component. */
#define KEY_NAME_LEN_MAX (HC_NAME_MAX - 1)

static bool key_model_byte_ok(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

int hc_key_sanitize_model(const char *model, char *out, size_t out_size)
{
	size_t len;

	if (!model || !model[0])
		return util_fail(-EINVAL, "key: model name is %s", model ? "empty" : "NULL");
	/* Bounded scan: a hostile name may be arbitrarily long. */
	len = strnlen(model, HC_MODEL_NAME_MAX + 1);
	if (len > HC_MODEL_NAME_MAX)
		return util_fail(-ENAMETOOLONG, "key: model name longer than %d bytes",
				 HC_MODEL_NAME_MAX);
	if (!out)
		return util_fail(-EINVAL, "key: sanitize: NULL output buffer");
	if (out_size < len + 1)
		return util_fail(-ENOSPC, "key: model name needs %zu bytes, buffer has %zu",
				 len + 1, out_size);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)model[i];
		if (c == '/')
			c = '-';
		else if (!key_model_byte_ok(c))
			c = '_';
		/* Judged on the output, so "..." becomes "_._": never "..", never a
		 * leading dot, hence never "." or ".." either. */
		else if (c == '.' && (i == 0 || out[i - 1] == '.'))
			c = '_';
		out[i] = (char)c;
	}
	out[len] = '\0';
	return (int)len;
}

/* Append s to out at *pos, keeping room for the NUL; false when full. */
static bool key_append(char *out, size_t out_size, size_t *pos, const char *s, size_t n)
{
	if (n >= out_size - *pos)
		return false;
	memcpy(out + *pos, s, n);
	*pos += n;
	out[*pos] = '\0';
	return true;
}

static bool key_append_u32(char *out, size_t out_size, size_t *pos, uint32_t v)
{
	char buf[16];
	int n = snprintf(buf, sizeof(buf), "_%u", v);
	return key_append(out, out_size, pos, buf, (size_t)n);
}

int hc_key_suffix(const char *model, uint32_t tp_rank, uint32_t tp_size, bool rank_replicated,
		  char *out, size_t out_size)
{
	char clean[HC_MODEL_NAME_MAX + 1];
	size_t pos = 0;
	int len = 0;

	if (tp_size && tp_rank >= tp_size)
		return util_fail(-EINVAL, "key: TP rank %u is not below TP size %u", tp_rank,
				 tp_size);
	if (!out)
		return util_fail(-EINVAL, "key: suffix: NULL output buffer");
	if (!out_size)
		return util_fail(-ENOSPC, "key: suffix: output buffer of 0 bytes");
	if (model && model[0]) {
		len = hc_key_sanitize_model(model, clean, sizeof(clean));
		if (len < 0)
			return len;
	}
	out[0] = '\0';
	if ((len && (!key_append(out, out_size, &pos, "_", 1) ||
		     !key_append(out, out_size, &pos, clean, (size_t)len))) ||
	    (!rank_replicated && tp_size &&
	     (!key_append_u32(out, out_size, &pos, tp_rank) ||
	      !key_append_u32(out, out_size, &pos, tp_size)))) {
		out[0] = '\0';
		return util_fail(-ENOSPC, "key: suffix does not fit in %zu bytes", out_size);
	}
	return (int)pos;
}

bool hc_key_pool_name_ok(const char *pool)
{
	size_t len;

	if (!pool)
		return false;
	len = strnlen(pool, HC_POOL_NAME_MAX + 1);
	if (!len || len > HC_POOL_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = pool[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
			return false;
	}
	return true;
}

int hc_key_component(enum hc_component kind, const char *pool, uint32_t index, char *out,
		     size_t out_size)
{
	const char *tail = NULL; /* after "_<pool>" */
	bool with_index = false;
	bool with_pool = false;
	char buf[64];
	int n;

	switch (kind) {
	case HC_COMP_PLAIN:
		tail = "";
		break;
	case HC_COMP_K:
		tail = "_k";
		break;
	case HC_COMP_V:
		tail = "_v";
		break;
	case HC_COMP_MAMBA_TEMPORAL:
		tail = "_mamba_temporal";
		break;
	case HC_COMP_MAMBA_CONV:
		tail = "_mamba_conv";
		with_index = true;
		break;
	case HC_COMP_POOL:
		tail = "";
		with_pool = true;
		break;
	case HC_COMP_POOL_K:
		tail = "_k";
		with_pool = true;
		break;
	case HC_COMP_POOL_V:
		tail = "_v";
		with_pool = true;
		break;
	case HC_COMP_POOL_INDEX:
		tail = "";
		with_pool = true;
		with_index = true;
		break;
	default:
		return util_fail(-EINVAL, "key: unknown component kind %d", (int)kind);
	}
	if (with_pool && !hc_key_pool_name_ok(pool))
		return util_fail(-EINVAL,
				 "key: component needs a pool name of 1 to %d "
				 "characters [a-z0-9_]%s",
				 HC_POOL_NAME_MAX, pool ? "" : " (got NULL)");
	/* Fits: "_" + 32 + "_mamba_temporal" or "_" + 10 digits at most. */
	if (with_index)
		n = snprintf(buf, sizeof(buf), "%s%s%s_%u", with_pool ? "_" : "",
			     with_pool ? pool : "", tail, index);
	else
		n = snprintf(buf, sizeof(buf), "%s%s%s", with_pool ? "_" : "",
			     with_pool ? pool : "", tail);
	if (!out)
		return util_fail(-EINVAL, "key: component: NULL output buffer");
	if ((size_t)n >= out_size)
		return util_fail(-ENOSPC, "key: component needs %d bytes, buffer has %zu", n + 1,
				 out_size);
	memcpy(out, buf, (size_t)n + 1);
	return n;
}

int hc_key_name(const struct hc_key *key, const char *suffix, const char *component, char *out,
		size_t out_size)
{
	size_t slen, clen, total;

	if (!key)
		return util_fail(-EINVAL, "key: name: NULL key");
	suffix = suffix ? suffix : "";
	component = component ? component : "";
	slen = strnlen(suffix, HC_NAME_MAX);
	clen = strnlen(component, HC_NAME_MAX);
	total = HC_KEY_HEX_LEN + slen + clen;
	if (total > KEY_NAME_LEN_MAX)
		return util_fail(-ENAMETOOLONG, "key: name would be longer than %d bytes",
				 KEY_NAME_LEN_MAX);
	if (memchr(suffix, '/', slen) || memchr(component, '/', clen))
		return util_fail(-EINVAL, "key: '/' in the %s of a name",
				 memchr(suffix, '/', slen) ? "suffix" : "component");
	if (!out)
		return util_fail(-EINVAL, "key: name: NULL output buffer");
	if (out_size <= total)
		return util_fail(-ENOSPC, "key: name needs %zu bytes, buffer has %zu", total + 1,
				 out_size);
	hc_key_to_hex(key, out);
	memcpy(out + HC_KEY_HEX_LEN, suffix, slen);
	memcpy(out + HC_KEY_HEX_LEN + slen, component, clen);
	out[total] = '\0';
	return (int)total;
}

uint64_t hc_key_route_hash(const char *name)
{
	return XXH3_64bits(name ? name : "", name ? strlen(name) : 0);
}

unsigned hc_key_bucket(uint64_t route_hash)
{
	return (unsigned)(route_hash & 0xff);
}

void hc_key_bucket_hex(uint64_t route_hash, char out[3])
{
	static const char digits[] = "0123456789abcdef";

	if (!out)
		return;
	out[0] = digits[(route_hash >> 4) & 0xf];
	out[1] = digits[route_hash & 0xf];
	out[2] = '\0';
}

unsigned hc_key_disk(uint64_t route_hash, unsigned ndirs)
{
	return ndirs ? (unsigned)((route_hash >> 16) % ndirs) : 0;
}
