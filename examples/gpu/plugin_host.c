/* SPDX-License-Identifier: MIT */
/*
 * Exercise 3 (docs/ARCHITECTURE.md, "Examples"): a host that dlopen()s the
 * SAXPY plugin and hands it its own device pointers and stream.
 *
 * Usage: plugin_host PLUGIN.so primary|own-context
 *  primary      buffers and a non-blocking stream of the device's primary
 *               context; float and double; also the default stream; and a
 *               view of a wrong ABI version. Every result checked on the CPU.
 *  own-context  the host made its own context (cuCtxCreate): its buffers,
 *               its stream, and its NULL stream with primary buffers must
 *               each be refused with a clear message; y must be untouched,
 *               the host's context must still be current, and a correct
 *               call afterwards must still work.
 * Exits 0 when every expectation held.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "gpu_common.h"
#include "saxpy_plugin.h"

static uint32_t (*plugin_abi)(void);
static int (*plugin_run)(double, const struct gpu_buffer_view *, const struct gpu_buffer_view *,
			 struct CUstream_st *, char *, size_t);
static void (*plugin_shutdown)(void);

static const uint64_t N = 1 << 20;
static int failures;

static void expect(int cond, const char *what)
{
	printf("%s: %s\n", what, cond ? "ok" : "FAILED");
	failures += !cond;
}

static struct gpu_buffer_view view(CUdeviceptr p, int f64)
{
	return (struct gpu_buffer_view){(void *)(uintptr_t)p, N * (f64 ? 8 : 4), 0,
					f64 ? SAXPY_F64 : SAXPY_F32, SAXPY_PLUGIN_ABI_VERSION};
}

static void primary_path(void)
{
	CUdevice dev;
	CUcontext primary;
	jcx_primary_ctx(0, &dev, &primary);
	CUstream s;
	CU_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	char err[512];
	for (int f64 = 0; f64 < 2; f64++) {
		CUdeviceptr x, y;
		jcx_saxpy_buffers(f64, N, &x, &y);
		struct gpu_buffer_view vx = view(x, f64), vy = view(y, f64);
		int rc = plugin_run(2.0, &vx, &vy, s, err, sizeof(err));
		if (rc)
			printf("plugin: %s: %s\n", jc_strerror(rc), err);
		CU_CHECK(cuStreamSynchronize(s));
		expect(rc == 0 && jcx_saxpy_check(f64, 2.0, y, N, 1) == 0,
		       f64 ? "primary: double on the caller's stream"
			   : "primary: float on the caller's stream");
		rc = plugin_run(0.5, &vx, &vy, NULL, err, sizeof(err));
		CU_CHECK(cuCtxSynchronize());
		/* y = y0 + 2x + 0.5x: the check's formula with a = 2.5, 1 launch */
		expect(rc == 0 && jcx_saxpy_check(f64, 2.5, y, N, 1) == 0,
		       f64 ? "primary: double on the default stream"
			   : "primary: float on the default stream");
		vx.abi_version = 2;
		rc = plugin_run(2.0, &vx, &vy, s, err, sizeof(err));
		printf("  wrong ABI -> %s: %s\n", jc_strerror(rc), err);
		expect(rc == JC_EVERSION, "primary: a view of ABI version 2 is refused");
		CU_CHECK(cuMemFree(x));
		CU_CHECK(cuMemFree(y));
	}
	CUcontext cur;
	CU_CHECK(cuCtxGetCurrent(&cur));
	expect(cur == primary, "primary: the caller's current context is unchanged");
	CU_CHECK(cuStreamDestroy(s));
	plugin_shutdown();
	CU_CHECK(cuDevicePrimaryCtxRelease(dev));
}

/* Calls the plugin with buffers/stream that must be refused and checks
 * that y is untouched and own is still current. */
