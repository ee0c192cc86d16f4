/* SPDX-License-Identifier: MIT */
#include "saxpy_plugin.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "gpu_common.h"

#define PLUGIN_API  __attribute__((visibility("default")))
#define MAX_DEVICES 64

struct dev_state {
	int ready;
	CUdevice dev;
	CUcontext primary;
	jc_client *client;
	jc_request *req;
	jc_cuda_module *mod;
	CUfunction fn[2]; /* saxpy<float>, saxpy<double> */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct dev_state devs[MAX_DEVICES];

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

static int cu_fail(char *err, size_t errlen, CUresult r, const char *what)
{
	return fail(err, errlen, JC_EINTERNAL, "%s: %s", what, jcx_cu_name(r));
}

PLUGIN_API uint32_t saxpy_plugin_abi_version(void)
{
	return SAXPY_PLUGIN_ABI_VERSION;
}

static int check_views(const struct gpu_buffer_view *x, const struct gpu_buffer_view *y, char *err,
		       size_t errlen)
{
	if (!x || !y)
		return fail(err, errlen, JC_EINVAL, "NULL buffer view");
	if (x->abi_version != SAXPY_PLUGIN_ABI_VERSION ||
	    y->abi_version != SAXPY_PLUGIN_ABI_VERSION)
		return fail(err, errlen, JC_EVERSION, "buffer view ABI %u/%u, plugin ABI %u",
			    x->abi_version, y->abi_version, SAXPY_PLUGIN_ABI_VERSION);
	if (x->dtype != y->dtype || (x->dtype != SAXPY_F32 && x->dtype != SAXPY_F64))
		return fail(err, errlen, JC_EINVAL,
			    "dtypes %u and %u: both must be SAXPY_F32 or SAXPY_F64", x->dtype,
			    y->dtype);
	uint64_t es = x->dtype == SAXPY_F64 ? 8 : 4;
	if (!x->data || !y->data || x->bytes != y->bytes || !x->bytes || x->bytes % es)
		return fail(err, errlen, JC_EINVAL,
			    "views of %llu and %llu bytes: must be equal, non-zero "
			    "multiples of %llu",
			    (unsigned long long)x->bytes, (unsigned long long)y->bytes,
			    (unsigned long long)es);
	if (x->device != y->device || x->device < 0 || x->device >= MAX_DEVICES)
		return fail(err, errlen, JC_EINVAL,
			    "devices %d and %d: must be one device below %d", x->device, y->device,
			    MAX_DEVICES);
	return 0;
}

/* The buffer must belong to the primary context of its device and hold
 * the whole view (CU_POINTER_ATTRIBUTE_CONTEXT / _RANGE_*: CUDA Driver API
 * reference, cuPointerGetAttribute). */
static int check_buffer(const char *name, const struct gpu_buffer_view *v,
			const struct dev_state *s, char *err, size_t errlen)
{
	CUdeviceptr p = (CUdeviceptr)(uintptr_t)v->data;
	CUcontext ctx = NULL;
	CUresult r = cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, p);
	if (r != CUDA_SUCCESS)
		return fail(err, errlen, JC_EINVAL, "buffer %s (%p) is not CUDA memory: %s", name,
			    v->data, jcx_cu_name(r));
	if (ctx && ctx != s->primary)
		return fail(
		    err, errlen, JC_EINVAL,
		    "buffer %s (%p) belongs to context %p, not to device %d's "
		    "primary context %p: this plugin runs in the primary context (allocate there, "
		    "e.g. with cudaMalloc)",
		    name, v->data, (void *)ctx, v->device, (void *)s->primary);
	int ordinal = -1;
	CUdeviceptr start = 0;
	size_t size = 0;
	if ((r = cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p)) !=
		CUDA_SUCCESS ||
	    (r = cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p)) !=
		CUDA_SUCCESS ||
	    (r = cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p)) != CUDA_SUCCESS)
		return cu_fail(err, errlen, r, "cuPointerGetAttribute");
	if (ordinal != v->device)
		return fail(err, errlen, JC_EINVAL,
			    "buffer %s lives on device %d, its view says %d", name, ordinal,
			    v->device);
	if (p - start > size || v->bytes > size - (p - start))
		return fail(err, errlen, JC_EINVAL,
			    "buffer %s: %llu bytes from %p run past its allocation "
			    "of %zu bytes",
			    name, (unsigned long long)v->bytes, v->data, size);
	return 0;
}

