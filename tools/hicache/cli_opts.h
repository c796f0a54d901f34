/*
 * The CLI's option layer: a subcommand describes its options in a table
 * (name, short letter, kind, destination, range, what a bad value is
 * told it should be) and cli_opts_parse() runs getopt_long over it. Every
 * value is checked as it is read; a bad one is said on stderr as
 * "hicache <cmd>: --<name> '<value>' is not <want>" (exit status 2 for
 * the caller). What needs more than one flag is checked by the caller
 * after the parse.
 */
#ifndef HC_TOOLS_CLI_OPTS_H
#define HC_TOOLS_CLI_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cli_opt_kind {
	CLI_FLAG,   /* no value: *(bool *)dst = true */
	CLI_STRING, /* *(const char **)dst = the value; min 1: not empty */
	CLI_U64,    /* *(uint64_t *)dst: a decimal in [min, max] */
	CLI_UINT,   /* *(unsigned *)dst: a decimal in [min, max] (max <= UINT_MAX) */
	CLI_SIZE,   /* *(uint64_t *)dst: bytes, K/M/G/T suffix (powers of 1024), in [min, max] */
	CLI_DOUBLE, /* *(double *)dst: a number > dmin and <= dmax */
	CLI_ON_OFF, /* *(bool *)dst: "on" or "off" */
	CLI_ENUM,   /* *(int *)dst: the index of the value in choices (NULL-ended) */
	CLI_CUSTOM, /* parse(value, dst) */
	CLI_HELP,   /* no value: cli_opts_parse returns CLI_OPTS_HELP */
};

struct cli_opt {
	const char *name; /* long name, without "--" */
	int letter;       /* short option, 0 = none */
	enum cli_opt_kind kind;
	void *dst;
	uint64_t min, max;          /* CLI_U64, CLI_UINT, CLI_SIZE; CLI_STRING min */
	double dmin, dmax;          /* CLI_DOUBLE */
	const char *const *choices; /* CLI_ENUM */
	/* The end of the bad-value message ("a number in 1..64"); NULL: a
	 * CLI_ENUM or CLI_ON_OFF lists its choices ("a, b or c"). */
	const char *want;
	/* CLI_CUSTOM: 0 taken, 1 a bad value (said with want), 2 a bad value
	 * the parser said itself. */
	int (*parse)(const char *arg, void *dst);
	bool *seen; /* when not NULL, set true when the option is given */
	/* CLI_ENUM: when not NULL, also the chosen name. */
	const char **as_name;
};

/* Table entries, one per kind (the name first: tests/integration/
 * cli_help.sh finds a command's options by CLI_OPT_*("name"). The
 * trailing arguments are more designated fields: .seen = &given. One
 * line each, as a table reads. */
/* clang-format off */
#define CLI_OPT_FLAG(name, letter, d, ...) {name, letter, CLI_FLAG, .dst = (d), __VA_ARGS__}
#define CLI_OPT_HELP(name, letter) {name, letter, CLI_HELP, .dst = NULL}
#define CLI_OPT_STRING(name, letter, d, nonempty, want_, ...)                                    \
	{name, letter, CLI_STRING, .dst = (d), .min = (nonempty), .want = (want_), __VA_ARGS__}
#define CLI_OPT_U64(name, letter, d, lo, hi, want_, ...)                                         \
	{name, letter, CLI_U64, .dst = (d), .min = (lo), .max = (hi), .want = (want_), __VA_ARGS__}
#define CLI_OPT_UINT(name, letter, d, lo, hi, want_, ...)                                        \
	{name, letter, CLI_UINT, .dst = (d), .min = (lo), .max = (hi), .want = (want_), __VA_ARGS__}
#define CLI_OPT_SIZE(name, letter, d, lo, hi, want_, ...)                                        \
	{name, letter, CLI_SIZE, .dst = (d), .min = (lo), .max = (hi), .want = (want_), __VA_ARGS__}
#define CLI_OPT_DOUBLE(name, letter, d, lo, hi, want_, ...)                                      \
	{name, letter, CLI_DOUBLE, .dst = (d), .dmin = (lo), .dmax = (hi), .want = (want_),      \
	 __VA_ARGS__}
#define CLI_OPT_ON_OFF(name, letter, d, ...) {name, letter, CLI_ON_OFF, .dst = (d), __VA_ARGS__}
#define CLI_OPT_ENUM(name, letter, d, choices_, ...)                                             \
	{name, letter, CLI_ENUM, .dst = (d), .choices = (choices_), __VA_ARGS__}
#define CLI_OPT_CUSTOM(name, letter, d, parse_, want_, ...)                                      \
	{name, letter, CLI_CUSTOM, .dst = (d), .parse = (parse_), .want = (want_), __VA_ARGS__}
/* clang-format on */

#define CLI_OPTS_COUNT(table) (sizeof(table) / sizeof((table)[0]))

/* How a subcommand words an unknown option or a missing value (word is
 * argv's word, letter the short option when the word is one, else 0);
 * NULL: the common wording, "option '<word>' needs a value" and "unknown
 * option '<word>' (see --help)". */
typedef void (*cli_opts_bad_option_fn)(const char *cmd, const char *word, int letter,
				       bool missing_value);

#define CLI_OPTS_HELP (-1)

/* Parse argv[1..] against the n options of table. Returns 0 with *first
 * the index of the first operand, CLI_OPTS_HELP when a CLI_HELP option
 * came (the options after it are not read), or 2 for bad usage (said on
 * stderr, "hicache <cmd>: ..."). */
int cli_opts_parse(const char *cmd, const struct cli_opt *table, size_t n,
		   cli_opts_bad_option_fn bad_option, int argc, char **argv, int *first);

/* Print "hicache <cmd>: --<opt> '<val>' is not <want>"; returns 2. */
int cli_opts_bad_value(const char *cmd, const char *opt, const char *val, const char *want);

/* A byte count: decimal digits, then optionally K, M, G or T (powers of
 * 1024, either case, "iB" may follow), within [min, max]. */
bool cli_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out);

#endif
