/* SPDX-License-Identifier: MIT */
/*
 * GPU suite: the examples and gpu_checks against a real jitcached on a real
 * GPU. This program does not link libcuda (it has to start where there is
 * none, and then exits 77 saying why); the programs it runs do.
 * Each program's output is copied to stderr, so the test log keeps the
 * figures it printed.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/lib/test.h"

static struct jtl_daemon daemon_;

/* 0 when libcuda loads, cuInit succeeds and there is a device; else the
 * reason in why. CUresult 0 is CUDA_SUCCESS (cuda.h). */
static int gpu_present(char *why, size_t len)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, len, "no CUDA driver: %s", dlerror());
		return -1;
	}
	int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
	int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
	int n = 0, rc = init && count ? init(0) : -1;
	if (rc == 0)
		rc = count(&n);
	if (rc != 0 || n < 1)
		snprintf(why, len,
			 "libcuda.so.1 loads but cuInit/cuDeviceGetCount gave %d with %d devices",
			 rc, n);
	return rc != 0 || n < 1 ? -1 : 0;
}

static const char *bin(const char *env, const char *name)
{
	static char path[8][512];
	static int next;
	const char *dir = getenv(env);
	if (!dir) {
		fprintf(stderr, "%s is not set (run through meson test)\n", env);
		fail();
	}
	char *p = path[next++ % 8];
	snprintf(p, sizeof(path[0]), "%s/%s", dir, name);
	if (access(p, R_OK) != 0) {
		fprintf(stderr, "%s is missing: were the GPU examples built (libcuda stub)?\n", p);
		fail();
	}
	return p;
}

/* Runs argv, copies its output to stderr, returns its exit code and its
 * stdout (caller frees). */
static int run(const char *const *argv, char **out)
{
	char *o = NULL, *e = NULL;
	int rc = jct_run(&daemon_, argv, &o, &e);
	fprintf(stderr, "$ %s %s -> exit %d\n%s%s", argv[0], argv[1] ? argv[1] : "", rc, o, e);
	free(e);
	*out = o;
	return rc;
}

static int setup(void **state)
{
	(void)state;
	jct_daemon_init(&daemon_);
	jct_daemon_start(&daemon_, NULL);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	jct_daemon_cleanup(&daemon_);
	return 0;
}

/* Templated SAXPY through lowered names, float and double, checked on the
 * CPU; a miss, then a hit in a second process. */
static void test_saxpy_lowered(void **state)
{
	(void)state;
	const char *argv[] = {bin("JC_GPU_BIN", "saxpy_lowered"), NULL};
	char *out;
	int64_t misses = jct_stat(&daemon_, "misses"), hits = jct_stat(&daemon_, "hits");
	assert_int_equal(run(argv, &out), 0);
	jct_assert_has(out, "cache=miss");
	jct_assert_has(out, "saxpy<float>: ok");
	jct_assert_has(out, "saxpy<double>: ok");
	free(out);
	assert_int_equal(run(argv, &out), 0);
	jct_assert_has(out, "cache=hit");
	jct_assert_has(out, "saxpy<double>: ok");
	free(out);
	assert_int_equal(jct_stat(&daemon_, "misses"), misses + 1);
	assert_int_equal(jct_stat(&daemon_, "hits"), hits + 1);
}

static void plugin(const char *mode, const char *summary)
{
	const char *argv[] = {bin("JC_GPU_BIN", "plugin_host"),
			      bin("JC_GPU_BIN", "libsaxpy_plugin.so"), mode, NULL};
	char *out;
	assert_int_equal(run(argv, &out), 0);
	jct_assert_has(out, summary);
	assert_null(strstr(out, "FAILED"));
	free(out);
}

/* Caller's primary-context buffers and stream: correct results. */
static void test_plugin_primary(void **state)
{
	(void)state;
	plugin("primary", "primary: 0 failure(s)");
}

/* The caller made its own context: refused with a message, y untouched,
 * the caller's context still current, no crash. */
static void test_plugin_own_context(void **state)
{
	(void)state;
	plugin("own-context", "own-context: 0 failure(s)");
}

static void test_cubin_vs_ptx(void **state)
{
	(void)state;
	const char *argv[] = {bin("JC_GPU_BIN", "cubin_vs_ptx"), "3", NULL};
	char *out;
	assert_int_equal(run(argv, &out), 0);
	jct_assert_has(out, "results: ok");
	jct_assert_has(out, "sm_");
	jct_assert_has(out, "compute_");
	free(out);
}

