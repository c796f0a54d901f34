/* The CLI's table-driven option parser (cli_opts.h). */
#define _GNU_SOURCE
#include "cli_opts.h"

#include "commands.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* More options than any subcommand has; a table over it is a bug. */
#define CLI_OPTS_MAX 64
/* getopt_long's value for the option of table index i without a letter. */
#define LONG_ONLY_BASE 256

bool cli_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (v < min || v > max)
		return false;
	*out = v;
	return true;
}

int cli_opts_bad_value(const char *cmd, const char *opt, const char *val, const char *want)
{
	fprintf(stderr, "hicache %s: --%s '%s' is not %s\n", cmd, opt, val, want);
	return 2;
}

bool cli_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	static const char units[] = "kmgt";
	char digits[32];
	size_t n = strspn(s, "0123456789");
	uint64_t v, mul = 1;

	if (!n || n >= sizeof(digits))
		return false;
	memcpy(digits, s, n);
	digits[n] = '\0';
	if (!cli_parse_u64(digits, 0, UINT64_MAX, &v))
		return false;
	s += n;
	if (*s) {
		const char *u = strchr(units, s[0] | 0x20);
		if (!u || !*u)
			return false;
		mul = 1ull << (10 * (u - units + 1));
		s++;
		if (*s && strcmp(s, "iB") && strcmp(s, "ib"))
			return false;
	}
	if (v > UINT64_MAX / mul)
		return false;
	v *= mul;
	if (v < min || v > max)
		return false;
	*out = v;
	return true;
}

/* "a, b or c" from a NULL-ended list, into buf. */
static const char *list_choices(const char *const *choices, char *buf, size_t size)
{
	size_t n = 0, len = 0;
	while (choices[n])
		n++;
	buf[0] = '\0';
	for (size_t i = 0; i < n && len < size; i++) {
		const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
		int w = snprintf(buf + len, size - len, "%s%s", sep, choices[i]);
		if (w < 0)
			break;
		len += (size_t)w;
	}
	return buf;
}

/* One option's value into its destination: 0, or 2 (said). */
static int take(const char *cmd, const struct cli_opt *o, const char *arg)
{
	static const char *const on_off[] = {"on", "off", NULL};
	char buf[256];
	const char *want = o->want;
	uint64_t v;
	bool ok = true;

	switch (o->kind) {
	case CLI_FLAG:
		*(bool *)o->dst = true;
		break;
	case CLI_HELP:
		break;
	case CLI_STRING:
		ok = !(o->min && !arg[0]);
		if (ok)
			*(const char **)o->dst = arg;
		break;
	case CLI_U64:
		ok = cli_parse_u64(arg, o->min, o->max, (uint64_t *)o->dst);
		break;
	case CLI_UINT:
		ok = cli_parse_u64(arg, o->min, o->max < UINT_MAX ? o->max : UINT_MAX, &v);
		if (ok)
			*(unsigned *)o->dst = (unsigned)v;
		break;
	case CLI_SIZE:
		ok = cli_parse_size(arg, o->min, o->max, (uint64_t *)o->dst);
		break;
	case CLI_DOUBLE: {
		char *end;
		errno = 0;
		double x = strtod(arg, &end);
		ok = !errno && !*end && end != arg && x > o->dmin && x <= o->dmax;
		if (ok)
			*(double *)o->dst = x;
		break;
	}
	case CLI_ON_OFF:
		ok = !strcmp(arg, "on") || !strcmp(arg, "off");
		if (ok)
			*(bool *)o->dst = !strcmp(arg, "on");
		if (!want)
			want = list_choices(on_off, buf, sizeof(buf));
		break;
	case CLI_ENUM: {
		int i = 0;
		while (o->choices[i] && strcmp(arg, o->choices[i]))
			i++;
		ok = o->choices[i] != NULL;
		if (ok) {
			*(int *)o->dst = i;
			if (o->as_name)
				*o->as_name = o->choices[i];
		}
		if (!want)
			want = list_choices(o->choices, buf, sizeof(buf));
		break;
	}
	case CLI_CUSTOM: {
		int rc = o->parse(arg, o->dst);
		if (rc == 2)
			return 2;
		ok = rc == 0;
		break;
	}
	}
	if (!ok)
		return cli_opts_bad_value(cmd, o->name, arg, want ? want : "valid");
	if (o->seen)
		*o->seen = true;
	return 0;
}

static void common_bad_option(const char *cmd, const char *word, int letter, bool missing)
{
	(void)letter;
	if (missing)
		fprintf(stderr, "hicache %s: option '%s' needs a value\n", cmd, word);
	else
		fprintf(stderr, "hicache %s: unknown option '%s' (see --help)\n", cmd, word);
}

int cli_opts_parse(const char *cmd, const struct cli_opt *table, size_t n,
		   cli_opts_bad_option_fn bad_option, int argc, char **argv, int *first)
{
	struct option longopts[CLI_OPTS_MAX + 1];
	char shortopts[3 * CLI_OPTS_MAX + 2];
	size_t ns = 0;
	int c;

	if (n > CLI_OPTS_MAX) {
		fprintf(stderr, "hicache %s: too many options in the table\n", cmd);
		return 2;
	}
	shortopts[ns++] = ':'; /* a missing value is ':', told apart from '?' */
	for (size_t i = 0; i < n; i++) {
		const struct cli_opt *o = &table[i];
		bool has_arg = o->kind != CLI_FLAG && o->kind != CLI_HELP;
		longopts[i] = (struct option){o->name, has_arg ? required_argument : no_argument,
					      NULL,
					      o->letter ? o->letter : LONG_ONLY_BASE + (int)i};
		if (o->letter) {
			shortopts[ns++] = (char)o->letter;
			if (has_arg)
				shortopts[ns++] = ':';
		}
	}
	longopts[n] = (struct option){NULL, 0, NULL, 0};
	shortopts[ns] = '\0';
	if (!bad_option)
		bad_option = common_bad_option;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		if (c == ':' || c == '?') {
			const char *word = argv[optind - 1];
			int letter = strncmp(word, "--", 2) && optopt > 0 && optopt < LONG_ONLY_BASE
					     ? optopt
					     : 0;
			bad_option(cmd, word, letter, c == ':');
			return 2;
		}
		const struct cli_opt *o = NULL;
		if (c >= LONG_ONLY_BASE)
			o = &table[c - LONG_ONLY_BASE];
		else
			for (size_t i = 0; i < n && !o; i++)
				if (table[i].letter == c)
					o = &table[i];
		if (!o)
			return 2; /* not reached: getopt returns only what the table has */
		if (o->kind == CLI_HELP)
			return CLI_OPTS_HELP;
		int rc = take(cmd, o, optarg);
		if (rc)
			return rc;
	}
	*first = optind;
	return 0;
}
