/* The Mooncake trace parser and the multi-turn generator. */
#define _GNU_SOURCE
#include "replay.h"

#include <cjson/cJSON.h>
#include <errno.h>
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

static bool json_u64(const cJSON *o, const char *name, uint64_t max, uint64_t *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > (double)max ||
	    v->valuedouble != (double)(uint64_t)v->valuedouble)
		return false;
	*out = (uint64_t)v->valuedouble;
	return true;
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

const char *replay_parse_line(struct workload *w, const char *line, size_t len)
{
	const char *end = NULL, *what = NULL;
	struct request r = {0};
	uint64_t ts = 0;
	cJSON *o = cJSON_ParseWithLengthOpts(line, len, &end, false);

	if (!o || !cJSON_IsObject(o))
		what = "not a JSON object";
	else if (end && (size_t)(end - line) < len &&
		 strspn(end, " \t\r\n") < len - (size_t)(end - line))
		what = "text after the JSON object";
	else if ((what = check_keys(o)))
		;
	else if (!json_u64(o, "input_length", 1ull << 40, &r.input) || r.input == 0)
		what = "input_length must be an integer >= 1";
	else if (!json_u64(o, "output_length", 1ull << 40, &r.output))
		what = "output_length must be an integer >= 0";
	else if (cJSON_GetObjectItemCaseSensitive(o, "timestamp") &&
		 !json_u64(o, "timestamp", UINT64_MAX >> 11, &ts))
		what = "timestamp must be an integer >= 0 (milliseconds)";
	else if (cJSON_GetObjectItemCaseSensitive(o, "timestamp"))
		r.arrival = (double)ts / 1000.0;
	if (!what) {
		const cJSON *ids = cJSON_GetObjectItemCaseSensitive(o, "hash_ids");
		uint64_t want = (r.input + TRACE_BLOCK - 1) / TRACE_BLOCK;
		size_t first = w->nids;
		const cJSON *id;
		if (!cJSON_IsArray(ids)) {
			what = "hash_ids must be an array";
		} else if ((uint64_t)cJSON_GetArraySize(ids) != want) {
			what = "hash_ids must hold ceil(input_length / 512) ids";
		} else {
			r.blocks = (const uint64_t *)(uintptr_t)w->nids;
			cJSON_ArrayForEach(id, ids) {
				if (!cJSON_IsNumber(id) || id->valuedouble < 0 ||
				    id->valuedouble > 9007199254740992.0 ||
				    id->valuedouble != (double)(uint64_t)id->valuedouble) {
					what = "hash_ids must be integers >= 0";
					break;
				}
				if (wl_push_id(w, (uint64_t)id->valuedouble)) {
					what = "out of memory";
					break;
				}
			}
		}
		if (what)
			w->nids = first; /* a rejected line leaves no ids behind */
	}
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