static void test_coldstart(void **state)
{
	(void)state;
	char salt[32];
	snprintf(salt, sizeof(salt), "test-%d", (int)getpid());
	const char *argv[] = {bin("JC_GPU_BIN", "coldstart"), salt, "20", NULL};
	char *out;
	assert_int_equal(run(argv, &out), 0);
	jct_assert_has(out, "cache=miss");
	jct_assert_has(out, "result=ok");
	free(out);
	assert_int_equal(run(argv, &out), 0);
	jct_assert_has(out, "cache=hit");
	jct_assert_has(out, "result=ok");
	free(out);
}

/* The heavy example, checked on the CPU (every key, value and block sum):
 * a cubin from the daemon (a miss, then a hit), a fatbin of sm_80, sm_90
 * and compute_90 (the driver runs the image for this GPU), and the same
 * fatbin's PTX alone, JIT-compiled by the driver (JITCACHE_FORCE_PTX=1). */
static void cub_sort(const char *targets, const char *force, const char *cache, const char *loaded)
{
	const char *argv[] = {bin("JC_GPU_BIN", "cub_sort"), targets, "64", NULL};
	char *out, want[64];
	if (force)
		setenv(force, "1", 1);
	int rc = run(argv, &out);
	if (force)
		unsetenv(force);
	assert_int_equal(rc, 0);
	jct_assert_has(out, "result=ok");
	jct_assert_has(out, "wrong_keys=0 wrong_values=0 wrong_sums=0");
	snprintf(want, sizeof(want), "cache=%s", cache);
	jct_assert_has(out, want);
	snprintf(want, sizeof(want), "loaded=%s", loaded);
	jct_assert_has(out, want);
	free(out);
}

static void test_cub_sort(void **state)
{
	(void)state;
	cub_sort("auto", NULL, "miss", "cubin");
	cub_sort("auto", NULL, "hit", "cubin");
	int64_t compiles = jct_stat(&daemon_, "compiles");
	cub_sort("sm_80,sm_90,compute_90", NULL, "miss", "fatbin");
	/* The device's cubin was an entry already: two more parts compiled. */
	assert_int_equal(jct_stat(&daemon_, "compiles"), compiles + 2);
	cub_sort("sm_80,sm_90,compute_90", NULL, "hit", "fatbin");
	/* Forced PTX: the list's compute_90 alone, a part made for the fatbin. */
	cub_sort("sm_80,sm_90,compute_90", "JITCACHE_FORCE_PTX", "hit", "ptx");
	cub_sort("auto", "JITCACHE_FORCE_PTX", "hit", "ptx");
	cub_sort("compute_90", "JITCACHE_FORCE_CUBIN", "hit", "cubin");
	assert_int_equal(jct_stat(&daemon_, "compiles"), compiles + 2);
}

static void check(const char *name)
{
	const char *argv[] = {bin("JC_GPU_CHECKS", "gpu_checks"), name, NULL};
	char *out;
	assert_int_equal(run(argv, &out), 0);
	assert_null(strstr(out, "FAILED"));
	free(out);
}

static void test_resolve(void **state)
{
	(void)state;
	check("resolve");
}

static void test_no_context(void **state)
{
	(void)state;
	check("no-context");
}

static void test_context_restore(void **state)
{
	(void)state;
	check("context-restore");
}

/* A refused cubin is reported once: the daemon counts it and compiles the
 * key afresh once. */
static void test_load_failure(void **state)
{
	(void)state;
	int64_t lf = jct_stat(&daemon_, "load_failures"), compiles = jct_stat(&daemon_, "compiles");
	const char *argv[] = {bin("JC_GPU_CHECKS", "gpu_checks"), "load-failure", NULL};
	char *out;
	int rc = run(argv, &out);
	free(out);
	if (rc == 77)
		skip();
	assert_int_equal(rc, 0);
	assert_int_equal(jct_stat(&daemon_, "load_failures"), lf + 1);
	assert_int_equal(jct_stat(&daemon_, "compiles"), compiles + 2);
}

int main(void)
{
	char why[512];
	if (gpu_present(why, sizeof(why)) != 0) {
		printf("skipped: %s\n", why);
		return 77;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_saxpy_lowered),      cmocka_unit_test(test_plugin_primary),
	    cmocka_unit_test(test_plugin_own_context), cmocka_unit_test(test_cubin_vs_ptx),
	    cmocka_unit_test(test_coldstart),	       cmocka_unit_test(test_resolve),
	    cmocka_unit_test(test_no_context),	       cmocka_unit_test(test_context_restore),
	    cmocka_unit_test(test_load_failure),       cmocka_unit_test(test_cub_sort),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
