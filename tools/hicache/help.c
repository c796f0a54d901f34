/*
 * hicache help: the manual pages of the CLI as plain text.
 *
 * docs/man/hicache.1 and docs/man/hicache-<command>.1 are the one source:
 * the build embeds them (cmake/embed_man.cmake, cli_man_pages[]), so
 * `hicache help CMD`, `hicache CMD --help` and `man hicache-CMD` read the
 * same text. The pages keep to the part of man(7) rendered here, without
 * filling: every text line of the source is one line of output, so they
 * are written with lines that read well as they stand.
 *
 *   .SH T / .SS T        heading at column 0 / 2; T may be quoted. The
 *                        SYNOPSIS lines print as "usage: ..." instead
 *   .PP .P .LP .sp       a blank line
 *   .TP                  the next line is a tag at the indent, the text
 *                        after it 4 columns further in
 *   .IP [T]              the same with T as the tag (none: no tag line)
 *   .RS / .RE            indent 4 more / back
 *   .B .I .BR .IR ...    font macros: their words, quotes removed
 *   .TH .nf .fi .EX .EE .br .ad .na .nh and comments: nothing
 *   \fB \fI \fR \fP      dropped;  \- \e \& \(aq \(dq \(bu ...: the character
 *
 * Body text starts at column 4. Anything else is printed as it stands,
 * so that a page using more of man(7) shows it (tests/integration/
 * cli_help.sh checks that no page does).
 */
#define _GNU_SOURCE
#include "commands.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HELP_INDENT 4 /* body text, .TP tags */
#define HELP_STEP 4   /* .TP text, .RS */
#define HELP_RS_MAX 8

struct help_out {
	FILE *out;
	int base; /* indent of body text and tags */
	int rs[HELP_RS_MAX];
	int nrs;
	bool tag_next; /* .TP: the next line is the tag */
	bool tagged;   /* inside a tagged paragraph: text at base + step */
	char tag[256]; /* a tag not printed yet: it may share a line */
	bool blank;    /* a blank line is due before the next output */
	bool headed;   /* a heading was the last thing printed */
	int synopsis;  /* in SYNOPSIS: 1 + lines printed, else 0 */
	bool started;  /* something was printed */
};

/* \(xx special characters the pages use. */
static const char *special(const char *name)
{
	static const char *const map[][2] = {
		{"aq", "'"},  {"dq", "\""}, {"lq", "\""}, {"rq", "\""}, {"bu", "*"},
		{"em", "--"}, {"en", "-"},  {"ti", "~"},  {"ha", "^"},  {"mu", "x"},
		{"<=", "<="}, {">=", ">="}, {"->", "->"},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strncmp(name, map[i][0], 2))
			return map[i][1];
	return NULL;
}

/* Text of a roff line with its escapes resolved, into buf (NUL-ended). */
static void unescape(const char *s, size_t len, char *buf, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < len && o + 3 < cap; i++) {
		if (s[i] != '\\' || i + 1 == len) {
			buf[o++] = s[i];
			continue;
		}
		char c = s[++i];
		const char *sp;
		switch (c) {
		case 'f': /* font: \fB, \f(CW, \f[...] */
			if (i + 1 < len && s[i + 1] == '(')
				i += 3;
			else if (i + 1 < len && s[i + 1] == '[')
				while (i < len && s[i] != ']')
					i++;
			else
				i++;
			break;
		case '-':
			buf[o++] = '-';
			break;
		case 'e':
		case '\\':
			buf[o++] = '\\';
			break;
		case '.':
			buf[o++] = '.';
			break;
		case ' ':
		case '~':
			buf[o++] = ' ';
			break;
		case '&':
		case '|':
		case '^':
			break;
		case '"':
			i = len;
			break; /* a comment to the end of the line */
		case '(':
			sp = i + 2 < len ? special(s + i + 1) : NULL;
			if (sp) {
				for (; *sp && o + 3 < cap; sp++)
					buf[o++] = *sp;
				i += 2;
				break;
			}
			__attribute__((fallthrough)); /* shown as it stands */
		default:
			buf[o++] = '\\';
			buf[o++] = c;
		}
	}
	buf[o] = '\0';
}

