/* The hicache CLI: one subcommand per file, each with this signature.
 * argv[0] is the subcommand name. Returns the process exit status. */
#ifndef HC_TOOLS_COMMANDS_H
#define HC_TOOLS_COMMANDS_H

#include <stdbool.h>
#include <stdint.h>

struct cli_command {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv);
};

int cmd_keys(int argc, char **argv);
int cmd_config(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_fsck(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_replay(int argc, char **argv);

/* A whole decimal string in [min, max] (no sign, no spaces, no overflow). */
bool cli_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* Print "hicache: <what>: <hc_last_error() or hc_strerror(rc)>" to stderr. */
void cli_report(const char *what, int rc);

#endif
