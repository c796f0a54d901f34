/* mem.lock: mlock on request, and a refused mlock fails the allocation
 * with RLIMIT_MEMLOCK in the message and the region unmapped. */
#include "mem_test.h"
#include "test_util.h"

#include <grp.h>
#include <sys/resource.h>
#include <sys/wait.h>

static void test_unlocked(void **state)
{
	(void)state;
	long long before = mt_status_kb("VmLck");
	struct hc_mem *m = NULL;
	assert_int_equal(hc_mem_alloc(4 * MB, NULL, &m), 0);
	assert_false(hc_mem_locked(m));
	assert_int_equal(mt_status_kb("VmLck"), before);
	hc_mem_free(m);
}

static void test_locked(void **state)
{
	(void)state;
	long long before = mt_status_kb("VmLck");
	for (int prefault = 0; prefault <= 1; prefault++) {
		struct hc_mem_opts o = mt_opts();
		o.lock = true;
		o.prefault = prefault;
		struct hc_mem *m = NULL;
		int rc = hc_mem_alloc(MB + 1, &o, &m);
		if (rc == -EPERM || rc == -ENOMEM) {
			print_message("mlock not permitted here: %s\n", hc_last_error());
			skip();
		}
		assert_int_equal(rc, 0);
		assert_true(hc_mem_locked(m));
		size_t mapped = hc_mem_mapped_len(m);
		assert_int_equal(mt_status_kb("VmLck"), before + (long long)(mapped >> 10));
		/* locked means resident, pre-fault or not */
		assert_int_equal(mt_not_resident(hc_mem_addr(m), mapped), 0);
		hc_mem_free(m);
		assert_int_equal(mt_status_kb("VmLck"), before);
	}
}

/* In a child: without CAP_IPC_LOCK and with a 64 KiB RLIMIT_MEMLOCK, locking
 * 4 MiB must fail cleanly. Returns the child's verdict as an exit code. */
static int refused_child(void)
{
	if (geteuid() == 0) {
		/* root ignores the limit: become nobody, dropping every capability */
		if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
			return 77;
	}
	struct rlimit rl = {64 << 10, 64 << 10};
	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		return 77;
	long long vm = mt_status_kb("VmSize");
	struct hc_mem_opts o = mt_opts();
	o.lock = true;
	struct hc_mem *m = (struct hc_mem *)(uintptr_t)1;
	int rc = hc_mem_alloc(16 * MB, &o, &m);
	if (rc != -ENOMEM && rc != -EPERM) {
		fprintf(stderr, "child: hc_mem_alloc gave %d, expected -ENOMEM or -EPERM\n", rc);
		return 1;
	}
	if (m) {
		fprintf(stderr, "child: *out not NULL on failure\n");
		return 1;
	}
	if (!strstr(hc_last_error(), "RLIMIT_MEMLOCK") || !strstr(hc_last_error(), "65536")) {
		fprintf(stderr, "child: message \"%s\" lacks RLIMIT_MEMLOCK and 65536\n",
			hc_last_error());
		return 1;
	}
	/* a leaked 16 MiB region would show */
	if (mt_status_kb("VmSize") >= vm + 8 * 1024) {
		fprintf(stderr, "child: VmSize grew from %lld to %lld kB\n", vm,
			mt_status_kb("VmSize"));
		return 1;
	}
	return 0;
}

static void test_refused(void **state)
{
	(void)state;
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(refused_child());
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unlocked),
		cmocka_unit_test(test_locked),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
