/* SPDX-License-Identifier: MIT */
/*
 * Exercise 2 (docs/ARCHITECTURE.md, "Examples"): the device's sm_XY cubin
 * against compute_XY PTX of the same saxpy.cu, both through jitcached. For
 * each, ITERS times in this process: fetch (a hit after the first),
 * cuModuleLoadDataEx, lookup, the first launch (launch + synchronise) and a
 * second launch, then unload. PTX is JIT-compiled by the driver at load;
 * whether the driver's own JIT cache (CUDA_CACHE_DISABLE, CUDA_CACHE_PATH:
 * CUDA C++ Programming Guide, "CUDA Environment Variables") serves repeats is
 * up to the environment, so the program prints it.
 *
 * Usage: cubin_vs_ptx [ITERS] [N]
 * Prints per target the first iteration and the median of the others, in
 * milliseconds, as "key=value" fields; exits 0 when every result is correct.
 */
#include <stdio.h>
#include <stdlib.h>

#include "gpu_common.h"

struct sample {
	double fetch, load, lookup, first, second;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One iteration: returns 0 when the result is correct. */
static int once(jc_client *c, const char *arch, uint64_t n, struct sample *s, const char **cache)
{
	jc_request *r = jcx_saxpy_request(arch, NULL);
	jc_cuda_module *m = NULL;
	jcx_jc_check(jc_cuda_module_load(c, r, &m), arch, NULL);
	*cache = jc_result_cache_status(jc_cuda_module_result(m)) == JC_HIT ? "hit" : "miss";
	s->fetch = jc_cuda_module_time_ns(m, JC_CUDA_TIME_FETCH) / 1e6;
	s->load = jc_cuda_module_time_ns(m, JC_CUDA_TIME_LOAD) / 1e6;
	CUfunction f;
	jcx_jc_check(jc_cuda_module_function(m, JCX_SAXPY_F32, &f), "lookup", NULL);
	s->lookup = jc_cuda_module_time_ns(m, JC_CUDA_TIME_LOOKUP) / 1e6;
	CUdeviceptr x, y;
	jcx_saxpy_buffers(0, n, &x, &y);
	s->first = jcx_saxpy_timed(f, 0, 2.0, x, y, n) / 1e6;
	s->second = jcx_saxpy_timed(f, 0, 2.0, x, y, n) / 1e6;
	uint64_t bad = jcx_saxpy_check(0, 2.0, y, n, 2);
	CU_CHECK(cuMemFree(x));
	CU_CHECK(cuMemFree(y));
	jcx_jc_check(jc_cuda_module_free(m), "unload", NULL);
	jc_request_free(r);
	return bad != 0;
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 10;
	uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 1 << 20;
	if (iters < 2 || iters > 10000) {
		fprintf(stderr, "usage: cubin_vs_ptx [ITERS >= 2] [N]\n");
		return 2;
	}
	CUdevice dev;
	CUcontext ctx;
	jcx_primary_ctx(0, &dev, &ctx);
	int major, minor;
	CU_CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
	CU_CHECK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
	CUmoduleLoadingMode mode;
	CU_CHECK(cuModuleGetLoadingMode(&mode));
	const char *cd = getenv("CUDA_CACHE_DISABLE");
	printf("device cc=%d.%d module_loading=%s CUDA_CACHE_DISABLE=%s iters=%d n=%llu\n", major,
	       minor, mode == CU_MODULE_LAZY_LOADING ? "lazy" : "eager", cd ? cd : "(unset)", iters,
	       (unsigned long long)n);
	jc_client *c = NULL;
	jcx_jc_check(jc_client_connect(NULL, &c), "jc_client_connect", NULL);
	int failed = 0;
	for (int t = 0; t < 2; t++) {
		char arch[32];
		snprintf(arch, sizeof(arch), t ? "compute_%d%d" : "sm_%d%d", major, minor);
		struct sample s[iters];
		const char *first_cache = NULL, *cache;
		for (int i = 0; i < iters; i++) {
			failed |= once(c, arch, n, &s[i], &cache);
			if (!i)
				first_cache = cache;
		}
		double v[5][iters];
		for (int i = 1; i < iters; i++) {
			v[0][i - 1] = s[i].fetch, v[1][i - 1] = s[i].load,
				 v[2][i - 1] = s[i].lookup;
			v[3][i - 1] = s[i].first, v[4][i - 1] = s[i].second;
		}
		printf("%s first: cache=%s fetch_ms=%.3f load_ms=%.3f lookup_ms=%.3f "
		       "first_launch_ms=%.3f "
		       "second_launch_ms=%.3f\n",
		       arch, first_cache, s[0].fetch, s[0].load, s[0].lookup, s[0].first,
		       s[0].second);
		printf("%s median of %d more: fetch_ms=%.3f load_ms=%.3f lookup_ms=%.3f "
		       "first_launch_ms=%.3f "
		       "second_launch_ms=%.3f\n",
		       arch, iters - 1, median(v[0], iters - 1), median(v[1], iters - 1),
		       median(v[2], iters - 1), median(v[3], iters - 1), median(v[4], iters - 1));
	}
	printf("results: %s\n", failed ? "WRONG" : "ok");
	jc_client_close(c);
	CU_CHECK(cuDevicePrimaryCtxRelease(dev));
	return failed;
}
