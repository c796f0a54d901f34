/* hicache config: show every configuration key, its effective value and
 * where that value came from (default, environment, JSON). */
#include "commands.h"

#include <hicache/hicache.h>

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char *source_name(enum hc_config_source s)
{
	switch (s) {
	case HC_CONFIG_FROM_DEFAULT: return "default";
	case HC_CONFIG_FROM_ENV: return "env";
	case HC_CONFIG_FROM_JSON: return "json";
	case HC_CONFIG_FROM_SET: return "set";
	}
	return "?";
}

static void print_key(const char *key, enum hc_config_type type, const char *env,
		      const char *value, enum hc_config_source source, const char *doc, void *arg)
{
	(void)type;
	bool verbose = *(bool *)arg;
	printf("%-26s %-16s %-8s", key, value, source_name(source));
	if (verbose)
		printf(" %-32s %s", env ? env : "-", doc);
	printf("\n");
}

int cmd_config(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *json = NULL;
	bool verbose = false;
	int c;
	while ((c = getopt_long(argc, argv, "c:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'c': json = optarg; break;
		case 'v': verbose = true; break;
		case 'h': return cli_help(stdout, "config");
		default: cli_usage(stderr, "config"); return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "hicache config: unexpected argument '%s'\n", argv[optind]);
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
