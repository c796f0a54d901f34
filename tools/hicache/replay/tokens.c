/* Token sequences and page contents of a replay (see replay.h). */
#define _GNU_SOURCE
#include "replay.h"

#include <string.h>

/* Tokens of one whole block. Replay spends much of its --no-data time
 * here: the AVX2 clone does 8 tokens per instruction (SSE2 has no 32-bit
 * vector multiply, so the default build would stay scalar). */
__attribute__((target_clones("avx2", "default"))) static void fmix_block(uint32_t *out,
									 uint32_t base)
{
	for (uint32_t j = 0; j < TRACE_BLOCK; j++)
		out[j] = fmix32(base + j);
}

/* The tokens a request inserts: its input, and for a multi-turn request
 * also its output (the next round's prompt contains it, as a server's
 * decode would have cached it). Trace outputs are unknown: input only. */
uint64_t replay_insert_len(const struct request *r)
{
	return r->blocks ? r->input : r->input + r->output;
}

void replay_gen_tokens(const struct request *r, uint32_t *tok)
{
	if (r->blocks) {
		for (uint64_t i = 0; i < r->input; i += TRACE_BLOCK) {
			uint64_t base = r->blocks[i / TRACE_BLOCK] * TRACE_BLOCK;
			uint64_t len = r->input - i < TRACE_BLOCK ? r->input - i : TRACE_BLOCK;
			uint32_t *out = tok + i;
			/* b < 2^23 keeps b * 512 + j injective in 32 bits; beyond
			 * that the mix of a 64-bit value is used (collisions then
			 * only as likely as any 32-bit hash collision). */
			if ((base + TRACE_BLOCK - 1) >> 32) {
				for (uint64_t j = 0; j < len; j++)
					out[j] = (uint32_t)splitmix64(base + j);
			} else if (len == TRACE_BLOCK) {
				fmix_block(out, (uint32_t)base);
			} else {
				for (uint64_t j = 0; j < len; j++)
					out[j] = fmix32((uint32_t)(base + j));
			}
		}
	} else {
		uint64_t s = splitmix64(r->stream + 1);
		for (uint64_t i = 0; i < replay_insert_len(r); i++)
			tok[i] = (uint32_t)splitmix64(s + i);
	}
}

void replay_fill_page(uint8_t *dst, size_t len, uint32_t first, uint64_t page)
{
	uint64_t s = splitmix64((uint64_t)first << 32 | (page & 0xffffffffu));
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t w = s ^ ((i / 8) * 0x9e3779b97f4a7c15ull);
		memcpy(dst + i, &w, 8);
	}
	if (i < len) {
		uint64_t w = s ^ ((i / 8) * 0x9e3779b97f4a7c15ull);
		memcpy(dst + i, &w, len - i);
	}
}

/* Hybrid: the state after page `pages` of tok (a function of the prefix,
 * so a state served from any tier can be checked). */
void replay_fill_state(uint8_t *dst, size_t len, const uint32_t *tok, uint64_t pages, uint32_t ps)
{
	replay_fill_page(dst, len, tok[pages * ps - 1], pages | 1ull << 31);
}
