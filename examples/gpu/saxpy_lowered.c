/* SPDX-License-Identifier: MIT */
/*
 * Exercise 1 (docs/ARCHITECTURE.md, "Examples"): templated SAXPY through
 * NVRTC lowered names. Fetches saxpy.cu for this device through jitcached
 * (the target resolved from the device: sm_XY cubin, or compute_XY PTX where
 * NVRTC lacks XY), loads it into the primary context, looks saxpy<float> and
 * saxpy<double> up by name expression and checks both against the CPU.
 *
 * Usage: saxpy_lowered [N]   (daemon socket: $JITCACHE_SOCKET or the default)
 * Prints one line per instance; exits 0 when both match the CPU exactly.
 */
#include <stdio.h>
#include <stdlib.h>

#include "gpu_common.h"

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000003;
	CUdevice dev;
	CUcontext ctx;
	jcx_primary_ctx(0, &dev, &ctx);
	jc_client *c = NULL;
	jcx_jc_check(jc_client_connect(NULL, &c), "jc_client_connect", NULL);
	jc_request *r = jcx_saxpy_request(NULL, NULL);
	jc_cuda_module *m = NULL;
	jcx_jc_check(jc_cuda_module_load(c, r, &m), "jc_cuda_module_load", NULL);
	const jc_result *res = jc_cuda_module_result(m);
	printf("module: key %s, %s, cache=%s, fetch %.3f ms, load %.3f ms\n", jc_result_key(res),
	       jc_result_output(res) == JC_PTX ? "PTX" : "cubin",
	       jc_result_cache_status(res) == JC_HIT ? "hit" : "miss",
	       jc_cuda_module_time_ns(m, JC_CUDA_TIME_FETCH) / 1e6,
	       jc_cuda_module_time_ns(m, JC_CUDA_TIME_LOAD) / 1e6);
	int failed = 0;
	for (int is_f64 = 0; is_f64 < 2; is_f64++) {
		const char *expr = is_f64 ? JCX_SAXPY_F64 : JCX_SAXPY_F32;
		CUfunction f;
		jcx_jc_check(jc_cuda_module_function(m, expr, &f), expr, NULL);
		CUdeviceptr x, y;
		jcx_saxpy_buffers(is_f64, n, &x, &y);
		jcx_saxpy_launch(f, is_f64, 2.0, x, y, n, NULL);
		CU_CHECK(cuCtxSynchronize());
		uint64_t bad = jcx_saxpy_check(is_f64, 2.0, y, n, 1);
		printf("%s: %s (lowered %s, %llu elements, %llu wrong)\n", expr + 1,
		       bad ? "WRONG" : "ok", jc_result_lowered_name(res, expr),
		       (unsigned long long)n, (unsigned long long)bad);
		failed |= bad != 0;
		CU_CHECK(cuMemFree(x));
		CU_CHECK(cuMemFree(y));
	}
	jcx_jc_check(jc_cuda_module_free(m), "jc_cuda_module_free", NULL);
	jc_request_free(r);
	jc_client_close(c);
	CU_CHECK(cuDevicePrimaryCtxRelease(dev));
	return failed;
}
