/*
 * Private to src/io: what the worker-thread engine (io_threads.c) offers
 * the front end (io_engine.c).
 *
 * A header of its own, so that the engine declares its entry points
 * without including the front end, and the front end is the one file that
 * sees both engines.
 */
#ifndef HC_SRC_IO_THREADS_ENGINE_H
#define HC_SRC_IO_THREADS_ENGINE_H

#include "io/io_stream.h"

struct io_workers;

int io_workers_create(unsigned threads, struct io_workers **out);
void io_workers_destroy(struct io_workers *w);
/* One array at a time: the workers drain each before the next is taken. */
int io_workers_stream(struct io_workers *w, struct io_stream *s);

#endif
