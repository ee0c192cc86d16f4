/* SPDX-License-Identifier: MIT */
/*
 * GPU checks of jitcache_cuda.h run by test_gpu (a separate program because
 * it links libcuda, which test_gpu must not: it has to start, and skip,
 * where there is none). Usage: gpu_checks CHECK; the daemon is found
 * through $JITCACHE_SOCKET. Exits 0 when the check held, 77 when it cannot
 * apply to this device, 1 otherwise, printing what it saw.
 */
#include <nvrtc.h>
#include <stdio.h>
#include <string.h>

#include "gpu_common.h"

static int failures;

static void expect(int cond, const char *what)
{
	printf("%s: %s\n", what, cond ? "ok" : "FAILED");
	failures += !cond;
}

static void cc_of(CUdevice dev, int *cc)
{
	int major, minor;
	CU_CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
	CU_CHECK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
	*cc = major * 10 + minor;
}

/* NVRTC's supported architectures, asked in this process. */
static int nvrtc_archs(int *a, int max)
{
	int n = 0;
	if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0 || n > max ||
	    nvrtcGetSupportedArchs(a) != NVRTC_SUCCESS) {
		fprintf(stderr, "nvrtcGetSupportedArchs failed\n");
		return 0;
	}
	return n;
}

/* The resolved target is sm_<cc> when this process's NVRTC lists cc, else
 * compute_<highest listed below cc>; and the request carries it. */
static void check_resolve(jc_client *c, CUdevice dev)
{
	int cc, a[256], n = nvrtc_archs(a, 256), best = 0, exact = 0;
	cc_of(dev, &cc);
	for (int i = 0; i < n; i++) {
		exact |= a[i] == cc;
		if (a[i] < cc && a[i] > best)
			best = a[i];
	}
	char want[32], got[32];
	snprintf(want, sizeof(want), exact ? "sm_%d" : "compute_%d", exact ? cc : best);
	int rc = jc_cuda_resolve_target(c, dev, got, sizeof(got));
	printf("device cc %d: resolved %s (%s), expected %s\n", cc, rc ? "-" : got,
	       rc ? jc_cuda_errmsg() : "", want);
	expect(rc == 0 && strcmp(got, want) == 0, "resolve: target for this device");
	jc_request *r = jcx_saxpy_request(NULL, "gpu-checks-resolve");
	jc_cuda_module *m = NULL;
	rc = jc_cuda_module_load(c, r, &m);
	expect(rc == 0 &&
		   jc_result_output(jc_cuda_module_result(m)) == (exact ? JC_CUBIN : JC_PTX) &&
		   jc_cuda_module_time_ns(m, JC_CUDA_TIME_RESOLVE) > 0,
	       "resolve: a request without arch is resolved before the fetch");
	CUfunction f;
	rc = jc_cuda_module_function(m, "&saxpy<int>", &f);
	printf("  unknown name expression -> %s: %s\n", jc_strerror(rc), jc_cuda_errmsg());
	expect(rc == JC_ENOTFOUND, "resolve: an unknown kernel is JC_ENOTFOUND");
	jc_cuda_module_free(m);
	jc_request_free(r);
}

/* Without a current context the load fails cleanly. */
static void check_no_context(jc_client *c)
{
	CU_CHECK(cuInit(0));
	jc_request *r = jcx_saxpy_request(NULL, "gpu-checks");
	jc_cuda_module *m = (jc_cuda_module *)r; /* must be reset to NULL */
	int rc = jc_cuda_module_load(c, r, &m);
	printf("  -> %s: %s\n", jc_strerror(rc), jc_cuda_errmsg());
	expect(rc == JC_EINVAL && m == NULL && strstr(jc_cuda_errmsg(), "no CUDA context"),
	       "no context: JC_EINVAL and a clear message");
	jc_request_free(r);
}

/* A module loaded in the caller's own context lives there; lookup and
 * unload from another current context switch to it and back. */
