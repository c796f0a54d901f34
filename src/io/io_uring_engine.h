/*
 * Private to src/io: what the io_uring engine offers the front end
 * (io_engine.c), and its test hook. The engine's own types and the
 * design of its chains are in io_ring.h, which includes this file.
 *
 * A header of its own, so that the front end can create and run the
 * engine without liburing's types or the ring's internals, and the engine
 * includes no front end to declare its entry points.
 */
#ifndef HC_SRC_IO_URING_ENGINE_H
#define HC_SRC_IO_URING_ENGINE_H

#include "io/io_stream.h"

#include <stddef.h>

struct io_ring_pool;

/* io_uring.c. create probes the kernel: on failure it returns -errno and
 * writes the reason to why (never calls util_fail: AUTO only logs it). */
int io_ring_pool_create(unsigned depth, struct io_ring_pool **out, char *why, size_t why_len);
void io_ring_pool_destroy(struct io_ring_pool *p);
/* Runs the stream to its end (requests not started when a ring breaks go
 * on in another ring); -errno only when no ring could be had at all. */
int io_ring_pool_stream(struct io_ring_pool *p, struct io_stream *s);

/* Test hook: how io_uring.c submits (io_uring_submit). A test may swap in
 * a function that makes the kernel take fewer SQEs, to reach the cut-chain
 * path. Not thread-safe; set it before any batch runs. */
struct io_uring;
extern int (*io_ring_submit_fn)(struct io_uring *ring);

#endif
