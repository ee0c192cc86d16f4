/* SPDX-License-Identifier: MIT */
/*
 * jitcache_cuda.h where no CUDA context can be used: bad arguments, an
 * LTO-IR request, and the driver missing (this machine: JC_ENOTSUP naming
 * libcuda.so.1, before anything is asked of the daemon) or present with no
 * current context in this process (JC_EINVAL). The GPU paths are in the
 * gpu suite.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jitcache/jitcache_cuda.h"
#include "tests/lib/test.h"

static const char src[] = "extern \"C\" __global__ void k(float *p) { p[threadIdx.x] = 1.0f; }\n";

/* A request without an architecture: jc_cuda_module_load resolves it. */
static jc_request *request(void)
{
	jc_request *r = NULL;
	assert_int_equal(jc_request_new(&r), 0);
	assert_int_equal(jc_request_set_source(r, "k.cu", src, strlen(src)), 0);
	return r;
}

static void test_without_context(void **state)
{
	(void)state;
	struct jtl_daemon d;
	jct_daemon_init(&d);
	jct_daemon_start(&d, NULL);
	jc_client *c = jct_connect(&d);
	jc_cuda_module *m = (jc_cuda_module *)&d; /* must come back NULL */

	assert_int_equal(jc_cuda_module_load(c, NULL, &m), JC_EINVAL);
	assert_null(m);
	assert_int_equal(jc_cuda_module_load(c, NULL, NULL), JC_EINVAL);
	jc_request *r = request();
	assert_int_equal(jc_request_set_output(r, JC_LTOIR), 0);
	assert_int_equal(jc_cuda_module_load(c, r, &m), JC_EINVAL);
	assert_non_null(strstr(jc_cuda_errmsg(), "LTO-IR"));
	jc_request_free(r);

	r = request();
	int rc = jc_cuda_module_load(c, r, &m);
	fprintf(stderr, "no context: %s: %s\n", jc_strerror(rc), jc_cuda_errmsg());
	assert_null(m);
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		assert_int_equal(rc, JC_ENOTSUP);
		assert_non_null(strstr(jc_cuda_errmsg(), "libcuda.so.1"));
		char arch[16];
		assert_int_equal(jc_cuda_resolve_target(c, 0, arch, sizeof(arch)), JC_ENOTSUP);
	} else {
		assert_int_equal(rc, JC_EINVAL);
		dlclose(h);
	}
	char small[8];
	assert_int_equal(jc_cuda_resolve_target(c, 0, small, sizeof(small)), JC_EINVAL);
	assert_int_equal(jc_cuda_request_set_target(c, NULL, 0), JC_EINVAL);
	assert_int_equal(jc_cuda_module_free(NULL), 0);
	/* Nothing reached the daemon: no fetch happened on any failed path. */
	assert_int_equal(jct_stat(&d, "misses"), 0);
	assert_int_equal(jct_stat(&d, "hits"), 0);
	jc_request_free(r);
	jc_client_close(c);
	jct_daemon_cleanup(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_without_context),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
