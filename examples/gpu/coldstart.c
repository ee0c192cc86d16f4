/* SPDX-License-Identifier: MIT */
/*
 * Cold-start breakdown of a fresh process (docs/ARCHITECTURE.md, "Examples"):
 * exec -> cuInit -> primary context -> connect to jitcached -> resolve the
 * target -> fetch -> module load -> lookup -> first allocation and copies ->
 * first launch (launch + synchronise) -> steady-state launches.
 * module_ready_ms: context ready -> CUfunction in hand (connect, request,
 * resolve, fetch, load, lookup), the figure to hold against a JIT cache
 * inside the process (e.g. CuPy's RawModule + get_function).
 *
 * Usage: coldstart [SALT] [STEADY]
 *   SALT enters the request's app ABI string, so a new SALT is a miss and a
 *   repeated one a hit. STEADY launches (default 200) give the steady-state
 *   median. When $JC_T0_NS holds the parent's CLOCK_REALTIME in
 *   nanoseconds taken just before it started this process (date +%s%N),
 *   exec_ms is the time from there to main(), else -1.
 * Prints one line of "key=value" fields (milliseconds; steady_us in
 * microseconds) and exits 0 when the result is correct. The line also names
 * the module loading mode ($CUDA_MODULE_LOADING: LAZY, EAGER, or "default",
 * which is lazy since CUDA 12.2) and a forced load path
 * (JITCACHE_FORCE_PTX=1 / JITCACHE_FORCE_CUBIN=1: forced=ptx|cubin, else
 * none): with forced PTX, load_ms is the driver's JIT compile (set
 * CUDA_CACHE_DISABLE=1 to keep its own cache out of it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_common.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	uint64_t t_main = jcx_now_ns();
	struct timespec wall;
	clock_gettime(CLOCK_REALTIME, &wall);
	const char *t0_env = getenv("JC_T0_NS");
	double exec_ms = -1;
	if (t0_env)
		exec_ms =
		    ((double)wall.tv_sec * 1e9 + (double)wall.tv_nsec - strtod(t0_env, NULL)) / 1e6;
	char abi[128];
	snprintf(abi, sizeof(abi), "coldstart-%s", argc > 1 ? argv[1] : "0");
	int steady = argc > 2 ? atoi(argv[2]) : 200;
	if (steady < 1 || steady > 100000)
		steady = 200;
	const uint64_t n = 1 << 20;

	CU_CHECK(cuInit(0));
	uint64_t t_init = jcx_now_ns();
	CUdevice dev;
	CUcontext ctx;
	CU_CHECK(cuDeviceGet(&dev, 0));
	CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CU_CHECK(cuCtxSetCurrent(ctx));
	uint64_t t_ctx = jcx_now_ns();
	jc_client *c = NULL;
	jcx_jc_check(jc_client_connect(NULL, &c), "jc_client_connect", NULL);
	uint64_t t_conn = jcx_now_ns();
	jc_request *r = jcx_saxpy_request(NULL, abi);
	jc_cuda_module *m = NULL;
	jcx_jc_check(jc_cuda_module_load(c, r, &m), "jc_cuda_module_load", NULL);
	CUfunction f;
	jcx_jc_check(jc_cuda_module_function(m, JCX_SAXPY_F32, &f), "lookup", NULL);
	uint64_t t_mod = jcx_now_ns();
	CUdeviceptr x, y;
	jcx_saxpy_buffers(0, n, &x, &y);
	uint64_t t_alloc = jcx_now_ns();
	uint64_t t_first = t_alloc + jcx_saxpy_timed(f, 0, 2.0, x, y, n);
	uint64_t *lat = malloc(sizeof(*lat) * (size_t)steady);
	if (!lat)
		return 1;
	for (int i = 0; i < steady; i++)
		lat[i] = jcx_saxpy_timed(f, 0, 2.0, x, y, n);
	qsort(lat, (size_t)steady, sizeof(*lat), cmp_u64);
	uint64_t bad = jcx_saxpy_check(0, 2.0, y, n, 1 + steady);
	const jc_result *res = jc_cuda_module_result(m);
	const char *ml = getenv("CUDA_MODULE_LOADING"), *fp = getenv("JITCACHE_FORCE_PTX"),
		   *fc = getenv("JITCACHE_FORCE_CUBIN");
	printf("coldstart modload=%s forced=%s drvcache=%s ", ml && *ml ? ml : "default",
	       fp && strcmp(fp, "1") == 0   ? "ptx"
	       : fc && strcmp(fc, "1") == 0 ? "cubin"
					    : "none",
	       getenv("CUDA_CACHE_DISABLE") && strcmp(getenv("CUDA_CACHE_DISABLE"), "1") == 0
		   ? "off"
		   : "on");
	printf(
	    "cache=%s arch=%s exec_ms=%.3f cuinit_ms=%.3f ctx_ms=%.3f connect_ms=%.3f "
	    "resolve_ms=%.3f fetch_ms=%.3f server_ms=%.3f load_ms=%.3f lookup_ms=%.3f "
	    "module_ready_ms=%.3f "
	    "alloc_copy_ms=%.3f first_launch_ms=%.3f steady_us=%.1f main_to_first_launch_ms=%.3f "
	    "result=%s\n",
	    jc_result_cache_status(res) == JC_HIT ? "hit" : "miss",
	    jc_result_output(res) == JC_PTX ? "ptx" : "cubin", exec_ms, jcx_ms(t_main, t_init),
	    jcx_ms(t_init, t_ctx), jcx_ms(t_ctx, t_conn),
	    jc_cuda_module_time_ns(m, JC_CUDA_TIME_RESOLVE) / 1e6,
	    jc_cuda_module_time_ns(m, JC_CUDA_TIME_FETCH) / 1e6,
	    jc_result_time_ns(res, JC_TIME_SERVER) / 1e6,
	    jc_cuda_module_time_ns(m, JC_CUDA_TIME_LOAD) / 1e6,
	    jc_cuda_module_time_ns(m, JC_CUDA_TIME_LOOKUP) / 1e6, jcx_ms(t_ctx, t_mod),
	    jcx_ms(t_mod, t_alloc), jcx_ms(t_alloc, t_first), lat[steady / 2] / 1e3,
	    jcx_ms(t_main, t_first), bad ? "WRONG" : "ok");
	free(lat);
	CU_CHECK(cuMemFree(x));
	CU_CHECK(cuMemFree(y));
	jcx_jc_check(jc_cuda_module_free(m), "unload", NULL);
	jc_request_free(r);
	jc_client_close(c);
	CU_CHECK(cuDevicePrimaryCtxRelease(dev));
	return bad != 0;
}
