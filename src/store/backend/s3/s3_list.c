/* The S3 backend's listings: ListObjectsV2 pages parsed into page
 * objects, and the offline tools over them (ls, gc) and clear's
 * remove_matching (see s3.c for the design). */
#define _GNU_SOURCE
#include "store/backend/s3/s3_list.h"
#include "store/backend/page_plan.h"
#include "store/backend/s3/s3.h"
#include "util/util.h"

#include <hicache/config.h>
#include <hicache/store.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void s3_listing_free(struct s3_listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->objs[i].name);
	free(l->objs);
	memset(l, 0, sizeof(*l));
}

/* The text of <tag>...</tag> from *pos within end, XML entities decoded. */
static char *xml_take(const char **pos, const char *end, const char *tag)
{
	char open[48], close[48];
	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	const char *a = memmem(*pos, (size_t)(end - *pos), open, strlen(open));
	if (!a)
		return NULL;
	a += strlen(open);
	const char *b = memmem(a, (size_t)(end - a), close, strlen(close));
	if (!b)
		return NULL;
	*pos = b + strlen(close);
	/* XML has no NUL character: text holding one is malformed, and a
	 * C string of it would be cut short (a key "p/\0../x" would read
	 * as "p/"). */
	if (memchr(a, '\0', (size_t)(b - a)))
		return NULL;
	char *out = malloc((size_t)(b - a) + 1), *o = out;
	if (!out)
		return NULL;
	static const struct {
		const char *ent;
		char ch;
	} ents[] = {{"&amp;", '&'},
		    {"&lt;", '<'},
		    {"&gt;", '>'},
		    {"&quot;", '"'},
		    {"&apos;", '\''}};
	while (a < b) {
		bool decoded = false;
		for (size_t i = 0; *a == '&' && i < sizeof(ents) / sizeof(ents[0]); i++) {
			size_t el = strlen(ents[i].ent);
			if ((size_t)(b - a) >= el && !memcmp(a, ents[i].ent, el)) {
				*o++ = ents[i].ch;
				a += el;
				decoded = true;
				break;
			}
		}
		if (!decoded)
			*o++ = *a++;
	}
	*o = '\0';
	return out;
}

/* "2026-11-30T05:34:34.388Z" -> ns since the epoch; 0 if unreadable. */
int64_t s3_parse_time(const char *s)
{
	struct tm tm = {0};
	unsigned ms = 0;
	const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!rest)
		return 0;
	if (*rest == '.') {
		unsigned scale = 100;
		for (rest++; isdigit((unsigned char)*rest); rest++, scale /= 10)
			ms += (unsigned)(*rest - '0') * scale;
	}
	/* int64 nanoseconds hold 1677..2262: outside that, unreadable too. */
	int64_t sec = (int64_t)timegm(&tm), ns;
	if (__builtin_mul_overflow(sec, (int64_t)1000000000, &ns) ||
	    __builtin_add_overflow(ns, (int64_t)ms * 1000000, &ns))
		return 0;
	return ns;
}

static int listing_add(struct s3_listing *l, char *name, size_t page_len, uint64_t bytes,
		       int64_t mtime)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 1024;
		struct s3_listed *o = realloc(l->objs, cap * sizeof(*o));
		if (!o)
			return -ENOMEM;
		l->objs = o;
		l->cap = cap;
	}
	l->objs[l->n++] = (struct s3_listed){name, page_len, bytes, mtime};
	l->bytes += bytes;
	if (!l->oldest_ns || mtime < l->oldest_ns)
		l->oldest_ns = mtime;
	if (mtime > l->newest_ns)
		l->newest_ns = mtime;
	return 0;
}

/* "<64 lowercase hex>[<more>]": the names the store writes (the bare hex
 * too: an MLA store without a model names bounce-mode objects so). */
static bool is_object_name(const char *name)
{
	return strlen(name) >= 64 && strspn(name, "0123456789abcdef") >= 64;
}

static const char *base_name(const char *key)
{
	const char *slash = strrchr(key, '/');
	return slash ? slash + 1 : key;
}

