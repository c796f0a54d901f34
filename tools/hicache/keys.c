/*
 * hicache keys: page keys, physical names and buckets of token ids read
 * from stdin.
 *
 * The input is streamed: bytes are parsed in large reads, tokens collect in
 * a batch of whole pages, each full batch is hashed as one chain call
 * (continuing from the last key) and printed; only a partial last page is
 * left unprinted. Millions of tokens take a fraction of a second.
 */
#define _GNU_SOURCE
#include "cli_opts.h"
#include "commands.h"

#include <hicache/hicache.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A page must fit in memory with room to spare; real page sizes are <= 1024. */
#define KEYS_PAGE_SIZE_MAX (1u << 24)
/* Tokens per chain call, rounded down to whole pages (at least one page). */
#define KEYS_BATCH_TOKENS (1u << 16)
#define KEYS_READ_BYTES (1u << 20)
#define KEYS_OUT_BYTES (1u << 20)
/* How much of a bad token an error message shows. */
#define KEYS_SHOW_MAX 32

struct keys_out {
	char *buf;
	size_t len;
	bool failed;
};

static void keys_flush(struct keys_out *o)
{
	if (o->len && !o->failed && fwrite(o->buf, 1, o->len, stdout) != o->len)
		o->failed = true;
	o->len = 0;
}

static char *keys_put_u64(char *p, uint64_t v)
{
	char tmp[24];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

struct keys_state {
	uint32_t page_size;
	const char *suffix;
	uint32_t *tokens; /* the batch being filled */
	size_t ntok;
	size_t cap; /* tokens per batch, a multiple of page_size */
	struct hc_key *keys;
	struct hc_key prior;
	bool have_prior;
	uint64_t page_index;
	struct keys_out out;
};

/* Hash and print every full page in the batch; keep the partial tail. */
static int keys_drain(struct keys_state *st)
{
	size_t npages = st->ntok / st->page_size;
	int64_t n;

	if (!npages)
		return 0;
	n = hc_key_chain(st->have_prior ? &st->prior : NULL, st->tokens, st->ntok, st->page_size,
			 st->keys, npages);
	if (n < 0) {
		cli_report("keys: hashing pages", (int)n);
		return 1;
	}
	for (int64_t i = 0; i < n; i++) {
		char name[HC_NAME_MAX], bucket[3];
		int len = hc_key_name(&st->keys[i], st->suffix, NULL, name, sizeof(name));
		if (len < 0) {
			cli_report("keys: physical name", len);
			return 1;
		}
		hc_key_bucket_hex(hc_key_route_hash(name), bucket);
		/* index + ' ' + hex + ' ' + name + ' ' + bucket + '\n' */
		if (st->out.len + 24 + HC_KEY_HEX_LEN + (size_t)len + 6 > KEYS_OUT_BYTES)
			keys_flush(&st->out);
		char *p = st->out.buf + st->out.len;
		p = keys_put_u64(p, st->page_index++);
		*p++ = ' ';
		memcpy(p, name, HC_KEY_HEX_LEN); /* the name starts with the key's hex */
		p += HC_KEY_HEX_LEN;
		*p++ = ' ';
		memcpy(p, name, (size_t)len);
		p += len;
		*p++ = ' ';
		*p++ = bucket[0];
		*p++ = bucket[1];
		*p++ = '\n';
		st->out.len = (size_t)(p - st->out.buf);
	}
	st->prior = st->keys[n - 1];
	st->have_prior = true;
	size_t used = (size_t)n * st->page_size;
	memmove(st->tokens, st->tokens + used, (st->ntok - used) * sizeof(*st->tokens));
	st->ntok -= used;
	return 0;
}

static void keys_bad_token(const char *shown, size_t shown_len, size_t full_len, uint64_t index,
			   uint64_t offset)
{
	char esc[4 * KEYS_SHOW_MAX + 1];
	size_t e = 0;

	/* The token may hold any bytes; keep the terminal safe. */
	for (size_t i = 0; i < shown_len; i++) {
		unsigned char c = (unsigned char)shown[i];
		if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'')
			esc[e++] = (char)c;
		else
			e += (size_t)snprintf(esc + e, sizeof(esc) - e, "\\x%02x", c);
	}
	esc[e] = '\0';
	fprintf(stderr,
		"hicache: keys: token %llu (byte offset %llu): '%s'%s is not a token id "
		"(decimal 0..4294967295)\n",
		(unsigned long long)index, (unsigned long long)offset, esc,
		full_len > shown_len ? "..." : "");
}

