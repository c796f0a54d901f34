/*
 * Private to src/io: the front end (io_engine.c), on top of both engines.
 *
 *   io_engine.c                            engine choice and dispatch
 *   io_uring_engine.h, io_threads_engine.h each engine's entry points
 *   io_stream.h                            the request stream the engines
 *                                          pull from, and the helpers
 *                                          they share
 *
 * The engines include io_stream.h (and their own headers), never this one:
 * only the front end sees both engines, so no engine reaches back above
 * itself. Code outside src/io that needs an io helper (io_openat_beneath)
 * or the test hook (io_ring_submit_fn) gets it through this header.
 */
#ifndef HC_SRC_IO_INTERNAL_H
#define HC_SRC_IO_INTERNAL_H

#include "io/io.h"
#include "io/io_stream.h"
#include "io/io_threads_engine.h"
#include "io/io_uring_engine.h"

#include <errno.h>
#include <limits.h>
#include <sys/types.h>
#include <sys/uio.h>

#define IO_DEFAULT_DEPTH 64
/* The sparse file table must stay under RLIMIT_NOFILE (the kernel refuses
 * a larger one with EMFILE), and the SQ holds 4 entries per page. */
#define IO_MAX_DEPTH 4096
#define IO_DEFAULT_THREADS 8
#define IO_MAX_THREADS 1024

struct io_engine {
	enum io_engine_kind kind; /* URING or THREADS, never AUTO */
	unsigned depth;
	struct io_ring_pool *rings; /* kind URING */
	struct io_workers *workers; /* kind THREADS */
};

#endif