/* Control characters: legal in S3 keys, never in a name the store
 * writes, and a way to hide a name's meaning from a log or a terminal. */
static bool has_control_char(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

int s3_parse_list(const char *prefix, const char *xml, size_t len, struct s3_listing *l,
		  char **token, uint64_t *foreign)
{
	const char *pos = xml, *end = xml + len;
	size_t pl = strlen(prefix);
	*token = NULL;
	for (;;) {
		const char *a = memmem(pos, (size_t)(end - pos), "<Contents>", 10);
		if (!a)
			break;
		const char *b = memmem(a, (size_t)(end - a), "</Contents>", 11);
		if (!b)
			return util_fail(-EPROTO,
					 "s3 store: a listing has an unterminated <Contents>");
		const char *p = a;
		char *key = xml_take(&p, b, "Key");
		p = a;
		char *size = xml_take(&p, b, "Size");
		p = a;
		char *mtime = xml_take(&p, b, "LastModified");
		int rc = 0;
		char *end_num = NULL;
		unsigned long long bytes = size ? strtoull(size, &end_num, 10) : 0;
		if (!key || !size || !end_num || *end_num) {
			rc = util_fail(-EPROTO, "s3 store: a listing entry has no usable Key/Size");
		} else if (strncmp(key, prefix, pl) || !key[pl] || s3_key_has_dot_segment(key) ||
			   has_control_char(key)) {
			/* Never act on a key outside the prefix: deleting
			 * "p/../other/x" would delete "other/x"; nor on the
			 * prefix itself or a name with control characters. */
			if (!l->refused++)
				log_warn(
					"s3 store: the listing of prefix '%s' holds a key outside it "
					"or with a '.' or '..' segment or a control character; "
					"such keys are ignored",
					prefix);
		} else if (!l->any_name && !is_object_name(base_name(key + pl))) {
			(*foreign)++;
		} else {
			/* Stores under longer prefixes below this one count too. */
			char *name = strdup(key + pl);
			size_t page_len = (size_t)(base_name(key + pl) - (key + pl)) + 64;
			rc = name ? listing_add(l, name, page_len, bytes,
						mtime ? s3_parse_time(mtime) : 0)
				  : -ENOMEM;
			if (rc)
				free(name);
		}
		free(key);
		free(size);
		free(mtime);
		if (rc)
			return rc;
		pos = b + 11;
	}
	const char *p = xml;
	char *trunc = xml_take(&p, end, "IsTruncated");
	bool more = trunc && !strcmp(trunc, "true");
	free(trunc);
	if (more) {
		p = xml;
		*token = xml_take(&p, end, "NextContinuationToken");
		if (!*token)
			return util_fail(-EPROTO, "s3 store: a truncated listing has no "
						  "NextContinuationToken");
	}
	return 0;
}

/* Every page object under the prefix (any_name: every object). */
static int list_under(struct s3_be *be, struct s3_listing *l, uint64_t *foreign, bool any_name)
{
	struct s3_buf body = {0};
	char *token = NULL;
	int rc = 0;
	memset(l, 0, sizeof(*l));
	l->any_name = any_name;
	do {
		char *enc_prefix = s3_encode(be->c.prefix, false), *enc_token = NULL, *url = NULL;
		if (token)
			enc_token = s3_encode(token, false);
		/* SigV4 wants the query sorted by name. */
		int n = enc_prefix && (!token || enc_token)
				? asprintf(&url, "%s?%s%s%slist-type=2&prefix=%s", be->c.bucket_url,
					   token ? "continuation-token=" : "",
					   token ? enc_token : "", token ? "&" : "", enc_prefix)
				: -1;
		free(enc_prefix);
		free(enc_token);
		free(token);
		token = NULL;
		if (n < 0) {
			rc = -ENOMEM;
			break;
		}
		struct s3_req r = {.method = S3_LIST, .url = url, .body = &body};
		rc = s3_run_requests(be, &r, 1);
		free(url);
		if (!rc && body.overflow)
			rc = util_fail(-EFBIG,
				       "s3 store: a listing page of bucket '%s' is over %u MiB "
				       "(the limit on one ListObjectsV2 answer)",
				       be->c.bucket, S3_LIST_BODY_MAX >> 20);
		if (!rc && r.result)
			rc = util_fail(r.result,
				       "s3 store: listing bucket '%s' at %s://%s failed: "
				       "%s (HTTP %ld)",
				       be->c.bucket, be->c.scheme, be->c.host,
				       hc_strerror(r.result), r.status);
		if (!rc)
			rc = s3_parse_list(be->c.prefix, body.data ? body.data : "", body.len, l,
					   &token, foreign);
	} while (!rc && token);
	free(token);
	free(body.data);
	if (rc)
		s3_listing_free(l);
	return rc;
}

static int list_all(struct s3_be *be, struct s3_listing *l, uint64_t *foreign)
{
	return list_under(be, l, foreign, false);
}

static bool s3_is_url(const char *s)
{
	return s && !strncmp(s, "s3://", 5);
}

/* Open a backend on the bucket and prefix of an s3:// URL, the rest of the
 * configuration from the environment. */
static int open_url(const char *url, struct s3_be **out)
{
	*out = NULL;
	if (!s3_is_url(url))
		return util_fail(-EINVAL, "'%s' is not an s3://bucket/prefix URL", url);
	const char *b = url + 5, *slash = strchr(b, '/');
	char *bucket = slash ? strndup(b, (size_t)(slash - b)) : strdup(b);
	if (!bucket)
		return -ENOMEM;
	struct hc_config *cfg = NULL;
	int rc = hc_config_create(NULL, &cfg);
	if (!rc && !*bucket)
		rc = util_fail(-EINVAL, "'%s': no bucket (s3://bucket/prefix)", url);
	if (!rc)
		rc = hc_config_set(cfg, "bucket", bucket);
	if (!rc)
		rc = hc_config_set(cfg, "prefix", slash ? slash + 1 : "");
	void *be = NULL;
	if (!rc)
		rc = s3_open(cfg, &be);
	hc_config_destroy(cfg);
	free(bucket);
	*out = be;
	return rc;
}

int s3_tool_ls(const char *url, struct hc_ls_report *out)
{
	struct s3_be *be;
	int rc = open_url(url, &be);
	if (rc)
		return rc;
	struct s3_listing l;
	uint64_t foreign = 0;
	rc = list_all(be, &l, &foreign);
	if (!rc) {
		uint64_t pages = 0;
		const char *last = NULL;
		/* Listings come sorted by key, so a page's objects are adjacent. */
		for (size_t i = 0; i < l.n; i++) {
			if (!last || strncmp(last, l.objs[i].name, l.objs[i].page_len))
				pages++;
			last = l.objs[i].name;
		}
		*out = (struct hc_ls_report){
			.pages = pages,
			.objects = l.n,
			.bytes = l.bytes,
			.oldest_ns = l.oldest_ns,
			.newest_ns = l.newest_ns,
		};
		s3_listing_free(&l);
	}
	s3_close(be);
	return rc;
}

/* Listings come sorted by key, so a page's objects are adjacent. */
static bool listed_same_page(const void *arg, size_t first, size_t i)
{
	const struct s3_listed *o = arg;
	return !strncmp(o[first].name, o[i].name, o[i].page_len);
}

static uint64_t listed_bytes(const void *arg, size_t i)
{
	return ((const struct s3_listed *)arg)[i].bytes;
}

static int64_t listed_mtime(const void *arg, size_t i)
{
	return ((const struct s3_listed *)arg)[i].mtime_ns;
}

int s3_tool_gc(const char *url, uint64_t capacity_bytes, uint64_t *removed_pages,
	       uint64_t *removed_bytes)
{
	struct s3_be *be;
	int rc = open_url(url, &be);
	if (rc)
		return rc;
	struct s3_listing l;
	uint64_t foreign = 0, gone_pages = 0, gone_bytes = 0;
	rc = list_all(be, &l, &foreign);
	if (rc) {
		s3_close(be);
		return rc;
	}
	const struct page_objs listed = {.arg = l.objs,
					 .n = l.n,
					 .same_page = listed_same_page,
					 .bytes = listed_bytes,
					 .mtime_ns = listed_mtime};
	struct page_group *pages = NULL;
	size_t np = 0;
	struct store_obj *objs = malloc((l.n ? l.n : 1) * sizeof(*objs));
	if (!objs || page_plan(&listed, &pages, &np)) {
		rc = -ENOMEM;
		goto out;
	}
	/* The oldest pages whose removal brings the total to the cap. */
	size_t nobj = 0, npages = page_plan_cut(pages, np, l.bytes, capacity_bytes);
	for (size_t p = 0; p < npages; p++) {
		for (size_t i = 0; i < pages[p].count; i++) {
			const struct s3_listed *o = &l.objs[pages[p].first + i];
			objs[nobj++] = (struct store_obj){.name = o->name,
							  .len = o->bytes,
							  .result = -EIO};
		}
	}
	rc = s3_delete(be, objs, nobj);
	for (size_t p = 0, k = 0; !rc && p < npages; p++) {
		bool all = true;
		for (size_t i = 0; i < pages[p].count; i++, k++) {
			if (objs[k].result == 0 || objs[k].result == -ENOENT)
				gone_bytes += objs[k].len;
			else
				all = false;
		}
		gone_pages += all;
	}
	for (size_t k = 0; !rc && k < nobj; k++)
		if (objs[k].result && objs[k].result != -ENOENT)
			rc = util_fail(objs[k].result, "s3 gc: deleting %s failed: %s",
				       objs[k].name, hc_strerror(objs[k].result));
out:
	if (removed_pages)
		*removed_pages = gone_pages;
	if (removed_bytes)
		*removed_bytes = gone_bytes;
	free(pages);
	free(objs);
	s3_listing_free(&l);
	s3_close(be);
	return rc;
}

int s3_tool_ls_at(const char *const *locs, size_t n, struct hc_ls_report *out)
{
	(void)n;
	return s3_tool_ls(locs[0], out);
}

int s3_tool_gc_at(const char *const *locs, size_t n, uint64_t capacity_bytes,
		  uint64_t *removed_pages, uint64_t *removed_bytes)
{
	(void)n;
	return s3_tool_gc(locs[0], capacity_bytes, removed_pages, removed_bytes);
}

/* ---- clear ---- */

/* Delete the objects right under the prefix (not in "sub/" parts: other
 * stores' prefixes) whose names match. S3 deletes whole objects: a get
 * racing it reads the object or a miss. */
int64_t s3_remove_matching(void *p, bool (*match)(const char *name, void *arg), void *arg)
{
	struct s3_be *be = p;
	struct s3_listing l;
	uint64_t foreign = 0;
	int rc = list_under(be, &l, &foreign, true);
	if (rc)
		return rc;
	struct store_obj *objs = malloc((l.n ? l.n : 1) * sizeof(*objs));
	if (!objs) {
		s3_listing_free(&l);
		return -ENOMEM;
	}
	size_t n = 0;
	for (size_t i = 0; i < l.n; i++)
		if (!strchr(l.objs[i].name, '/') && match(l.objs[i].name, arg))
			objs[n++] = (struct store_obj){.name = l.objs[i].name,
						       .len = (size_t)l.objs[i].bytes,
						       .result = -EIO};
	rc = n ? s3_delete(be, objs, n) : 0;
	int64_t removed = 0;
	for (size_t i = 0; !rc && i < n; i++) {
		if (objs[i].result == 0 || objs[i].result == -ENOENT)
			removed++;
		else
			rc = util_fail(objs[i].result, "s3 store: clear: deleting %s failed: %s",
				       objs[i].name, hc_strerror(objs[i].result));
	}
	free(objs);
	s3_listing_free(&l);
	return rc ? rc : removed;
}
