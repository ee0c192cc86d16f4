/* SPDX-License-Identifier: MIT */
#include "gpu_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* examples/saxpy.cu, embedded by the assembler (JCX_SAXPY_CU is its path). */
__asm__(".section .rodata\n"
	".global jcx_saxpy_src\n"
	".type jcx_saxpy_src, @object\n"
	"jcx_saxpy_src:\n"
	".incbin \"" JCX_SAXPY_CU "\"\n"
	".byte 0\n"
	".global jcx_saxpy_src_end\n"
	"jcx_saxpy_src_end:\n"
	".previous\n");
extern const char jcx_saxpy_src_end[];

size_t jcx_saxpy_src_size(void)
{
	return (size_t)(jcx_saxpy_src_end - jcx_saxpy_src) - 1;
}

const char *jcx_cu_name(CUresult r)
{
	const char *name = NULL;
	cuGetErrorName(r, &name);
	return name ? name : "unknown CUresult";
}

void jcx_cu_check(CUresult r, const char *what, const char *file, int line)
{
	if (r == CUDA_SUCCESS)
		return;
	const char *desc = NULL;
	cuGetErrorString(r, &desc);
	fprintf(stderr, "%s:%d: %s: %s (%s)\n", file, line, what, jcx_cu_name(r), desc ? desc : "");
	exit(1);
}

void jcx_jc_check(int rc, const char *what, jc_client *c)
{
	if (rc == 0)
		return;
	fprintf(stderr, "%s: %s: %s\n", what, jc_strerror(rc),
		c ? jc_client_errmsg(c) : jc_cuda_errmsg());
	exit(1);
}

uint64_t jcx_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double jcx_ms(uint64_t from_ns, uint64_t to_ns)
{
	return (double)(to_ns - from_ns) / 1e6;
}

void jcx_primary_ctx(int ordinal, CUdevice *dev, CUcontext *ctx)
{
	CU_CHECK(cuInit(0));
	CU_CHECK(cuDeviceGet(dev, ordinal));
	CU_CHECK(cuDevicePrimaryCtxRetain(ctx, *dev));
	CU_CHECK(cuCtxSetCurrent(*ctx));
}

int jcx_saxpy_request_new(const char *arch, const char *app_abi, jc_request **out)
{
	jc_request *r = NULL;
	int rc = jc_request_new(&r);
	rc = rc ?: jc_request_set_source(r, "saxpy.cu", jcx_saxpy_src, jcx_saxpy_src_size());
	rc = rc ?: jc_request_add_option(r, "-std=c++17");
	rc = rc ?: jc_request_add_name_expression(r, JCX_SAXPY_F32);
	rc = rc ?: jc_request_add_name_expression(r, JCX_SAXPY_F64);
	if (rc == 0 && arch) {
		rc = jc_request_set_arch(r, arch);
		rc = rc
			 ?: jc_request_set_output(r,
						  strncmp(arch, "compute_", 8) ? JC_CUBIN : JC_PTX);
	}
	if (rc == 0 && app_abi)
		rc = jc_request_set_app_abi(r, app_abi);
	if (rc) {
		jc_request_free(r);
		r = NULL;
	}
	*out = r;
	return rc;
}

jc_request *jcx_saxpy_request(const char *arch, const char *app_abi)
{
	jc_request *r;
	int rc = jcx_saxpy_request_new(arch, app_abi, &r);
	if (rc) {
		fprintf(stderr, "building the SAXPY request: %s\n", jc_strerror(rc));
		exit(1);
	}
	return r;
}

double jcx_x(size_t i)
{
	return 0.5 + (double)(i % 1024) / 1024.0;
}

double jcx_y(size_t i)
{
	return (double)(int)(i % 7) - 3.0;
}

void jcx_saxpy_launch(CUfunction f, int is_f64, double a, CUdeviceptr x, CUdeviceptr y, uint64_t n,
		      CUstream stream)
{
	float af = (float)a;
	unsigned long long nn = n;
	void *args[] = {is_f64 ? (void *)&a : (void *)&af, &x, &y, &nn};
	unsigned blocks = (unsigned)((n + 255) / 256);
	CU_CHECK(cuLaunchKernel(f, blocks, 1, 1, 256, 1, 1, 0, stream, args, NULL));
}

uint64_t jcx_saxpy_timed(CUfunction f, int is_f64, double a, CUdeviceptr x, CUdeviceptr y,
			 uint64_t n)
{
	uint64_t t0 = jcx_now_ns();
	jcx_saxpy_launch(f, is_f64, a, x, y, n, NULL);
	CU_CHECK(cuCtxSynchronize());
	return jcx_now_ns() - t0;
}

void jcx_saxpy_buffers(int is_f64, uint64_t n, CUdeviceptr *x, CUdeviceptr *y)
{
	size_t es = is_f64 ? sizeof(double) : sizeof(float);
	char *hx = malloc(n * es), *hy = malloc(n * es);
	if (!hx || !hy) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	for (uint64_t i = 0; i < n; i++) {
		if (is_f64) {
			((double *)hx)[i] = jcx_x(i);
			((double *)hy)[i] = jcx_y(i);
		} else {
			((float *)hx)[i] = (float)jcx_x(i);
			((float *)hy)[i] = (float)jcx_y(i);
		}
	}
	CU_CHECK(cuMemAlloc(x, n * es));
	CU_CHECK(cuMemAlloc(y, n * es));
	CU_CHECK(cuMemcpyHtoD(*x, hx, n * es));
	CU_CHECK(cuMemcpyHtoD(*y, hy, n * es));
	free(hx);
	free(hy);
}

uint64_t jcx_saxpy_check(int is_f64, double a, CUdeviceptr y, uint64_t n, int launches)
{
	size_t es = is_f64 ? sizeof(double) : sizeof(float);
	char *hy = malloc(n * es);
	if (!hy) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	CU_CHECK(cuMemcpyDtoH(hy, y, n * es));
	uint64_t bad = 0;
	for (uint64_t i = 0; i < n; i++) {
		double want = jcx_y(i) + launches * a * jcx_x(i);
		double got = is_f64 ? ((double *)hy)[i] : (double)((float *)hy)[i];
		if (got != want && bad++ == 0)
			fprintf(stderr, "saxpy<%s>: y[%llu] = %.17g, the CPU says %.17g\n",
				is_f64 ? "double" : "float", (unsigned long long)i, got, want);
	}
	free(hy);
	return bad;
}
