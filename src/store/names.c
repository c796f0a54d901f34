/*
 * Object names: a page is named by its key (64 lowercase hex digits) or by
 * a caller's string in their place (store.h, Keys), then the pool's suffix
 * and the object's component:
 *
 *   <64 hex | name><suffix><component>      e.g.  p0_org-m-7b_0_1_k
 *
 * A name becomes a file name and an S3 key, so it may not leave its
 * directory ('/'), hide as a dot file or look like a temp file (a leading
 * '.'), carry control bytes or bytes that are not UTF-8 (S3 keys are), or
 * make a name longer than NAME_MAX with the pool's suffix and longest
 * component (the pool's name_room). A name of
 * 64 lowercase hex digits is a key's name: the same object.
 */
#define _GNU_SOURCE
#include "store/names.h"
#include "util/util.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int store_object_name(const struct store_ctx *c, const struct hc_key *key, const char *name,
		      unsigned o, char *out)
{
	/* Registration (ctx_names_fit) and store_name_check made sure every
	 * name fits; checked anyway, since a name left from the page before
	 * would move this page's bytes under that page's name. */
	int n = key ? hc_key_name(key, c->suffix, c->obj[o].component, out, HC_NAME_MAX)
		    : snprintf(out, HC_NAME_MAX, "%s%s%s", name, c->suffix, c->obj[o].component);
	if (n >= 0 && n < HC_NAME_MAX)
		return 0;
	out[0] = '\0';
	return util_fail(n < 0 ? n : -ENAMETOOLONG,
			 "store: cannot name object %u of a page of pool '%s' (suffix '%s', "
			 "component '%s'): %s",
			 o, c->name, c->suffix, c->obj[o].component,
			 hc_strerror(n < 0 ? n : -ENAMETOOLONG));
}

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
 * forms, no surrogates, at most U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *s, size_t left)
{
	unsigned char c = s[0];
	size_t n = c < 0x80             ? 1
		   : (c & 0xe0) == 0xc0 ? 2
		   : (c & 0xf0) == 0xe0 ? 3
		   : (c & 0xf8) == 0xf0 ? 4
					: 0;
	if (!n || n > left)
		return 0;
	uint32_t cp = n == 1 ? c : c & (0x7f >> n);
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
	if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* "name 3" or "transfer 1 ('swa'), name 3", for messages. */
static const char *which(char *buf, size_t size, const struct store_ctx *c, size_t t, size_t j)
{
	if (t == SIZE_MAX)
		snprintf(buf, size, "name %zu", j);
	else
		snprintf(buf, size, "transfer %zu ('%s'), name %zu", t, c->name, j);
	return buf;
}

int store_name_check(const struct store_ctx *c, const char *name, size_t t, size_t j,
		     const char *what)
{
	char w[96];
	if (!name)
		return util_fail(-EINVAL, "%s: %s is NULL", what, which(w, sizeof(w), c, t, j));
	size_t len = strnlen(name, HC_STORE_NAME_MAX + 1);
	if (!len)
		return util_fail(-EINVAL, "%s: %s is empty", what, which(w, sizeof(w), c, t, j));
	if (len > HC_STORE_NAME_MAX)
		return util_fail(-EINVAL,
				 "%s: %s ('%.32s...') is longer than HC_STORE_NAME_MAX "
				 "(%d bytes)",
				 what, which(w, sizeof(w), c, t, j), name, HC_STORE_NAME_MAX);
	if (len > c->name_room)
		return util_fail(-EINVAL,
				 "%s: %s ('%.32s...') is %zu bytes: with pool '%s''s suffix "
				 "'%s' and components an object name would pass NAME_MAX (names "
				 "of at most %zu bytes fit)",
				 what, which(w, sizeof(w), c, t, j), name, len, c->name, c->suffix,
				 c->name_room);
	for (size_t i = 0, n; i < len; i += n) {
		unsigned char ch = (unsigned char)name[i];
		if (ch < 0x20 || ch == 0x7f)
			return util_fail(-EINVAL, "%s: %s holds a control byte (0x%02x at %zu)",
					 what, which(w, sizeof(w), c, t, j), ch, i);
		if (ch == '/')
			return util_fail(-EINVAL, "%s: %s ('%s') holds a '/'", what,
					 which(w, sizeof(w), c, t, j), name);
		/* S3 keys are UTF-8: other bytes could be stored in files only. */
		if (!(n = utf8_len((const unsigned char *)name + i, len - i)))
			return util_fail(-EINVAL, "%s: %s is not UTF-8 (byte 0x%02x at %zu)", what,
					 which(w, sizeof(w), c, t, j), ch, i);
	}
	if (name[0] == '.')
		return util_fail(-EINVAL, "%s: %s ('%s') starts with '.'", what,
				 which(w, sizeof(w), c, t, j), name);
	return 0;
}

bool store_name_is_key(const char *name, struct hc_key *key)
{
	return strnlen(name, HC_KEY_HEX_LEN + 1) == HC_KEY_HEX_LEN &&
	       strspn(name, "0123456789abcdef") == HC_KEY_HEX_LEN && !hc_key_from_hex(name, key);
}
