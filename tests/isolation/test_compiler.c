/* SPDX-License-Identifier: MIT */
/*
 * Compiler isolation against a real jitcached with real workers: a worker
 * that crashes, hangs past --compile-timeout or runs out of memory under
 * --worker-memory (provoked with the test-only switch JITCACHE_TEST_FAULTS=1
 * and a request's test_fault) costs the client one clear error and the daemon
 * one worker. The daemon keeps serving hits and compiles, replaces the worker
 * (a new pid), counts it, and caches nothing for the failure. The default
 * memory limit lets a real CUB compile through.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/client_internal.h"
#include "tests/lib/test.h"

static const char *const saxpy_exprs[] = {"&saxpy<float>", NULL};

/* The pids of the daemon's children (its workers), from /proc; returns n. */
static int worker_pids(const struct jtl_daemon *d, pid_t *out, int max)
{
	DIR *dir = opendir("/proc");
	struct dirent *e;
	int n = 0;
	assert_non_null(dir);
	while ((e = readdir(dir)) && n < max) {
		char path[300], buf[512];
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[len] = '\0';
		/* pid (comm) state ppid ...: comm may hold spaces, so parse after ')'. */
		char *rp = strrchr(buf, ')'), state;
		int ppid;
		if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == d->pid &&
		    state != 'Z')
			out[n++] = (pid_t)atoi(e->d_name);
	}
	closedir(dir);
	return n;
}

/* The single worker of a --workers 1 daemon, waiting (up to 10 s) until it
 * is one and differs from not (0: any). */
static pid_t the_worker(const struct jtl_daemon *d, pid_t not )
{
	pid_t p[8];
	for (int i = 0; i < 1000; i++) {
		int n = worker_pids(d, p, 8);
		if (n == 1 && p[0] != not )
			return p[0];
		usleep(10000);
	}
	fprintf(stderr, "no single worker other than %d appeared\n", (int)not );
	fail();
	return -1;
}

/* "Max address space" soft limit of pid from /proc/PID/limits (UINT64_MAX: unlimited). */
static uint64_t address_space_limit(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/limits", (int)pid);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	uint64_t v = 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "Max address space", 17) == 0) {
			char soft[64];
			assert_int_equal(sscanf(line + 17, " %63s", soft), 1);
			v = strcmp(soft, "unlimited") == 0 ? UINT64_MAX : strtoull(soft, NULL, 10);
		}
	fclose(f);
	return v;
}

/* The limit once the worker has set it (it may still be starting up). */
static uint64_t worker_limit(pid_t pid)
{
	uint64_t v = UINT64_MAX;
	for (int i = 0; i < 500 && (v = address_space_limit(pid)) == UINT64_MAX; i++)
		usleep(10000);
	return v;
}

/* A /proc/PID/status value in kB ("VmSize", "VmPeak"). */
static uint64_t status_kb(pid_t pid, const char *name)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	uint64_t v = 0;
	size_t n = strlen(name);
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, name, n) == 0 && line[n] == ':')
			v = strtoull(line + n + 1, NULL, 10);
	fclose(f);
	return v;
}

/* A request of its own (a distinct key) for a fault, with fault set. */
static jc_request *fault_request(const char *tag, uint32_t fault)
{
	char src[256];
	snprintf(src, sizeof(src),
		 "extern \"C\" __global__ void k_%s(float *x) { x[0] += 1.0f; }\n", tag);
	jc_request *r = jct_request_src("fault.cu", src, "sm_90");
	assert_int_equal(jc__request_set_test_fault(r, fault), 0);
	return r;
}

/*
 * The part every fault shares: the fault fails with want_rc and a message
 * holding want_msg, twice (nothing negative-cached: the second one runs the
 * worker again), the worker is replaced each time, hits and new compiles
 * are served right after, and the same key without the fault compiles.
 */