/* The words of a macro's arguments, quotes removed, joined by sep. */
static void macro_args(const char *s, const char *sep, char *buf, size_t cap)
{
	size_t o = 0;
	bool first = true;

	buf[0] = '\0';
	while (*s) {
		while (*s == ' ')
			s++;
		if (!*s)
			break;
		const char *w = s;
		size_t n;
		if (*s == '"') {
			w = ++s;
			while (*s && *s != '"')
				s++;
			n = (size_t)(s - w);
			if (*s)
				s++;
		} else {
			while (*s && *s != ' ')
				s++;
			n = (size_t)(s - w);
		}
		size_t sl = first ? 0 : strlen(sep);
		if (o + sl + n + 1 > cap)
			break;
		memcpy(buf + o, sep, sl);
		memcpy(buf + o + sl, w, n);
		o += sl + n;
		buf[o] = '\0';
		first = false;
	}
}

static void put_line(struct help_out *h, int indent, const char *text)
{
	if (h->blank && h->started && !h->headed)
		fputc('\n', h->out);
	h->blank = false;
	h->headed = false;
	h->started = true;
	fprintf(h->out, "%*s%s\n", indent, "", text);
}

/* A tag waiting for its text goes out alone. */
static void flush_tag(struct help_out *h)
{
	if (h->tag[0])
		put_line(h, h->base, h->tag);
	h->tag[0] = '\0';
}

static void emit(struct help_out *h, int indent, const char *raw)
{
	char text[1024];

	unescape(raw, strlen(raw), text, sizeof(text));
	if (h->synopsis) {
		/* The synopsis reads as the usage lines of a --help. */
		char line[sizeof(text) + 8];
		snprintf(line, sizeof(line), "%s%s", h->synopsis++ == 1 ? "usage: " : "       ",
			 text);
		put_line(h, 0, line);
		return;
	}
	if (h->tag[0]) {
		/* A tag narrower than the step shares the line, as man(1) has it. */
		int w = (int)strlen(h->tag);
		char line[sizeof(h->tag) + sizeof(text) + HELP_STEP];
		if (w < HELP_STEP && indent == h->base + HELP_STEP) {
			snprintf(line, sizeof(line), "%-*s%s", HELP_STEP, h->tag, text);
			h->tag[0] = '\0';
			put_line(h, h->base, line);
			return;
		}
		flush_tag(h);
	}
	put_line(h, indent, text);
}

static void paragraph(struct help_out *h)
{
	flush_tag(h);
	h->blank = true;
	h->tag_next = false;
	h->tagged = false;
}

/* One text line (or a font macro's words): a tag or body text. */
static void text_line(struct help_out *h, const char *text)
{
	if (h->tag_next) {
		unescape(text, strlen(text), h->tag, sizeof(h->tag));
		h->tag_next = false;
		h->tagged = true;
		return;
	}
	emit(h, h->tagged ? h->base + HELP_STEP : h->base, text);
}

static bool is_macro(const char *line, const char *name)
{
	size_t n = strlen(name);
	return !strncmp(line + 1, name, n) && (line[n + 1] == ' ' || !line[n + 1]);
}

