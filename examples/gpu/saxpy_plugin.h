/* SPDX-License-Identifier: MIT */
/*
 * A plugin with a stable C ABI (docs/ARCHITECTURE.md, "Examples", 3): the
 * caller passes views of its own device buffers and its own stream; the
 * plugin runs SAXPY, fetched through jitcached, on that stream. Only plain C
 * types cross the boundary; the view's layout is fixed for abi_version 1.
 *
 * Context contract: the plugin works in the device's primary context, the
 * one the CUDA runtime and most frameworks use (CUDA C++ Programming Guide,
 * "Interoperability between Runtime and Driver APIs"). Buffers and streams
 * of another context (a caller that made its own with cuCtxCreate) are
 * refused with JC_EINVAL and a message, before anything is launched: a
 * kernel in one context must not touch memory of another. The caller's
 * current context is the same after every call as before it.
 */
#ifndef SAXPY_PLUGIN_H
#define SAXPY_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SAXPY_PLUGIN_ABI_VERSION 1u

enum saxpy_plugin_dtype { SAXPY_F32 = 1, SAXPY_F64 = 2 };

/* A view of a caller's device buffer (borrowed for the call). */
struct gpu_buffer_view {
	void *data;	      /* device pointer (CUdeviceptr or cudaMalloc's) */
	uint64_t bytes;	      /* size of the view, a multiple of the dtype's */
	int32_t device;	      /* CUDA device ordinal the buffer lives on */
	uint32_t dtype;	      /* enum saxpy_plugin_dtype */
	uint32_t abi_version; /* SAXPY_PLUGIN_ABI_VERSION */
};

struct CUstream_st;

/* The ABI version the plugin implements. */
uint32_t saxpy_plugin_abi_version(void);

/*
 * y = a * x + y, element-wise, enqueued on `stream` (a stream of the
 * device's primary context; NULL: the default stream, which then requires
 * the primary context to be current). Asynchronous: synchronise the stream
 * before reading y. The first call for a device connects to jitcached
 * ($JITCACHE_SOCKET or the default socket) and loads the module.
 * err gets errlen bytes of message on failure (may be NULL/0).
 * Returns 0 or a negative JC_E* code: JC_EVERSION (abi_version), JC_EINVAL
 * (bad view, views that disagree, a buffer or stream outside the primary
 * context, a view beyond its allocation), or the errors of fetching and
 * loading the module (jitcache_cuda.h), JC_EINTERNAL (a driver call failed).
 * Thread-safe (calls are serialised inside).
 */
int saxpy_plugin_run(double a, const struct gpu_buffer_view *x, const struct gpu_buffer_view *y,
		     struct CUstream_st *stream, char *err, size_t errlen);

/* Unloads modules, closes connections and releases the primary contexts
 * the plugin retained. Call with no run in flight. */
void saxpy_plugin_shutdown(void);

#ifdef __cplusplus
}
#endif
#endif