static void check_fault(struct jtl_daemon *d, uint32_t fault, int want_rc, const char *want_msg)
{
	jc_request *warm = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_result *ref = jct_compile(d, warm, 0);
	pid_t w0 = the_worker(d, 0);
	int64_t crashes0 = jct_stat(d, "worker_crashes"), compiles0 = jct_stat(d, "compiles");

	char tag[32], msg[512];
	snprintf(tag, sizeof(tag), "f%u", fault);
	jc_request *bad = fault_request(tag, fault);
	pid_t prev = w0;
	for (int round = 1; round <= 2; round++) {
		assert_null(jct_compile_msg(d, bad, want_rc, msg, sizeof(msg)));
		if (!strstr(msg, want_msg) || !strstr(msg, "nothing cached"))
			fprintf(stderr, "message: %s\n", msg);
		assert_non_null(strstr(msg, want_msg));
		assert_non_null(strstr(msg, "nothing cached"));
		pid_t now = the_worker(d, prev); /* replaced: a new pid, still one worker */
		assert_int_not_equal(now, prev);
		prev = now;
		assert_int_equal(jct_stat(d, "worker_crashes"), crashes0 + round);
		assert_int_equal(jct_stat(d, "compiles"), compiles0 + round); /* ran again */
		assert_int_equal(jct_stat(d, "negative_entries"), 0);
	}

	/* Still serving: a hit with the same bytes, then a compile of a new key. */
	jc_result *hit = jct_compile(d, warm, 0);
	assert_int_equal(jc_result_cache_status(hit), JC_HIT);
	size_t na, nb;
	const void *da = jc_result_data(ref, &na), *db = jc_result_data(hit, &nb);
	assert_int_equal(na, nb);
	assert_memory_equal(da, db, na);
	jc_request *fresh = jct_request("saxpy.cu", "sm_80", saxpy_exprs);
	jc_result *miss = jct_compile(d, fresh, 0);
	assert_int_equal(jc_result_cache_status(miss), JC_MISS);
	/* The faulted key itself compiles once the fault is gone. */
	assert_int_equal(jc__request_set_test_fault(bad, JC_FAULT_NONE), 0);
	jc_result *ok = jct_compile(d, bad, 0);
	assert_int_equal(jc_result_cache_status(ok), JC_MISS);
	assert_int_equal(jct_stat(d, "worker_crashes"), crashes0 + 2);
	assert_int_equal(the_worker(d, 0), prev); /* no further replacement */

	jc_result_free(ref);
	jc_result_free(hit);
	jc_result_free(miss);
	jc_result_free(ok);
	jc_request_free(warm);
	jc_request_free(fresh);
	jc_request_free(bad);
}

static void test_crash(void **state)
{
	struct jtl_daemon *d = *state;
	const char *const flags[] = {"--workers", "1", NULL};
	jct_daemon_start(d, flags);
	check_fault(d, JC_FAULT_CRASH, JC_ECRASH, "crashed (signal 11");
	assert_int_equal(jct_stat(d, "compile_timeouts"), 0);

	/* jitcachectl's hidden switch: the same error, exit 1, nothing on stdout. */
	char path[400], *out = NULL, *err = NULL;
	snprintf(path, sizeof(path), "%s/crash.cu", d->dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("__global__ void crash_me() {}\n", f);
	fclose(f);
	const char *args[] = {"compile", path, "--arch", "sm_90", "--test-fault", "crash", NULL};
	assert_int_equal(jct_ctl(d, &out, &err, args), 1);
	assert_string_equal(out, "");
	assert_non_null(strstr(err, "compile worker crashed"));
	free(out);
	free(err);
	const char *badarg[] = {"compile", path, "--arch", "sm_90", "--test-fault", "melt", NULL};
	assert_int_equal(jct_ctl(d, NULL, NULL, badarg), 2);
	assert_int_equal(jct_stat(d, "worker_crashes"), 3);
}

/* A hang past --compile-timeout; meanwhile hits are answered at once. */
static void test_timeout(void **state)
{
	struct jtl_daemon *d = *state;
	const char *const flags[] = {"--workers", "1", "--compile-timeout", "2", NULL};
	jct_daemon_start(d, flags);
	double t0 = jtl_now_s();
	check_fault(d, JC_FAULT_HANG, JC_ETIMEOUT, "--compile-timeout (2 s)");
	assert_true(jtl_now_s() - t0 >= 4.0); /* two hangs, each killed at 2 s */
	assert_int_equal(jct_stat(d, "compile_timeouts"), 2);

	/* While one client's compile hangs, a hit is answered at once. */
	jc_request *warm = jct_request("saxpy.cu", "sm_90", saxpy_exprs);
	jc_result_free(jct_compile(d, warm, 0));
	jc_request *hang = fault_request("again", JC_FAULT_HANG);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		jc_client *c = NULL;
		jc_result *res = NULL;
		int rc = jc_client_connect(d->sock, &c);
		rc = rc ?: jc_compile(c, hang, &res);
		_exit(rc == JC_ETIMEOUT ? 0 : 1);
	}
	usleep(300000); /* the hang has started */
	double t1 = jtl_now_s();
	jc_result *hit = jct_compile(d, warm, 0);
	double hit_s = jtl_now_s() - t1;
	assert_int_equal(jc_result_cache_status(hit), JC_HIT);
	assert_true(hit_s < 1.0);
	int status;
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	fprintf(stderr, "hit during a hanging compile: %.1f ms\n", hit_s * 1e3);
	jc_result_free(hit);
	jc_request_free(warm);
	jc_request_free(hang);
}