static void request(struct help_out *h, const char *line)
{
	static const char *const ignored[] = {"TH", "nf", "fi", "EX", "EE", "br", "ad", "na", "nh"};
	static const char *const alternating[] = {"BR", "RB", "IR", "RI", "BI", "IB"};
	const char *args = strchr(line, ' ');
	char words[1024];

	args = args ? args + 1 : "";
	if (!line[1] || !strncmp(line + 1, "\\\"", 2)) /* empty request, comment */
		return;
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		if (is_macro(line, ignored[i]))
			return;
	if (is_macro(line, "SH") || is_macro(line, "SS")) {
		macro_args(args, " ", words, sizeof(words));
		h->nrs = 0;
		h->base = HELP_INDENT;
		paragraph(h);
		h->synopsis = line[2] == 'H' && !strcmp(words, "SYNOPSIS");
		if (h->synopsis)
			return; /* its lines say "usage:" instead */
		emit(h, line[2] == 'H' ? 0 : 2, words);
		h->headed = true;
		return;
	}
	if (is_macro(line, "PP") || is_macro(line, "P") || is_macro(line, "LP") ||
	    is_macro(line, "sp")) {
		paragraph(h);
		return;
	}
	if (is_macro(line, "TP")) {
		paragraph(h);
		h->tag_next = true;
		return;
	}
	if (is_macro(line, "IP")) {
		paragraph(h);
		macro_args(args, " ", words, sizeof(words));
		/* .IP tag width: the tag is the first word only */
		char *sp = words[0] == '\0' ? NULL : strchr(words, ' ');
		if (sp)
			*sp = '\0';
		unescape(words, strlen(words), h->tag, sizeof(h->tag));
		h->tagged = true;
		return;
	}
	if (is_macro(line, "RS") || is_macro(line, "RE")) {
		flush_tag(h);
		if (line[2] == 'S' && h->nrs < HELP_RS_MAX) {
			h->rs[h->nrs++] = h->base;
			h->base = (h->tagged ? h->base + HELP_STEP : h->base) + HELP_STEP;
		} else if (line[2] == 'E' && h->nrs) {
			h->base = h->rs[--h->nrs];
		}
		h->tagged = false;
		h->tag_next = false;
		return;
	}
	if (is_macro(line, "B") || is_macro(line, "I")) {
		macro_args(args, " ", words, sizeof(words));
		text_line(h, words);
		return;
	}
	for (size_t i = 0; i < sizeof(alternating) / sizeof(alternating[0]); i++) {
		if (is_macro(line, alternating[i])) {
			macro_args(args, "", words, sizeof(words));
			text_line(h, words);
			return;
		}
	}
	text_line(h, line); /* not rendered here: shown as it stands */
}

static void render(const char *page, FILE *out)
{
	struct help_out h = {.out = out, .base = HELP_INDENT};
	char line[1024];

	for (const char *p = page; *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		if (n >= sizeof(line))
			n = sizeof(line) - 1;
		memcpy(line, p, n);
		line[n] = '\0';
		p = nl ? nl + 1 : p + n;
		if (line[0] == '.' || line[0] == '\'')
			request(&h, line);
		else if (line[0])
			text_line(&h, line);
		else
			paragraph(&h);
	}
	flush_tag(&h);
}

/* The page of a command: "hicache-<command>", or "hicache" for NULL. */
static const char *page_text(const char *command)
{
	char name[64];

	snprintf(name, sizeof(name), command ? "hicache-%s" : "hicache", command);
	for (const struct cli_man_page *m = cli_man_pages; m->name; m++)
		if (!strcmp(m->name, name))
			return m->text;
	return NULL;
}

int cli_help(FILE *out, const char *command)
{
	const char *text = page_text(command);

	if (!text) {
		fprintf(stderr, "hicache: no manual page for '%s'\n", command ? command : "");
		return 2;
	}
	render(text, out);
	if (fflush(out)) {
		cli_report("help: writing stdout", -EIO);
		return 1;
	}
	return 0;
}

void cli_usage(FILE *out, const char *command)
{
	const char *text = page_text(command);
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = text ? open_memstream(&buf, &len) : NULL;

	if (mem) {
		render(text, mem);
		fclose(mem);
	}
	/* The usage block: from its first line to the blank line after it. */
	const char *u = buf ? strstr(buf, "usage: ") : NULL;
	const char *end = u ? strstr(u, "\n\n") : NULL;
	if (u)
		fprintf(out, "%.*s\n", end ? (int)(end - u) : (int)strlen(u), u);
	free(buf);
	fprintf(out, "'hicache help %s' describes every option.\n", command ? command : "");
}

int cmd_help(int argc, char **argv)
{
	if (argc > 2) {
		fprintf(stderr, "hicache help: one command at most (see 'hicache help help')\n");
		return 2;
	}
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
		return cli_help(stdout, "help");
	return cli_help(stdout, argc == 2 ? argv[1] : NULL);
}
