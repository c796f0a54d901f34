/* The hicache CLI: one subcommand per file, each with this signature.
 * argv[0] is the subcommand name. Returns the process exit status. */
#ifndef HC_TOOLS_COMMANDS_H
#define HC_TOOLS_COMMANDS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

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
int cmd_help(int argc, char **argv);

/* A whole decimal string in [min, max] (no sign, no spaces, no overflow). */
bool cli_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* Print "hicache: <what>: <hc_last_error() or hc_strerror(rc)>" to stderr. */
void cli_report(const char *what, int rc);

/* The manual pages, docs/man/<name>.1 ("hicache", "hicache-<command>"),
 * embedded by the build (cmake/embed_man.cmake); the table ends with
 * {NULL, NULL}. */
struct cli_man_page {
	const char *name;
	const char *text; /* roff source */
};
extern const struct cli_man_page cli_man_pages[];

/* Print the manual of a command (NULL: of hicache itself) as plain text:
 * what 'hicache help <command>' and 'hicache <command> --help' print.
 * Returns the exit status: 0, 1 (writing failed) or 2 (no such page). */
int cli_help(FILE *out, const char *command);
/* Print the command's SYNOPSIS as a usage line and where to read more:
 * for bad usage, on stderr. */
void cli_usage(FILE *out, const char *command);

#endif