static void test_memory_limit(void **state)
{
	struct jtl_daemon *d = *state;
	const char *const flags[] = {"--workers", "1", "--worker-memory", "256M", NULL};
	jct_daemon_start(d, flags);
	/* The limit is set: RLIMIT_AS = the start-up size + 256 MiB. */
	pid_t w = the_worker(d, 0);
	uint64_t limit = worker_limit(w), vm = status_kb(w, "VmSize") << 10;
	assert_true(limit != UINT64_MAX);
	assert_true(limit > vm && limit - vm <= (256ull << 20));
	check_fault(d, JC_FAULT_ALLOC, JC_ENOMEM,
		    "ran out of memory under its limit "
		    "(--worker-memory 256 MiB)");
	/* It stopped at the limit, not at the machine's memory. */
	size_t n;
	char *log = (char *)jtl_read_file(d->log, &n);
	char *p = strstr(log, "allocation failed after ");
	assert_non_null(p);
	unsigned long mib = strtoul(p + strlen("allocation failed after "), NULL, 10);
	fprintf(stderr, "alloc fault stopped after %lu MiB of a 256 MiB limit\n", mib);
	assert_true(mib <= 256);
	free(log);
}

/* Without a limit the allocation fault is refused rather than run. */
static void test_alloc_fault_needs_limit(void **state)
{
	struct jtl_daemon *d = *state;
	const char *const flags[] = {"--workers", "1", "--worker-memory", "0", NULL};
	jct_daemon_start(d, flags);
	pid_t w = the_worker(d, 0);
	assert_true(address_space_limit(w) == UINT64_MAX);
	jc_request *r = fault_request("nolimit", JC_FAULT_ALLOC);
	char msg[512];
	assert_null(jct_compile_msg(d, r, JC_EINVAL, msg, sizeof(msg)));
	assert_non_null(strstr(msg, "needs a worker memory limit"));
	assert_int_equal(the_worker(d, 0), w);
	assert_int_equal(jct_stat(d, "negative_entries"), 0);
	jc_request_free(r);
}

/* Without JITCACHE_TEST_FAULTS=1 a daemon refuses the switch. */
static void test_faults_off_by_default(void **state)
{
	struct jtl_daemon *d = *state;
	unsetenv("JITCACHE_TEST_FAULTS");
	jct_daemon_start(d, NULL);
	setenv("JITCACHE_TEST_FAULTS", "1", 1);
	jc_request *r = fault_request("off", JC_FAULT_CRASH);
	char msg[512];
	assert_null(jct_compile_msg(d, r, JC_EINVAL, msg, sizeof(msg)));
	assert_non_null(strstr(msg, "test faults are disabled"));
	assert_int_equal(jct_stat(d, "worker_crashes"), 0);
	assert_int_equal(jc__request_set_test_fault(r, 99), JC_EINVAL);
	jc_request_free(r);
}

/* The default limit (16 GiB) leaves room for a real, heavy NVRTC compile. */
static void test_default_limit_cub(void **state)
{
	struct jtl_daemon *d = *state;
	const char *cccl = "/usr/local/cuda/include/cccl";
	struct stat st;
	if (stat(cccl, &st) != 0) {
		fprintf(stderr, "skipped: no CCCL headers at %s\n", cccl);
		skip();
	}
	const char *const flags[] = {"--workers", "1", NULL};
	jct_daemon_start(d, flags);
	pid_t w = the_worker(d, 0);
	uint64_t limit = worker_limit(w);
	assert_true(limit != UINT64_MAX && limit >= (16ull << 30));
	const char *const exprs[] = {"sort_and_sum<128, 8>", NULL};
	jc_request *r = jct_request("cub_sort.cu", "sm_90", exprs);
	assert_int_equal(jc_request_add_option(r, "-I/usr/local/cuda/include/cccl"), 0);
	assert_int_equal(jc_request_add_include_dir(r, cccl), 0);
	assert_int_equal(jc_request_add_option(r, "-std=c++17"), 0);
	jc_result *res = jct_compile(d, r, 0);
	assert_int_equal(jc_result_cache_status(res), JC_MISS);
	assert_non_null(jc_result_lowered_name(res, "sort_and_sum<128, 8>"));
	assert_int_equal(the_worker(d, 0), w); /* the same worker did it */
	fprintf(stderr, "CUB compile: worker VmPeak %llu MiB, limit %llu MiB\n",
		(unsigned long long)(status_kb(w, "VmPeak") >> 10),
		(unsigned long long)(limit >> 20));
	assert_int_equal(jct_stat(d, "worker_crashes"), 0);
	jc_result_free(res);
	jc_request_free(r);
}

int main(void)
{
	setenv("JITCACHE_TEST_FAULTS", "1", 1); /* inherited by the daemons started here */
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_crash, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_timeout, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_memory_limit, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_alloc_fault_needs_limit, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_faults_off_by_default, jct_setup, jct_teardown),
	    cmocka_unit_test_setup_teardown(test_default_limit_cub, jct_setup, jct_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
