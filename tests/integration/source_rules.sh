#!/bin/bash
# Mechanical rules for the sources (STYLE.md anti-patterns):
# - no unbounded string or number handling: strcpy, strcat, sprintf,
#   vsprintf, strncpy, atoi, atol, atoll, strtok, gets;
# - the library never prints to stdout, exits or aborts: no printf, puts,
#   exit( or abort( under src/;
# - the CLI uses the public API only: no include of a src/ header in tools/.
set -uo pipefail
: "${HC_SOURCE_DIR:?}"
cd "$HC_SOURCE_DIR" || exit 1
bad=0
report() {
	if [ -n "$2" ]; then
		echo "$1:"
		echo "$2"
		bad=1
	fi
}
report "unbounded string/number functions" \
	"$(grep -rnE '\b(strcpy|strcat|sprintf|vsprintf|strncpy|atoi|atol|atoll|strtok|gets)\s*\(' \
		src tools bench --include='*.c' --include='*.h')"
report "printing to stdout, exiting or aborting inside the library" \
	"$(grep -rnE '(^|[^a-z_])(printf|puts|putchar|exit|abort|_exit)\s*\(' src --include='*.c' |
		grep -vE 'snprintf|vsnprintf|fprintf\(stderr')"
report "the CLI including private headers" \
	"$(grep -rnE '#include "(\.\./)*(src/|util/|io/|store/|pool/|mem/|key/|cache/)' tools)"
[ $bad -eq 0 ] && echo "source rules: ok"
exit $bad
