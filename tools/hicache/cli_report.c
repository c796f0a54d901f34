/* The one way a subcommand reports a failure to the user (commands.h). A
 * file of its own, below main.c and help.c, so neither includes the other,
 * and a fuzz target that links the CLI's parser can keep its own quiet one. */
#include "commands.h"

#include <hicache/hicache.h>

#include <stdio.h>

void cli_report(const char *what, int rc)
{
	const char *detail = hc_last_error();
	fprintf(stderr, "hicache: %s: %s\n", what, detail[0] ? detail : hc_strerror(rc));
}