/* Connects, fetches and loads SAXPY into the primary context (current). */
static int load_module(struct dev_state *s, char *err, size_t errlen)
{
	int rc = jc_client_connect(NULL, &s->client);
	if (rc)
		return fail(err, errlen, rc, "%s", jc_client_errmsg(NULL));
	rc = jcx_saxpy_request_new(NULL, "saxpy-plugin-1", &s->req);
	if (rc) {
		fail(err, errlen, rc, "building the request: %s", jc_strerror(rc));
		goto err;
	}
	rc = jc_cuda_module_load(s->client, s->req, &s->mod);
	rc = rc ?: jc_cuda_module_function(s->mod, JCX_SAXPY_F32, &s->fn[0]);
	rc = rc ?: jc_cuda_module_function(s->mod, JCX_SAXPY_F64, &s->fn[1]);
	if (rc == 0)
		return 0;
	fail(err, errlen, rc, "%s", jc_cuda_errmsg());
err:
	jc_cuda_module_free(s->mod);
	jc_request_free(s->req);
	jc_client_close(s->client);
	s->mod = NULL, s->req = NULL, s->client = NULL;
	return rc;
}

static int device_state(int device, struct dev_state **out, char *err, size_t errlen)
{
	struct dev_state *s = &devs[device];
	*out = s;
	if (s->ready)
		return 0;
	CUresult r = cuInit(0);
	if (r == CUDA_SUCCESS)
		r = cuDeviceGet(&s->dev, device);
	if (r == CUDA_SUCCESS)
		r = cuDevicePrimaryCtxRetain(&s->primary, s->dev);
	if (r != CUDA_SUCCESS)
		return cu_fail(err, errlen, r, "primary context");
	s->ready = 1;
	return 0;
}

static int run_locked(double a, const struct gpu_buffer_view *x, const struct gpu_buffer_view *y,
		      CUstream stream, char *err, size_t errlen)
{
	struct dev_state *s;
	int rc = device_state(x->device, &s, err, errlen);
	rc = rc ?: check_buffer("x", x, s, err, errlen);
	rc = rc ?: check_buffer("y", y, s, err, errlen);
	if (rc)
		return rc;
	/* NULL and the special streams stand for the current context's
	 * (cuStreamGetCtx, CUDA Driver API reference). */
	CUcontext sctx = NULL;
	CUresult r = cuStreamGetCtx(stream, &sctx);
	if (r != CUDA_SUCCESS)
		return fail(err, errlen, JC_EINVAL, "stream %p: %s", (void *)stream,
			    jcx_cu_name(r));
	if (sctx != s->primary)
		return fail(err, errlen, JC_EINVAL,
			    "stream %p belongs to context %p, not to device %d's "
			    "primary context %p",
			    (void *)stream, (void *)sctx, x->device, (void *)s->primary);
	/* ScopedContext: the primary context for the load and the launch, the
	 * caller's current one back afterwards. */
	CUcontext prev = NULL;
	if ((r = cuCtxGetCurrent(&prev)) != CUDA_SUCCESS ||
	    (r = cuCtxSetCurrent(s->primary)) != CUDA_SUCCESS)
		return cu_fail(err, errlen, r, "entering the primary context");
	if (!s->mod)
		rc = load_module(s, err, errlen);
	if (rc == 0) {
		int f64 = x->dtype == SAXPY_F64;
		uint64_t n = x->bytes / (f64 ? 8 : 4);
		float af = (float)a;
		CUdeviceptr px = (CUdeviceptr)(uintptr_t)x->data,
			    py = (CUdeviceptr)(uintptr_t)y->data;
		unsigned long long nn = n;
		void *args[] = {f64 ? (void *)&a : (void *)&af, &px, &py, &nn};
		r = cuLaunchKernel(s->fn[f64], (unsigned)((n + 255) / 256), 1, 1, 256, 1, 1, 0,
				   stream, args, NULL);
		if (r != CUDA_SUCCESS)
			rc = cu_fail(err, errlen, r, "cuLaunchKernel");
	}
	cuCtxSetCurrent(prev);
	return rc;
}

PLUGIN_API int saxpy_plugin_run(double a, const struct gpu_buffer_view *x,
				const struct gpu_buffer_view *y, struct CUstream_st *stream,
				char *err, size_t errlen)
{
	int rc = check_views(x, y, err, errlen);
	if (rc)
		return rc;
	pthread_mutex_lock(&lock);
	rc = run_locked(a, x, y, stream, err, errlen);
	pthread_mutex_unlock(&lock);
	return rc;
}

PLUGIN_API void saxpy_plugin_shutdown(void)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_DEVICES; i++) {
		struct dev_state *s = &devs[i];
		if (!s->ready)
			continue;
		jc_cuda_module_free(s->mod);
		jc_request_free(s->req);
		jc_client_close(s->client);
		cuDevicePrimaryCtxRelease(s->dev);
		*s = (struct dev_state){0};
	}
	pthread_mutex_unlock(&lock);
}
