/* hicache — command-line tool. Uses only the public API. */
#include "commands.h"

#include <hicache/hicache.h>

#include <stdio.h>
#include <string.h>

static const struct cli_command commands[] = {
	{"keys", "print page keys, physical names and buckets of token ids read from stdin",
	 cmd_keys},
	{"config", "print every configuration key with its effective value and source", cmd_config},
	{"bench", "measure store set/get/exists throughput and batch latency (bench store)",
	 cmd_bench},
	{"fsck", "check every object of a file store; --repair removes the bad ones", cmd_fsck},
	{"ls", "count the pages, objects and bytes of a file store, with their ages", cmd_ls},
	{"gc", "delete the oldest pages of a file store down to a capacity", cmd_gc},
	{"replay", "replay a Mooncake trace or a multi-turn workload through L1, L2 and L3",
	 cmd_replay},
	{"help", "print the manual of a command (docs/man, also man hicache-<command>)", cmd_help},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: hicache <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\n'hicache help <command>' or 'hicache <command> --help' prints the "
		     "manual of\none command; 'hicache help' the manual of hicache.\n");
}

/* Failures reach the user once, through cli_report(); everything else the
 * library says (warnings, and more with HICACHE_LOG) goes to stderr. */
static void cli_log(enum hc_log_level level, const char *msg, void *arg)
{
	(void)arg;
	if (level != HC_LOG_ERROR)
		fprintf(stderr, "hicache: %s\n", msg);
}

int main(int argc, char **argv)
{
	hc_log_set_handler(cli_log, NULL);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("hicache %s\n", hc_version());
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[1], commands[i].name))
			continue;
		/* The same manual for every command, whatever its own parser does
		 * with a --help it sees first. */
		if (argc >= 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h")))
			return cli_help(stdout, commands[i].name);
		return commands[i].run(argc - 1, argv + 1);
	}
	fprintf(stderr, "hicache: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
