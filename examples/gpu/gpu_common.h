/* SPDX-License-Identifier: MIT */
/*
 * Shared by the GPU examples (not part of the library): driver error checks,
 * the primary-context set-up (docs/ARCHITECTURE.md, "CUDA contexts"), the
 * templated SAXPY kernel of examples/saxpy.cu (embedded at build time), its
 * launch and its check against the CPU. Every function exits the process with
 * status 1 and a message on a CUDA or jitcache failure unless it says
 * otherwise.
 */
#ifndef JCX_GPU_COMMON_H
#define JCX_GPU_COMMON_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "jitcache/jitcache.h"
#include "jitcache/jitcache_cuda.h"

/* Exits with the driver's error name when call fails. */
#define CU_CHECK(call) jcx_cu_check((call), #call, __FILE__, __LINE__)
void jcx_cu_check(CUresult r, const char *what, const char *file, int line);
/* Exits with the jitcache message when rc != 0 (client may be NULL). */
void jcx_jc_check(int rc, const char *what, jc_client *c);

/* "CUDA_ERROR_X" of r (static storage). */
const char *jcx_cu_name(CUresult r);

/* CLOCK_MONOTONIC in nanoseconds, and milliseconds between two of them. */
uint64_t jcx_now_ns(void);
double jcx_ms(uint64_t from_ns, uint64_t to_ns);

/* examples/saxpy.cu, NUL-terminated, and its size without the NUL. */
extern const char jcx_saxpy_src[];
size_t jcx_saxpy_src_size(void);

/* The name expressions of the two SAXPY instances. */
#define JCX_SAXPY_F32 "&saxpy<float>"
#define JCX_SAXPY_F64 "&saxpy<double>"

/* cuInit, device `ordinal`, its primary context retained and made current. */
void jcx_primary_ctx(int ordinal, CUdevice *dev, CUcontext *ctx);

/* A request for saxpy.cu with both name expressions and -std=c++17; arch
 * may be NULL (jc_cuda_module_load resolves it), app_abi may be NULL.
 * Returns 0 or the jc_request_* error (*out NULL); does not exit. */
int jcx_saxpy_request_new(const char *arch, const char *app_abi, jc_request **out);
/* The same, exiting on failure. */
jc_request *jcx_saxpy_request(const char *arch, const char *app_abi);

/* The input pattern: x[i] = 0.5 + (i % 1024) / 1024, y[i] = i % 7 - 3.
 * With a = 2 or 0.5 and a few launches every result is exact in float, so
 * the check is equality: any wrong instance, type or element shows. */
double jcx_x(size_t i);
double jcx_y(size_t i);

/*
 * Launches saxpy<T> (f of the module, is_f64 selects T) on stream:
 * y = a * x + y over n elements, 256 threads a block. Does not synchronise.
 */
void jcx_saxpy_launch(CUfunction f, int is_f64, double a, CUdeviceptr x, CUdeviceptr y, uint64_t n,
		      CUstream stream);

/* jcx_saxpy_launch on the NULL stream, then cuCtxSynchronize; returns the
 * nanoseconds both took. */
uint64_t jcx_saxpy_timed(CUfunction f, int is_f64, double a, CUdeviceptr x, CUdeviceptr y,
			 uint64_t n);

/* Device buffers of n elements of T filled with the pattern (synchronous
 * copies in the current context). Free with cuMemFree. */
void jcx_saxpy_buffers(int is_f64, uint64_t n, CUdeviceptr *x, CUdeviceptr *y);

/*
 * Copies y back (synchronously, current context) and compares it with the
 * CPU's y0 + launches * a * x, element by element. Returns the number of
 * elements that differ (0: correct) and prints the first one.
 */
uint64_t jcx_saxpy_check(int is_f64, double a, CUdeviceptr y, uint64_t n, int launches);

#endif
