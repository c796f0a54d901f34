/* Library threads block every signal (issue 15 item 15): with a file
 * store (I/O worker threads and the cleaner), the store's async thread,
 * and a cache over it (its four threads and the device copy thread) all
 * started, every thread but the caller blocks every signal, and a signal
 * sent to the process waits for the thread that can take it: the
 * caller's handler runs on the caller, never on a library thread. */
#define _GNU_SOURCE
#include "controller_helpers.h"
#include "../store/store_test.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>

static _Atomic pid_t handled_on;

static void on_usr1(int sig)
{
	(void)sig;
	atomic_store(&handled_on, (pid_t)syscall(SYS_gettid));
}

/* SigBlk of thread tid, as a mask of signals 1..64. */
static unsigned long long sigblk(pid_t tid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return ~0ull; /* the thread ended meanwhile */
	unsigned long long mask = 0;
	bool found = false;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "SigBlk: %llx", &mask) == 1) {
			found = true;
			break;
		}
	fclose(f);
	if (!found)
		fail_msg("no SigBlk in %s", path);
	return mask;
}

/* Every thread but this one blocks every signal the kernel lets a thread
 * block (all but SIGKILL and SIGSTOP, whichever the mask asked). Returns
 * the number of threads checked. */
static int check_threads(void)
{
	pid_t self = (pid_t)syscall(SYS_gettid);
	/* 64 signals, SIGKILL (9) and SIGSTOP (19) never blockable; glibc
	 * keeps its two internal signals (32, 33) out of any mask it sets. */
	unsigned long long want = ~0ull & ~(1ull << (SIGKILL - 1)) & ~(1ull << (SIGSTOP - 1)) &
				  ~(1ull << 31) & ~(1ull << 32);
	DIR *d = opendir("/proc/self/task");
	assert_non_null(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid == self)
			continue;
		unsigned long long m = sigblk(tid);
		if ((m & want) != want) {
			char comm[64] = "?", p[64];
			snprintf(p, sizeof(p), "/proc/self/task/%d/comm", (int)tid);
			FILE *f = fopen(p, "r");
			if (f) {
				if (!fgets(comm, sizeof(comm), f))
					comm[0] = '\0';
				comm[strcspn(comm, "\n")] = '\0';
				fclose(f);
			}
			closedir(d);
			fail_msg("thread %d (%s) leaves signals unblocked: SigBlk %016llx",
				 (int)tid, comm, m);
		}
		n++;
	}
	closedir(d);
	return n;
}

static void every_thread_blocks_signals(void **state)
{
	(void)state;
	char dir[PATH_MAX], json[PATH_MAX + 256];
	st_mkdtemp(dir);
	/* Worker threads for the file store, and its cleaner. */
	snprintf(json, sizeof(json),
		 "{\"dirs\": [\"%s\"], \"use_direct_io\": false, \"io_engine\": \"threads\", "
		 "\"io_threads\": 2, \"l3_cleaner_interval_s\": 30}",
		 dir);
	struct ct t;
	memset(&t, 0, sizeof(t));
	assert_int_equal(st_open_json("file", json, "ct", 0, 1, false, &t.st), 0);
	struct hc_cache_opts o;
	ct_opts(&o, HC_WRITE_THROUGH, 64, 64);
	o.store = t.st;
	int rc = hc_cache_open(&o, &t.c);
	if (rc)
		fail_msg("hc_cache_open: %s (%s)", hc_strerror(rc), hc_last_error());

	/* The store's thread starts with its first started op. */
	struct hc_key key;
	memset(&key, 0x5a, sizeof(key));
	uint64_t page = 0;
	struct hc_store_op *op;
	assert_int_equal(hc_store_set_start(t.st, &key, 1, &page, NULL, &op), 0);
	assert_int_equal(hc_store_op_wait(op), 0);

	/* io workers 2, cleaner, store thread, 4 cache threads, copy thread. */
	assert_true(check_threads() >= 9);

	/* A signal for the process, while this thread blocks it: pending until
	 * this thread unblocks, unless some library thread takes it. */
	struct sigaction sa = {.sa_handler = on_usr1};
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
	sigset_t usr1, old;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	assert_int_equal(pthread_sigmask(SIG_BLOCK, &usr1, &old), 0);
	atomic_store(&handled_on, 0);
	assert_int_equal(kill(getpid(), SIGUSR1), 0);
	struct timespec ms50 = {0, 50 * 1000 * 1000};
	nanosleep(&ms50, NULL);
	assert_int_equal(atomic_load(&handled_on), 0); /* no library thread took it */
	assert_int_equal(pthread_sigmask(SIG_SETMASK, &old, NULL), 0);
	assert_int_equal(atomic_load(&handled_on), (pid_t)syscall(SYS_gettid));
	signal(SIGUSR1, SIG_DFL);

	ct_close(&t);
	st_rmrf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_thread_blocks_signals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