static bool keys_is_space(unsigned char c)
{
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* The token being parsed; it may span reads. */
struct keys_token {
	char shown[KEYS_SHOW_MAX];
	size_t len; /* bytes so far, 0 between tokens */
	uint64_t val;
	bool bad;       /* not a valid id; read on to its end to show it */
	uint64_t index; /* tokens completed before it */
	uint64_t start; /* byte offset of its first byte */
};

static int keys_end_token(struct keys_state *st, struct keys_token *t)
{
	if (t->bad) {
		keys_bad_token(t->shown, t->len < KEYS_SHOW_MAX ? t->len : KEYS_SHOW_MAX, t->len,
			       t->index, t->start);
		return 2;
	}
	st->tokens[st->ntok++] = (uint32_t)t->val;
	t->index++;
	t->len = 0;
	t->val = 0;
	return st->ntok == st->cap ? keys_drain(st) : 0;
}

/* Parse stdin into the batch, draining it whenever it fills. */
static int keys_run(struct keys_state *st)
{
	char *in = malloc(KEYS_READ_BYTES);
	struct keys_token t = {0};
	uint64_t offset = 0; /* byte offset of in[0] */
	int rc = 0;

	if (!in) {
		cli_report("keys: input buffer", -ENOMEM);
		return 1;
	}
	for (;;) {
		ssize_t got = read(STDIN_FILENO, in, KEYS_READ_BYTES);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			cli_report("keys: reading stdin", -errno);
			rc = 1;
			goto out;
		}
		if (!got)
			break;
		for (size_t i = 0; i < (size_t)got; i++) {
			unsigned char c = (unsigned char)in[i];
			if (keys_is_space(c)) {
				if (t.len && (rc = keys_end_token(st, &t)))
					goto out;
				continue;
			}
			if (!t.len)
				t.start = offset + i;
			if (t.len < KEYS_SHOW_MAX)
				t.shown[t.len] = (char)c;
			t.len++;
			if (c < '0' || c > '9')
				t.bad = true;
			else if (!t.bad)
				t.bad = (t.val = t.val * 10 + (c - '0')) > UINT32_MAX;
		}
		offset += (size_t)got;
	}
	if (t.len && (rc = keys_end_token(st, &t)))
		goto out;
	rc = keys_drain(st);
out:
	free(in);
	return rc;
}

/* The library reads "" as no model; on the command line it is more
 * likely an unset shell variable. */
static int parse_model(const char *arg, void *dst)
{
	if (!arg[0]) {
		fprintf(stderr, "hicache keys: --model is empty\n");
		return 2;
	}
	*(const char **)dst = arg;
	return 0;
}

int cmd_keys(int argc, char **argv)
{
	uint64_t page_size = 0, tp_rank = 0, tp_size = 0;
	bool have_rank = false, mla = false;
	const char *model = NULL, *salt = NULL, *extra = NULL;
	char suffix[HC_SUFFIX_MAX], page_want[64];
	struct keys_state st = {0};
	int first, rc;

	snprintf(page_want, sizeof(page_want), "a number in 1..%u", KEYS_PAGE_SIZE_MAX);
	const struct cli_opt opts[] = {
		CLI_OPT_U64("page-size", 'p', &page_size, 1, KEYS_PAGE_SIZE_MAX, page_want),
		CLI_OPT_CUSTOM("model", 'm', &model, parse_model, NULL),
		CLI_OPT_U64("tp-rank", 0, &tp_rank, 0, UINT32_MAX, "a number", .seen = &have_rank),
		CLI_OPT_U64("tp-size", 0, &tp_size, 1, UINT32_MAX, "a number of at least 1"),
		CLI_OPT_FLAG("mla", 0, &mla),
		CLI_OPT_STRING("salt", 0, &salt, 0, NULL),
		CLI_OPT_STRING("extra-key", 0, &extra, 0, NULL),
		CLI_OPT_HELP("help", 'h'),
	};
	rc = cli_opts_parse("keys", opts, CLI_OPTS_COUNT(opts), NULL, argc, argv, &first);
	if (rc == CLI_OPTS_HELP)
		return cli_help(stdout, "keys");
	if (rc)
		return rc;
	if (first < argc) {
		fprintf(stderr, "hicache keys: unexpected argument '%s'; tokens come from stdin\n",
			argv[first]);
		return 2;
	}
	if (!page_size) {
		fprintf(stderr, "hicache keys: --page-size is required (see --help)\n");
		return 2;
	}
	if (have_rank && !tp_size) {
		fprintf(stderr, "hicache keys: --tp-rank needs --tp-size\n");
		return 2;
	}
	rc = hc_key_suffix(model, (uint32_t)tp_rank, (uint32_t)tp_size, mla, suffix,
			   sizeof(suffix));
	if (rc < 0) {
		cli_report("keys: suffix", rc);
		return 2;
	}
	if (salt || extra) {
		rc = hc_key_seed(extra, salt, &st.prior);
		if (rc < 0) {
			cli_report("keys: namespace seed", rc);
			return 1;
		}
		st.have_prior = true;
	}

	st.page_size = (uint32_t)page_size;
	st.suffix = suffix;
	st.cap = page_size >= KEYS_BATCH_TOKENS ? page_size
						: KEYS_BATCH_TOKENS / page_size * page_size;
	st.tokens = malloc(st.cap * sizeof(*st.tokens));
	st.keys = malloc(st.cap / page_size * sizeof(*st.keys));
	st.out.buf = malloc(KEYS_OUT_BYTES);
	if (!st.tokens || !st.keys || !st.out.buf) {
		cli_report("keys: buffers", -ENOMEM);
		rc = 1;
	} else {
		rc = keys_run(&st);
		keys_flush(&st.out);
		if (fflush(stdout) != 0 || st.out.failed) {
			cli_report("keys: writing stdout", -EIO);
			rc = rc ? rc : 1;
		}
	}
	free(st.tokens);
	free(st.keys);
	free(st.out.buf);
	return rc;
}
