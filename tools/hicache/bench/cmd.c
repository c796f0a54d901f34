/*
 * hicache bench: the command (cmd_bench), which picks a benchmark by name
 * (only "store" so far). The files beside it share bench.h.
 */
#define _GNU_SOURCE
#include "bench.h"

#include "../commands.h"

#include <stdio.h>
#include <string.h>

int cmd_bench(int argc, char **argv)
{
	if (argc < 2) {
		cli_usage(stderr, "bench");
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return cli_help(stdout, "bench");
	if (strcmp(argv[1], "store")) {
		fprintf(stderr, "hicache bench: unknown benchmark '%s' (only 'store')\n", argv[1]);
		return 2;
	}
	return bench_store(argc - 1, argv + 1);
}
