/*
 * libFuzzer target: one line of a Mooncake trace through hicache replay's
 * line parser (tools/hicache/replay/trace.c and the tokens.c it uses, compiled
 * into this target).
 * A line is either rejected with a message and leaves nothing behind, or
 * appends exactly one request whose block ids match its input length.
 */
#include "../../tools/hicache/replay/tokens.c"
#include "../../tools/hicache/replay/trace.c"

#include <assert.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct workload w = {0};
	char *line = malloc(size + 1);

	if (!line)
		return 0;
	memcpy(line, data, size);
	line[size] = '\0';
	const char *what = replay_parse_line(&w, line, size);
	if (what) {
		assert(w.n == 0 && w.nids == 0);
	} else {
		assert(w.n == 1);
		const struct request *r = &w.req[0];
		assert(r->input >= 1);
		assert(w.nids == (r->input + TRACE_BLOCK - 1) / TRACE_BLOCK);
		assert((uintptr_t)r->blocks == 0);
	}
	replay_wl_free(&w);
	free(line);
	return 0;
}
