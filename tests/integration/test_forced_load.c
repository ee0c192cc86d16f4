/* SPDX-License-Identifier: MIT */
/*
 * jitcache_cuda.h's load paths against a real daemon and the stand-in
 * driver (tests/ops/stub_libcuda.c, which says what kind of image it was
 * given): the device's cubin by default, a fatbin as it is,
 * JITCACHE_FORCE_PTX=1 fetching and loading only PTX (a fatbin request's
 * best compute_NN alone, a hit of the part the fatbin made),
 * JITCACHE_FORCE_CUBIN=1 only the device's cubin, and clear refusals where
 * no target fits or both are set. The test re-executes itself with the
 * stand-in first on LD_LIBRARY_PATH (the loader reads it at start-up only).
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

#include "jitcache/jitcache_cuda.h"
#include "tests/lib/test.h"

static const char *(*last_image)(void);

static jc_request *request(const char *arch)
{
	static const char *const exprs[] = {"&saxpy<float>", NULL};
	jc_request *r = NULL;
	if (arch)
		return jct_request("saxpy.cu", arch, exprs);
	/* No architecture: jc_cuda_module_load resolves it for the device. */
	size_t size;
	uint8_t *src = jtl_read_file(jct_example("saxpy.cu"), &size);
	assert_int_equal(jc_request_new(&r), 0);
	assert_int_equal(jc_request_set_source(r, "saxpy.cu", src, size), 0);
	assert_int_equal(jc_request_add_name_expression(r, exprs[0]), 0);
	free(src);
	return r;
}

/* Loads r (arch may be NULL: resolved) with force set to "1" (NULL: none);
 * on success checks what the driver got and returns the module's result
 * output; on failure returns the code and its message in msg. */
static int load(const struct jtl_daemon *d, const char *arch, const char *force, jc_output *out,
		const char *want_image, char *msg, size_t len)
{
	jc_request *r = request(arch);
	jc_client *c = jct_connect(d);
	if (force)
		setenv(force, "1", 1);
	jc_cuda_module *m = NULL;
	int rc = jc_cuda_module_load(c, r, &m);
	unsetenv("JITCACHE_FORCE_PTX");
	unsetenv("JITCACHE_FORCE_CUBIN");
	if (rc == 0) {
		*out = jc_result_output(jc_cuda_module_result(m));
		assert_string_equal(last_image(), want_image);
		struct CUfunc_st *f = NULL;
		assert_int_equal(jc_cuda_module_function(m, "&saxpy<float>", &f), 0);
	} else {
		snprintf(msg, len, "%s", jc_cuda_errmsg());
	}
	jc_cuda_module_free(m);
	jc_client_close(c);
	jc_request_free(r);
	return rc;
}

static void test_paths(void **state)
{
	const struct jtl_daemon *d = *state;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	last_image = h ? (const char *(*)(void))dlsym(h, "jc_stub_last_image") : NULL;
	if (!last_image)
		fail_msg("the stand-in libcuda.so.1 was not loaded: %s", dlerror());
	jc_output out;
	char msg[1024] = "";
	setenv("JC_STUB_CC", "90", 1);
	assert_int_equal(load(d, NULL, NULL, &out, "cubin", msg, sizeof(msg)), 0);
	assert_int_equal(out, JC_CUBIN);
	assert_int_equal(load(d, "sm_80,sm_90,compute_90", NULL, &out, "fatbin", msg, sizeof(msg)),
			 0);
	assert_int_equal(out, JC_FATBIN);
	int64_t compiles = jct_stat(d, "compiles");
	/* Forced PTX: from the device (compute_90), and from the list (its part: a hit). */
	assert_int_equal(load(d, NULL, "JITCACHE_FORCE_PTX", &out, "ptx", msg, sizeof(msg)), 0);
	assert_int_equal(out, JC_PTX);
	assert_int_equal(
	    load(d, "sm_80,sm_90,compute_90", "JITCACHE_FORCE_PTX", &out, "ptx", msg, sizeof(msg)),
	    0);
	assert_int_equal(out, JC_PTX);
	assert_int_equal(load(d, "sm_80,sm_90,compute_90", "JITCACHE_FORCE_CUBIN", &out, "cubin",
			      msg, sizeof(msg)),
			 0);
	assert_int_equal(out, JC_CUBIN);
	assert_int_equal(jct_stat(d, "compiles"), compiles); /* all parts were there */
	/* A newer GPU: the list's highest PTX at or below it. */
	setenv("JC_STUB_CC", "120", 1);
	assert_int_equal(
	    load(d, "sm_80,sm_90,compute_80", "JITCACHE_FORCE_PTX", &out, "ptx", msg, sizeof(msg)),
	    0);
	assert_int_equal(out, JC_PTX);
	/* No cubin fits a 12.0 device in this list. */
	assert_int_equal(
	    load(d, "sm_80,sm_90,compute_90", "JITCACHE_FORCE_CUBIN", &out, "", msg, sizeof(msg)),
	    JC_ENOTSUP);
	if (!strstr(msg, "JITCACHE_FORCE_CUBIN=1") || !strstr(msg, "sm_80,sm_90,compute_90") ||
	    !strstr(msg, "12.0"))
		fail_msg("unclear refusal: %s", msg);
	setenv("JC_STUB_CC", "90", 1);
	setenv("JITCACHE_FORCE_CUBIN", "1", 1);
	assert_int_equal(load(d, NULL, "JITCACHE_FORCE_PTX", &out, "", msg, sizeof(msg)),
			 JC_EINVAL);
	assert_non_null(strstr(msg, "exclude each other"));
}

int main(int argc, char **argv)
{
	(void)argc;
	if (!getenv("JC_FORCED_LOAD_CHILD")) {
		char path[8192];
		const char *ld = getenv("LD_LIBRARY_PATH");
		snprintf(path, sizeof(path), "%s/tests/ops%s%s", getenv("JC_BUILD_ROOT"),
			 ld ? ":" : "", ld ? ld : "");
		setenv("LD_LIBRARY_PATH", path, 1);
		setenv("JC_FORCED_LOAD_CHILD", "1", 1);
		execv("/proc/self/exe", argv);
		perror("execv /proc/self/exe");
		return 1;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_paths),
	};
	return cmocka_run_group_tests(tests, jct_setup_started, jct_teardown);
}
