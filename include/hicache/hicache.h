/*
 * hicache — hierarchical KV-cache store for LLM inference.
 * Umbrella header: include this one.
 */
#ifndef HICACHE_H
#define HICACHE_H

#include <hicache/common.h>
#include <hicache/log.h>
#include <hicache/config.h>
#include <hicache/mem.h>
#include <hicache/key.h>
#include <hicache/pool.h>
#include <hicache/store.h>
#include <hicache/cache.h>

#endif /* HICACHE_H */
