/* The Mooncake trace parser and the multi-turn generator. */
#define _GNU_SOURCE
#include "replay.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- workload ---- */

static int wl_push_req(struct workload *w, const struct request *r)
{
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 1024;
		struct request *p = realloc(w->req, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		w->req = p;
		w->cap = cap;
	}
	w->req[w->n++] = *r;
	w->total_input += replay_insert_len(r);
	if (replay_insert_len(r) > w->max_input)
		w->max_input = replay_insert_len(r);
	return 0;
}

static int wl_push_id(struct workload *w, uint64_t id)
{
	if (w->nids == w->ids_cap) {
		size_t cap = w->ids_cap ? w->ids_cap * 2 : 65536;
		uint64_t *p = realloc(w->ids, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		w->ids = p;
		w->ids_cap = cap;
	}
	w->ids[w->nids++] = id;
	return 0;
}

void replay_wl_free(struct workload *w)
{
	free(w->req);
	free(w->ids);
}

/* Rejects a line whose object names a key twice: which of two values a
 * trace means is unknowable, and cJSON would silently take the first.
 * Sorting the names keeps a line of many keys O(n log n). */
static int cmp_name(const void *x, const void *y)
{
	return strcmp(*(const char *const *)x, *(const char *const *)y);
}

static const char *check_keys(const cJSON *o)
{
	const char *small[16], **names = small;
	size_t n = 0, k = 0;
	const cJSON *it;
	const char *what = NULL;

	cJSON_ArrayForEach(it, o)
		n++;
	if (n > sizeof(small) / sizeof(small[0]) && !(names = malloc(n * sizeof(*names))))
		return "out of memory";
	cJSON_ArrayForEach(it, o)
		names[k++] = it->string;
	qsort(names, n, sizeof(*names), cmp_name);
	for (k = 1; k < n && !what; k++)
		if (!strcmp(names[k - 1], names[k]))
			what = "a key appears twice";
	if (names != small)
		free(names);
	return what;
}

/* ---- integers, exactly ----
 *
 * cJSON holds a number as a double, exact for integers only up to 2^53:
 * "9007199254740993" reads as 9007199254740992 and "1.0000000000000001"
 * as 1, which would merge two block ids without a word. So the integer
 * fields are judged by their text: the line's number tokens, counted in
 * the order of cJSON's tree, which is the order of the text. */

/* Number nodes in o's subtree: the number tokens its text holds. */
static size_t json_numbers(const cJSON *o)
{
	if (cJSON_IsNumber(o))
		return 1;
	size_t n = 0;
	for (const cJSON *c = o->child; c; c = c->next)
		n += json_numbers(c);
	return n;
}

/* A walk over the number tokens of [s, end), text that cJSON parsed. */
struct num_cursor {
	const char *s, *end;
	size_t k; /* index of the next token */
};

/* The text of number token k (k >= every index asked of c before); its
 * length, 0 when there is none. */
static size_t num_text(struct num_cursor *c, size_t k, const char **text)
{
	static const char num_chars[] = "0123456789+-.eE";
	bool in_str = false;
	for (; c->s < c->end; c->s++) {
		char ch = *c->s;
		if (in_str) {
			if (ch == '\\')
				c->s++; /* the escaped character, never a quote that ends */
			else if (ch == '"')
				in_str = false;
			continue;
		}
		if (ch == '"') {
			in_str = true;
			continue;
		}
		if (ch != '-' && (ch < '0' || ch > '9'))
			continue;
		size_t n = 1;
		while (c->s + n < c->end && c->s[n] && strchr(num_chars, c->s[n]))
			n++;
		const char *at = c->s;
		c->s += n - 1;
		if (c->k++ == k) {
			c->s++;
			*text = at;
			return n;
		}
	}
	return 0;
}

/* Digit i of the significant digits: the integer part, then the fraction. */
static char sig_digit(const char *ip, size_t ni, const char *fp, size_t i)
{
	return i < ni ? ip[i] : fp[i - ni];
}

/* The exact value of JSON number text p[0, n) when it is an integer in
 * 0..max ("-0", "1e3" and "5.0" are; "1.5" and 2^53 + 1 with max 2^53 are
 * not). */
static bool text_u64(const char *p, size_t n, uint64_t max, uint64_t *out)
{
	size_t i = 0;
	bool neg = i < n && p[i] == '-';
	i += neg;
	const char *ip = p + i, *fp = "";
	size_t ni = 0, nf = 0;
	while (i < n && p[i] >= '0' && p[i] <= '9')
		i++, ni++;
	if (i < n && p[i] == '.') {
		fp = p + ++i;
		while (i < n && p[i] >= '0' && p[i] <= '9')
			i++, nf++;
	}
	int64_t e = 0;
	if (i < n && (p[i] == 'e' || p[i] == 'E')) {
		bool eneg = ++i < n && p[i] == '-';
		i += i < n && (p[i] == '-' || p[i] == '+');
		for (; i < n && p[i] >= '0' && p[i] <= '9'; i++)
			if (e < 1000000)
				e = e * 10 + (p[i] - '0');
		e = eneg ? -e : e;
	}
	if (i != n || ni + nf == 0)
		return false;
	/* value = digits[lo, hi) * 10^e, with no zero at either end */
	size_t lo = 0, hi = ni + nf;
	e -= (int64_t)nf;
	while (hi > lo && sig_digit(ip, ni, fp, hi - 1) == '0')
		hi--, e++;
	while (lo < hi && sig_digit(ip, ni, fp, lo) == '0')
		lo++;
	if (lo == hi) {
		*out = 0;
		return true;
	}
	if (neg || e < 0 || (int64_t)(hi - lo) + e > 20)
		return false;
	uint64_t v = 0;
	for (size_t d = lo; d < hi + (size_t)e; d++) {
		unsigned dig = d < hi ? (unsigned)(sig_digit(ip, ni, fp, d) - '0') : 0;
		if (v > (UINT64_MAX - dig) / 10)
			return false;
		v = v * 10 + dig;
	}
	if (v > max)
		return false;
	*out = v;
	return true;
}

/* One line's fields and where their number tokens start. */
struct line_fields {
	const char *line, *end; /* the text cJSON parsed */
	const cJSON *field[4];
	size_t first[4]; /* index of the field's first number token */
};

enum { F_INPUT, F_OUTPUT, F_TIMESTAMP, F_IDS };
static const char *const field_names[] = {"input_length", "output_length", "timestamp", "hash_ids"};

static void find_fields(const cJSON *o, struct line_fields *lf)
{
	size_t k = 0;
	for (const cJSON *it = o->child; it; it = it->next) {
		for (int f = 0; f < 4; f++) {
			if (it->string && !strcmp(it->string, field_names[f])) {
				lf->field[f] = it;
				lf->first[f] = k;
			}
		}
		k += json_numbers(it);
	}
}

/* Number token k of the line as an integer in 0..max; false when it is
 * not one, with *text and *len naming what it is. */
static bool token_u64(const struct line_fields *lf, size_t k, uint64_t max, uint64_t *out,
		      const char **text, size_t *len)
{
	struct num_cursor c = {.s = lf->line, .end = lf->end};
	*text = "";
	*len = num_text(&c, k, text);
	return *len && text_u64(*text, *len, max, out);
}

/* A message naming the value (at most 40 characters of it shown). */
static const char *say_value(struct workload *w, const char *field, const char *text, size_t len,
			     const char *rule)
{
	snprintf(w->what, sizeof(w->what), "%s is %.*s%s: %s", field, len > 40 ? 40 : (int)len,
		 text, len > 40 ? "..." : "", rule);
	return w->what;
}

/* Integer field f into *out: NULL, or rule when it is missing or no
 * number, or rule after the value when it is a number but not an integer
 * in 0..max. */
static const char *field_u64(struct workload *w, const struct line_fields *lf, int f, uint64_t max,
			     const char *rule, uint64_t *out)
{
	const cJSON *v = lf->field[f];
	const char *text;
	size_t len;
	if (!cJSON_IsNumber(v))
		return rule;
	if (!token_u64(lf, lf->first[f], max, out, &text, &len))
		return say_value(w, field_names[f], text, len, rule);
	return NULL;
}

/* hash_ids: ceil(input_length / 512) integers in 0..2^53, appended to
 * w->ids (nothing appended when it fails). */
static const char *parse_ids(struct workload *w, const struct line_fields *lf, struct request *r)
{
	const cJSON *ids = lf->field[F_IDS], *id;
	uint64_t want = (r->input + TRACE_BLOCK - 1) / TRACE_BLOCK;
	size_t first = w->nids, i = 0;
	const char *what = NULL;
	if (!cJSON_IsArray(ids))
		return "hash_ids must be an array";
	if ((uint64_t)cJSON_GetArraySize(ids) != want)
		return "hash_ids must hold ceil(input_length / 512) ids";
	r->blocks = (const uint64_t *)(uintptr_t)w->nids;
	struct num_cursor c = {.s = lf->line, .end = lf->end};
	cJSON_ArrayForEach(id, ids) {
		const char *text = "";
		size_t len = 0;
		uint64_t v;
		if (cJSON_IsNumber(id))
			len = num_text(&c, lf->first[F_IDS] + i, &text);
		if (!len || !text_u64(text, len, 1ull << 53, &v)) {
			char field[32];
			snprintf(field, sizeof(field), "hash_ids[%zu]", i);
			what = len ? say_value(w, field, text, len,
					       "ids must be integers in 0..2^53 (what a JSON "
					       "number holds exactly)")
				   : "hash_ids must be integers >= 0";
			break;
		}
		if (wl_push_id(w, v)) {
			what = "out of memory";
			break;
		}
		i++;
	}
	if (what)
		w->nids = first; /* a rejected line leaves no ids behind */
	return what;
}

static const char *parse_fields(struct workload *w, const cJSON *o, const char *line,
				const char *end, struct request *r)
{
	struct line_fields lf = {.line = line, .end = end};
	const char *what;
	uint64_t ts = 0;
	find_fields(o, &lf);
	if ((what = field_u64(w, &lf, F_INPUT, 1ull << 40, "input_length must be an integer >= 1",
			      &r->input)))
		return what;
	if (r->input == 0)
		return "input_length must be an integer >= 1";
	if ((what = field_u64(w, &lf, F_OUTPUT, 1ull << 40, "output_length must be an integer >= 0",
			      &r->output)))
		return what;
	if (lf.field[F_TIMESTAMP]) {
		if ((what = field_u64(w, &lf, F_TIMESTAMP, UINT64_MAX >> 11,
				      "timestamp must be an integer >= 0 (milliseconds)", &ts)))
			return what;
		r->arrival = (double)ts / 1000.0;
	}
	return parse_ids(w, &lf, r);
}

const char *replay_parse_line(struct workload *w, const char *line, size_t len)
{
	const char *end = NULL, *what = NULL;
	struct request r = {0};
	cJSON *o = cJSON_ParseWithLengthOpts(line, len, &end, false);

	if (!o || !cJSON_IsObject(o))
		what = "not a JSON object";
	else if (end && (size_t)(end - line) < len &&
		 strspn(end, " \t\r\n") < len - (size_t)(end - line))
		what = "text after the JSON object";
	else if (!(what = check_keys(o)))
		what = parse_fields(w, o, line, end ? end : line + len, &r);
	cJSON_Delete(o);
	if (!what && wl_push_req(w, &r))
		what = "out of memory";
	return what;
}

/* One line into *buf (NUL-terminated, newline kept, NUL bytes inside it
 * kept too), at most max bytes: a longer line is refused before it is all
 * in memory. Returns 1 (a line, *len set), 0 (end of file), -E2BIG (longer
 * than max), -ENOMEM, -EIO. */
static int read_line(FILE *f, char **buf, size_t *cap, size_t max, size_t *len)
{
	size_t n = 0;
	int ch = 0;

	while ((ch = getc_unlocked(f)) != EOF) {
		if (n == max)
			return -E2BIG;
		if (n + 2 > *cap) {
			size_t c = *cap ? *cap * 2 : 4096;
			char *p = realloc(*buf, c);
			if (!p)
				return -ENOMEM;
			*buf = p;
			*cap = c;
		}
		(*buf)[n++] = (char)ch;
		if (ch == '\n')
			break;
	}
	if (ferror(f))
		return -EIO;
	if (n)
		(*buf)[n] = '\0';
	*len = n;
	return n > 0;
}

/* Returns 0, 1 (a bad line or I/O error, said). Block ids are stored as
 * offsets into w->ids first (the array moves while it grows), then fixed. */
int replay_load_trace(const char *path, struct workload *w)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0, lineno = 0, len = 0;
	int ret = 1, rc;

	if (!f) {
		fprintf(stderr, "hicache replay: %s: %s\n", path, strerror(errno));
		return 1;
	}
	while ((rc = read_line(f, &line, &cap, REPLAY_LINE_MAX, &len)) > 0) {
		lineno++;
		if (strspn(line, " \t\r\n") >= len)
			continue; /* blank lines (a trailing newline) are not requests */
		const char *what = replay_parse_line(w, line, len);
		if (what) {
			fprintf(stderr, "hicache replay: %s:%zu: %s\n", path, lineno, what);
			goto out;
		}
	}
	if (rc == -E2BIG) {
		fprintf(stderr, "hicache replay: %s:%zu: line longer than %u MiB\n", path,
			lineno + 1, REPLAY_LINE_MAX >> 20);
		goto out;
	}
	if (rc == -ENOMEM) {
		fprintf(stderr, "hicache replay: out of memory\n");
		goto out;
	}
	if (ferror(f)) {
		fprintf(stderr, "hicache replay: %s: %s\n", path, strerror(errno));
		goto out;
	}
	if (w->n == 0) {
		fprintf(stderr, "hicache replay: %s: no requests\n", path);
		goto out;
	}
	for (size_t i = 0; i < w->n; i++)
		w->req[i].blocks = w->ids + (uintptr_t)w->req[i].blocks;
	ret = 0;
out:
	free(line);
	fclose(f);
	return ret;
}

/* Like SGLang's multi-turn benchmark: round k of client c sends its whole
 * conversation so far (k requests and k outputs) plus N new tokens; rounds
 * are interleaved across clients (round 0 of every client, then round 1 ...). */
int replay_gen_multiturn(const struct replay_args *a, struct workload *w)
{
	for (uint64_t k = 0; k < a->rounds; k++) {
		for (uint64_t c = 0; c < a->clients; c++) {
			struct request r = {
				.input = k * (a->request_tokens + a->output_tokens) +
					 a->request_tokens,
				.output = a->output_tokens,
				.stream = c,
			};
			if (wl_push_req(w, &r))
				return -ENOMEM;
		}
	}
	return 0;
}
