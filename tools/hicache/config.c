/* hicache config: show every configuration key, its effective value and
 * where that value came from (default, environment, JSON). */
#include "cli_opts.h"
#include "commands.h"

#include <hicache/hicache.h>

#include <stdio.h>
#include <string.h>

static const char *source_name(enum hc_config_source s)
{
	switch (s) {
	case HC_CONFIG_FROM_DEFAULT:
		return "default";
	case HC_CONFIG_FROM_ENV:
		return "env";
	case HC_CONFIG_FROM_JSON:
		return "json";
	case HC_CONFIG_FROM_SET:
		return "set";
	}
	return "?";
}

static void print_key(const char *key, enum hc_config_type type, const char *env, const char *value,
		      enum hc_config_source source, const char *doc, void *arg)
{
	(void)type;
	bool verbose = *(bool *)arg;
	printf("%-26s %-16s %-8s", key, value, source_name(source));
	if (verbose)
		printf(" %-32s %s", env ? env : "-", doc);
	printf("\n");
}

/* The common wording, then the synopsis (config's usage errors always
 * showed it). */
static void bad_option(const char *cmd, const char *word, int letter, bool missing_value)
{
	(void)letter;
	if (missing_value)
		fprintf(stderr, "hicache %s: option '%s' needs a value\n", cmd, word);
	else
		fprintf(stderr, "hicache %s: unknown option '%s' (see --help)\n", cmd, word);
	cli_usage(stderr, cmd);
}

int cmd_config(int argc, char **argv)
{
	const char *json = NULL;
	bool verbose = false;
	int first;
	const struct cli_opt opts[] = {
		CLI_OPT_STRING("config", 'c', &json, 0, NULL),
		CLI_OPT_FLAG("verbose", 'v', &verbose),
		CLI_OPT_HELP("help", 'h'),
	};
	int prc = cli_opts_parse("config", opts, CLI_OPTS_COUNT(opts), bad_option, argc, argv,
				 &first);
	if (prc == CLI_OPTS_HELP)
		return cli_help(stdout, "config");
	if (prc)
		return prc;
	if (first != argc) {
		fprintf(stderr, "hicache config: unexpected argument '%s'\n", argv[first]);
		return 2;
	}
	struct hc_config *cfg = NULL;
	int rc = hc_config_create(json, &cfg);
	if (rc) {
		cli_report("config", rc);
		return 1;
	}
	hc_config_foreach(cfg, print_key, &verbose);
	hc_config_destroy(cfg);
	return 0;
}
