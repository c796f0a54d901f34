/*
 * Starting a library thread. Every thread the library starts blocks every
 * signal: a signal sent to the process then reaches one of the embedding
 * program's threads (the ones that did not block it), never a copy or I/O
 * thread that would run the program's handler in the middle of library
 * work, or be killed by it, or keep it from the thread that waits for it.
 */
#ifndef HC_SRC_UTIL_THREAD_H
#define HC_SRC_UTIL_THREAD_H

#include <pthread.h>

/* pthread_create(thread, NULL, fn, arg) with every signal blocked in the
 * new thread from its first instruction (it inherits the mask set around
 * the create; the caller's own mask is restored before this returns).
 * Returns 0 or a negative errno (-EAGAIN, ...). */
int util_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg);

#endif
