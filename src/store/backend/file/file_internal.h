/*
 * Private to the file backend: its state and the functions its files share.
 *
 *   file.c          open/close, direct-I/O probes, trust checks, the ops table
 *   file_io.c       put, get, feeds, exists, remove through the io engine
 *   file_cleaner.c  the capacity and watermark cleaner thread
 *   file_clear.c    remove_matching (hc_store_clear)
 *   file_tools.c    the offline tools: fsck, ls, gc (ops entries)
 */
#ifndef HC_SRC_STORE_FILE_INTERNAL_H
#define HC_SRC_STORE_FILE_INTERNAL_H

#include "store/backend.h"
#include "store/backend/file/file_lease.h"

#include <hicache/store.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define FILE_PATH_MAX (3 + HC_NAME_MAX) /* "ab/" + name */
#define TMP_NAME_MAX 80
/* Fresh names tried for an object whose temp name was taken. */
#define TEMP_RETRIES 4

struct file_be {
	size_t ndirs;
	char **dirs; /* real paths */
	int *dirfds;
	bool shared_group; /* l3_file_shared_group */
	_Atomic bool direct;
	_Atomic size_t align;
	size_t block; /* object block: the file systems' direct-I/O block */
	struct io_engine *io;
	_Atomic uint64_t seq;
	uint64_t nonce; /* this open's part of every temp name */

	/* capacity and the cleaner */
	uint64_t capacity_bytes;
	double high_pct, low_pct, interval_s;
	int64_t temp_age_ns;         /* l3_file_temp_max_age_s */
	_Atomic uint64_t used_bytes; /* objects written since the last scan, plus the scan */
	struct file_lease lease;
	/* struct hc_store_cleaner_stats, field by field */
	_Atomic uint64_t cs[sizeof(struct hc_store_cleaner_stats) / sizeof(uint64_t)];
	pthread_t cleaner;
	bool cleaner_started;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop;
	bool kick;
};

/* ---- file.c ---- */

/* A random 64-bit value (a temp name's nonce). */
uint64_t file_random_nonce(void);

/* ---- file_io.c ---- */

int file_put(void *p, struct store_obj *objs, size_t n);
int file_get(void *p, struct store_obj *objs, size_t n);
int file_put_feed(void *p, struct store_feed *f);
int file_get_feed(void *p, struct store_feed *f);
int64_t file_exists(void *p, struct store_obj *objs, size_t n, bool stop_at_miss);
int file_remove(void *p, struct store_obj *objs, size_t n);
int file_erase(void *p, struct store_obj *objs, size_t n);

/* ---- file_cleaner.c ---- */

void file_kick_cleaner(struct file_be *fb);
void *file_cleaner_main(void *arg);
void file_cleaner_stats(void *p, struct hc_store_cleaner_stats *out);

/* ---- file_clear.c ---- */

int64_t file_remove_matching(void *p, bool (*match)(const char *name, void *arg), void *arg);

/* The offline tools (ops entries; file_tools.c): over base dirs. */
int file_tool_fsck(const char *const *dirs, size_t ndirs, bool repair, int64_t temp_age_ns,
		   struct hc_fsck_report *out);
int file_tool_ls(const char *const *dirs, size_t ndirs, struct hc_ls_report *out);
int file_tool_gc(const char *const *dirs, size_t ndirs, uint64_t capacity_bytes,
		 uint64_t *removed_pages, uint64_t *removed_bytes);

#endif