static void refused(const char *what, CUcontext own, CUcontext y_ctx, CUdeviceptr x, CUdeviceptr y,
		    CUstream s)
{
	char err[512] = "";
	struct gpu_buffer_view vx = view(x, 0), vy = view(y, 0);
	int rc = plugin_run(2.0, &vx, &vy, s, err, sizeof(err));
	printf("  %s -> %s: %s\n", what, jc_strerror(rc), err);
	CUcontext cur;
	CU_CHECK(cuCtxGetCurrent(&cur));
	expect(rc == JC_EINVAL && strstr(err, "primary context") != NULL, what);
	expect(cur == own, "  the host's own context is still current");
	CU_CHECK(cuCtxSetCurrent(y_ctx));
	CU_CHECK(cuCtxSynchronize());
	expect(jcx_saxpy_check(0, 2.0, y, N, 0) == 0, "  y is untouched");
	CU_CHECK(cuCtxSetCurrent(own));
}

static void own_context_path(void)
{
	CUdevice dev;
	CUcontext primary, own;
	jcx_primary_ctx(0, &dev, &primary);
	CUdeviceptr px, py;
	jcx_saxpy_buffers(0, N, &px, &py);	      /* primary-context buffers */
	CUctxCreateParams params = {0};		      /* no affinity, no CIG */
	CU_CHECK(cuCtxCreate(&own, &params, 0, dev)); /* pushed: own is current */
	CUdeviceptr ox, oy;
	jcx_saxpy_buffers(0, N, &ox, &oy);
	CUstream os;
	CU_CHECK(cuStreamCreate(&os, CU_STREAM_NON_BLOCKING));
	refused("own context: its buffers and its stream", own, own, ox, oy, os);
	refused("own context: primary buffers on its stream", own, primary, px, py, os);
	refused("own context: primary buffers on its NULL stream", own, primary, px, py, NULL);
	/* The plugin still works for a correct call from this thread. */
	CU_CHECK(cuCtxSetCurrent(primary));
	CUstream ps;
	CU_CHECK(cuStreamCreate(&ps, CU_STREAM_NON_BLOCKING));
	CU_CHECK(cuCtxSetCurrent(own));
	char err[512];
	struct gpu_buffer_view vx = view(px, 0), vy = view(py, 0);
	int rc = plugin_run(2.0, &vx, &vy, ps, err, sizeof(err));
	if (rc)
		printf("plugin: %s: %s\n", jc_strerror(rc), err);
	CU_CHECK(cuCtxSetCurrent(primary));
	CU_CHECK(cuStreamSynchronize(ps));
	expect(rc == 0 && jcx_saxpy_check(0, 2.0, py, N, 1) == 0,
	       "own context current, primary buffers and stream: runs and is correct");
	plugin_shutdown();
	CU_CHECK(cuStreamDestroy(ps));
	CU_CHECK(cuCtxSetCurrent(own));
	CU_CHECK(cuStreamDestroy(os));
	CU_CHECK(cuCtxDestroy(own));
	CU_CHECK(cuDevicePrimaryCtxRelease(dev));
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[2], "primary") && strcmp(argv[2], "own-context"))) {
		fprintf(stderr, "usage: plugin_host PLUGIN.so primary|own-context\n");
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
		return 1;
	}
	plugin_abi = (uint32_t(*)(void))dlsym(h, "saxpy_plugin_abi_version");
	plugin_run = (__typeof__(plugin_run))dlsym(h, "saxpy_plugin_run");
	plugin_shutdown = (void (*)(void))dlsym(h, "saxpy_plugin_shutdown");
	if (!plugin_abi || !plugin_run || !plugin_shutdown ||
	    plugin_abi() != SAXPY_PLUGIN_ABI_VERSION) {
		fprintf(stderr, "%s: not a SAXPY plugin of ABI %u\n", argv[1],
			SAXPY_PLUGIN_ABI_VERSION);
		return 1;
	}
	if (strcmp(argv[2], "primary") == 0)
		primary_path();
	else
		own_context_path();
	printf("%s: %d failure(s)\n", argv[2], failures);
	return failures != 0;
}