static void check_context_restore(jc_client *c, CUdevice dev, CUcontext primary)
{
	CUctxCreateParams params = {0};
	CUcontext own, cur;
	CU_CHECK(cuCtxCreate(&own, &params, 0, dev));
	jc_request *r = jcx_saxpy_request(NULL, "gpu-checks");
	jc_cuda_module *m = NULL;
	jcx_jc_check(jc_cuda_module_load(c, r, &m), "load in own context", NULL);
	expect(jc_cuda_module_context(m) == own,
	       "restore: loaded into the caller's current context");
	CU_CHECK(cuCtxSetCurrent(primary));
	CUfunction f;
	int rc = jc_cuda_module_function(m, JCX_SAXPY_F32, &f);
	CU_CHECK(cuCtxGetCurrent(&cur));
	expect(rc == 0 && cur == primary, "restore: lookup from another context leaves it current");
	/* The function belongs to own: run it there and check. */
	CU_CHECK(cuCtxSetCurrent(own));
	CUdeviceptr x, y;
	jcx_saxpy_buffers(0, 4096, &x, &y);
	jcx_saxpy_launch(f, 0, 2.0, x, y, 4096, NULL);
	CU_CHECK(cuCtxSynchronize());
	expect(jcx_saxpy_check(0, 2.0, y, 4096, 1) == 0, "restore: the kernel runs in its context");
	CU_CHECK(cuMemFree(x));
	CU_CHECK(cuMemFree(y));
	CU_CHECK(cuCtxSetCurrent(primary));
	rc = jc_cuda_module_free(m);
	CU_CHECK(cuCtxGetCurrent(&cur));
	expect(rc == 0 && cur == primary, "restore: unload from another context leaves it current");
	jc_request_free(r);
	CU_CHECK(cuCtxDestroy(own));
}

/* A cubin for a newer architecture than the device's: the driver refuses
 * it, the helper reports it once, loads the fresh compile, which the
 * driver refuses again: an error naming the driver's. */
static int check_load_failure(jc_client *c, CUdevice dev)
{
	int cc, a[256], n = nvrtc_archs(a, 256), newer = 0;
	cc_of(dev, &cc);
	for (int i = 0; i < n && !newer; i++)
		if (a[i] > cc)
			newer = a[i];
	if (!newer) {
		printf("NVRTC lists no architecture above this device's %d\n", cc);
		return 77;
	}
	char arch[32];
	snprintf(arch, sizeof(arch), "sm_%d", newer);
	jc_request *r = jcx_saxpy_request(arch, "gpu-checks-load-failure");
	jc_cuda_module *m = NULL;
	int rc = jc_cuda_module_load(c, r, &m);
	printf("  %s cubin on a cc %d device -> %s: %s\n", arch, cc, jc_strerror(rc),
	       jc_cuda_errmsg());
	/* The driver's word for a cubin of another architecture is
	 * CUDA_ERROR_NO_BINARY_FOR_GPU (JC_EVERSION); CUDA_ERROR_INVALID_IMAGE
	 * (JC_ECORRUPT) is the other image refusal the helper reports. */
	int as_expected =
	    (rc == JC_EVERSION && strstr(jc_cuda_errmsg(), "CUDA_ERROR_NO_BINARY_FOR_GPU")) ||
	    (rc == JC_ECORRUPT && strstr(jc_cuda_errmsg(), "CUDA_ERROR_INVALID_IMAGE"));
	expect(as_expected && m == NULL,
	       "load failure: reported, recompiled once, then a clear error");
	jc_request_free(r);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr,
			"usage: gpu_checks resolve|no-context|context-restore|load-failure\n");
		return 2;
	}
	jc_client *c = NULL;
	jcx_jc_check(jc_client_connect(NULL, &c), "jc_client_connect", NULL);
	int rc = 0;
	if (strcmp(argv[1], "no-context") == 0) {
		check_no_context(c);
	} else {
		CUdevice dev;
		CUcontext primary;
		jcx_primary_ctx(0, &dev, &primary);
		if (strcmp(argv[1], "resolve") == 0)
			check_resolve(c, dev);
		else if (strcmp(argv[1], "context-restore") == 0)
			check_context_restore(c, dev, primary);
		else if (strcmp(argv[1], "load-failure") == 0)
			rc = check_load_failure(c, dev);
		else
			return 2;
		CU_CHECK(cuDevicePrimaryCtxRelease(dev));
	}
	jc_client_close(c);
	return rc ? rc : failures != 0;
}
