/* SPDX-License-Identifier: MIT */
/*
 * CUDA driver-API helpers (include/jitcache/jitcache_cuda.h). libcuda is
 * loaded with dlopen() on first use, never linked, so the client library
 * keeps running on machines without a driver. cuda.h is included for its
 * types and constants only.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/client_internal.h"
#include "common/util.h"
#include "jitcache/jitcache_cuda.h"

struct jc_cuda_module {
	CUcontext ctx;
	CUmodule mod;
	jc_result *res;
	unsigned reports;
	uint64_t t[JC_CUDA_TIME_LOOKUP + 1];
};

/* The driver entry points used here. None of these names is remapped to a
 * _v2 symbol by cuda.h's #defines, so dlsym finds them under these names. */
#define CU_FUNCS(X)                                                                                \
	X(cuGetErrorName)                                                                          \
	X(cuGetErrorString)                                                                        \
	X(cuDriverGetVersion)                                                                      \
	X(cuDeviceGetAttribute)                                                                    \
	X(cuCtxGetCurrent)                                                                         \
	X(cuCtxSetCurrent)                                                                         \
	X(cuCtxGetDevice)                                                                          \
	X(cuModuleLoadDataEx)                                                                      \
	X(cuModuleGetFunction)                                                                     \
	X(cuModuleUnload)

static struct {
#define X(f) __typeof__(f) *f;
	CU_FUNCS(X)
#undef X
} cu;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static char cu_err[256];

static __thread char errbuf[1024];

static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(errbuf, sizeof(errbuf), fmt, ap);
	va_end(ap);
	return code;
}

JC_API const char *jc_cuda_errmsg(void)
{
	return errbuf;
}

static void cu_load(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(cu_err, sizeof(cu_err), "cannot load the CUDA driver (libcuda.so.1): %s",
			 dlerror());
		return;
	}
#define X(f)                                                                                       \
	if (!(cu.f = (__typeof__(f) *)dlsym(h, #f))) {                                             \
		snprintf(cu_err, sizeof(cu_err), "libcuda.so.1 lacks %s: driver too old", #f);     \
		return;                                                                            \
	}
	CU_FUNCS(X)
#undef X
}

/* Loads the driver once per process; JC_ENOTSUP with the reason otherwise. */
static int cu_get(void)
{
	pthread_once(&cu_once, cu_load);
	return cu_err[0] ? fail(JC_ENOTSUP, "%s", cu_err) : 0;
}

/* "CUDA_ERROR_X (description)" of r, in buf. */
static const char *cu_str(CUresult r, char *buf, size_t len)
{
	const char *name = NULL, *desc = NULL;
	cu.cuGetErrorName(r, &name);
	cu.cuGetErrorString(r, &desc);
	if (name)
		snprintf(buf, len, "%s (%s)", name, desc ? desc : "");
	else
		snprintf(buf, len, "CUresult %d", (int)r);
	return buf;
}

static int cu_fail(int code, CUresult r, const char *what)
{
	char s[256];
	return fail(code, "%s: %s", what, cu_str(r, s, sizeof(s)));
}

int jc__cuda_pick_target(int cc, const char *supported, int force, char *arch, size_t len)
{
	if (!supported || !arch || len < 16)
		return JC_EINVAL;
	int best = 0, exact = 0;
	for (const char *p = supported; *p;) {
		char *end;
		if (strncmp(p, "sm_", 3) != 0)
			return JC_EPROTO;
		long n = strtol(p + 3, &end, 10);
		if (end == p + 3 || n <= 0 || n > 10000 || (*end && (*end != ' ' || !end[1])))
			return JC_EPROTO;
		exact |= n == cc;
		if ((n < cc || (n == cc && force == JC__FORCE_PTX)) && n > best)
			best = (int)n;
		p = end + (*end == ' ');
	}
	int cubin = force == JC__FORCE_CUBIN || (force == JC__FORCE_NONE && exact);
	if (cubin ? !exact : !best)
		return JC_ENOTSUP;
	snprintf(arch, len, cubin ? "sm_%d" : "compute_%d", cubin ? cc : best);
	return 0;
}

int jc__cuda_pick_forced(int cc, const char *requested, int force, char *arch, size_t len)
{
	if (!requested || !arch || len < 16)
		return JC_EINVAL;
	int best = -1;
	char suffix = 0;
	for (const char *p = requested; *p;) {
		int ptx = strncmp(p, "compute_", 8) == 0;
		if (!ptx && strncmp(p, "sm_", 3) != 0)
			return JC_EINVAL;
		char *end;
		long n = strtol(p + (ptx ? 8 : 3), &end, 10);
		char s = *end == 'a' || *end == 'f' ? *end++ : 0;
		if (n <= 0 || n > 10000 || (*end && *end != ','))
			return JC_EINVAL;
		if (force == JC__FORCE_PTX && n <= cc && n > best)
			best = (int)n;
		if (force == JC__FORCE_CUBIN && n == cc && (best < 0 || (!ptx && s)))
			best = (int)n, suffix = ptx ? 0 : s;
		p = end + (*end == ',');
	}
	if (best < 0 || force == JC__FORCE_NONE)
		return JC_ENOTSUP;
	if (force == JC__FORCE_PTX)
		snprintf(arch, len, "compute_%d", best);
	else
		snprintf(arch, len, suffix ? "sm_%d%c" : "sm_%d", best, suffix);
	return 0;
}

/* JITCACHE_FORCE_PTX / JITCACHE_FORCE_CUBIN: JC__FORCE_*, or -1 for both. */
static int force_mode(void)
{
	const char *p = secure_getenv("JITCACHE_FORCE_PTX"),
		   *c = secure_getenv("JITCACHE_FORCE_CUBIN");
	int ptx = p && strcmp(p, "1") == 0, cubin = c && strcmp(c, "1") == 0;
	return ptx && cubin ? -1 : ptx ? JC__FORCE_PTX : cubin ? JC__FORCE_CUBIN : JC__FORCE_NONE;
}

static const char *force_name(int force)
{
	return force == JC__FORCE_PTX ? "JITCACHE_FORCE_PTX=1" : "JITCACHE_FORCE_CUBIN=1";
}

/* Copies string field name of the daemon's "version" record into buf. */
static int version_field(const struct jc_admin_reply *rep, const char *name, char *buf, size_t len)
{
	const struct jc_kv *kv = rep->n_rec ? jc__record_get(&rep->rec[0], name) : NULL;
	if (!kv || kv->is_int || strlen(kv->s) >= len)
		return fail(JC_EPROTO, "jitcached's version record has no usable %s", name);
	strcpy(buf, kv->s);
	return 0;
}

/* The daemon's NVRTC supported architectures and version: from the
 * handshake, else (an older daemon) the admin command "version". */
static int daemon_toolchain(jc_client *c, char *archs, size_t alen, char *nvrtc, size_t nlen)
{
	const char *a, *v;
	if (jc__client_toolchain(c, &a, &v) == 0) {
		if (strlen(a) >= alen || strlen(v) >= nlen)
			return fail(
			    JC_EPROTO,
			    "jitcached's handshake has no usable supported_archs or nvrtc_version");
		strcpy(archs, a);
		strcpy(nvrtc, v);
		return 0;
	}
	struct jc_admin_req req = {.command = (char *)"version"};
	struct jc_admin_reply rep = {0};
	int rc = jc__client_admin(c, &req, &rep);
	if (rc)
		fail(rc, "asking jitcached for its supported architectures: %s",
		     jc_client_errmsg(c));
	else if (rep.status)
		rc = fail(rep.status, "jitcached refused 'version': %s",
			  rep.message ? rep.message : jc_strerror(rep.status));
	else
		rc = version_field(&rep, "supported_archs", archs, alen)
			 ?: version_field(&rep, "nvrtc_version", nvrtc, nlen);
	jc__admin_reply_clear(&rep);
	return rc;
}

JC_API int jc_cuda_resolve_target(jc_client *c, int device, char *arch, size_t len)
{
	if (!c || !arch || len < 16)
		return fail(JC_EINVAL,
			    "jc_cuda_resolve_target: NULL argument or arch buffer under 16 bytes");
	int rc = cu_get();
	if (rc)
		return rc;
	int major = 0, minor = 0;
	CUresult r =
	    cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
	if (r == CUDA_SUCCESS)
		r = cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
					    device);
	if (r != CUDA_SUCCESS)
		return cu_fail(JC_ENOTSUP, r, "cuDeviceGetAttribute(compute capability)");
	char archs[1024], nvrtc[16];
	if ((rc = daemon_toolchain(c, archs, sizeof(archs), nvrtc, sizeof(nvrtc))))
		return rc;
	int cc = major * 10 + minor, force = force_mode();
	if (force < 0)
		return fail(JC_EINVAL,
			    "JITCACHE_FORCE_PTX=1 and JITCACHE_FORCE_CUBIN=1 exclude each other");
	rc = jc__cuda_pick_target(cc, archs, force, arch, len);
	if (rc == JC_ENOTSUP && force == JC__FORCE_CUBIN)
		return fail(rc,
			    "JITCACHE_FORCE_CUBIN=1: NVRTC %s makes no cubin for a device of "
			    "compute capability %d.%d (it supports %s)",
			    nvrtc, major, minor, archs);
	if (rc == JC_ENOTSUP)
		return fail(rc,
			    "device of compute capability %d.%d is older than every architecture "
			    "NVRTC %s supports (%s)",
			    major, minor, nvrtc, archs);
	if (rc)
		return fail(rc, "jitcached sent a malformed supported_archs list: '%s'", archs);
	if (strncmp(arch, "compute_", 8) != 0)
		return 0;
	int drv = 0, nv_major = 0, nv_minor = 0;
	if ((r = cu.cuDriverGetVersion(&drv)) != CUDA_SUCCESS)
		return cu_fail(JC_ENOTSUP, r, "cuDriverGetVersion");
	if (sscanf(nvrtc, "%d.%d", &nv_major, &nv_minor) != 2)
		return fail(JC_EPROTO, "jitcached sent a malformed nvrtc_version '%s'", nvrtc);
	/* cuDriverGetVersion: 1000 * major + 10 * minor (CUDA Driver API reference). */
	if (drv < nv_major * 1000 + nv_minor * 10)
		return fail(JC_EVERSION,
			    "device %d.%d needs PTX (%s), but the driver (CUDA %d.%d) is "
			    "older than the daemon's NVRTC %s and cannot JIT its PTX",
			    major, minor, arch, drv / 1000, drv % 1000 / 10, nvrtc);
	return 0;
}

JC_API int jc_cuda_request_set_target(jc_client *c, jc_request *r, int device)
{
	char arch[32];
	if (!r)
		return fail(JC_EINVAL, "jc_cuda_request_set_target: NULL request");
	int rc = jc_cuda_resolve_target(c, device, arch, sizeof(arch));
	if (rc)
		return rc;
	rc = jc_request_set_arch(r, arch)
		 ?: jc_request_set_output(r, arch[0] == 's' ? JC_CUBIN : JC_PTX);
	return rc ? fail(rc, "out of memory") : 0;
}

/* A forced load of a request that names its targets: r is changed to the
 * one target jc__cuda_pick_forced chooses for device dev. */
static int force_target(jc_request *r, CUdevice dev, int force)
{
	int major = 0, minor = 0;
	char arch[32];
	if (force < 0)
		return fail(JC_EINVAL,
			    "JITCACHE_FORCE_PTX=1 and JITCACHE_FORCE_CUBIN=1 exclude each other");
	CUresult cr =
	    cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
	if (cr == CUDA_SUCCESS)
		cr = cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
					     dev);
	if (cr != CUDA_SUCCESS)
		return cu_fail(JC_ENOTSUP, cr, "cuDeviceGetAttribute(compute capability)");
	int rc = jc__cuda_pick_forced(major * 10 + minor, r->req.arch, force, arch, sizeof(arch));
	if (rc == JC_ENOTSUP)
		return fail(rc,
			    "%s: the request's targets (%s) hold no %s for a device of compute "
			    "capability %d.%d",
			    force_name(force), r->req.arch,
			    force == JC__FORCE_PTX ? "PTX at or below it" : "cubin of exactly it",
			    major, minor);
	if (rc)
		return fail(rc, "the request's targets '%s' are malformed", r->req.arch);
	rc = jc_request_set_arch(r, arch)
		 ?: jc_request_set_output(r, force == JC__FORCE_PTX ? JC_PTX : JC_CUBIN);
	return rc ? fail(rc, "out of memory") : 0;
}

/* Whether the driver refused the image itself (as opposed to the context,
 * memory or the call): those are reported to the daemon. */
static int image_refused(CUresult r)
{
	return r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_NO_BINARY_FOR_GPU ||
	       r == CUDA_ERROR_INVALID_PTX || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
}

static int load_code(CUresult r)
{
	switch (r) {
	case CUDA_ERROR_NO_BINARY_FOR_GPU:
	case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
		return JC_EVERSION;
	case CUDA_ERROR_INVALID_IMAGE:
	case CUDA_ERROR_INVALID_PTX:
		return JC_ECORRUPT;
	case CUDA_ERROR_OUT_OF_MEMORY:
		return JC_ENOMEM;
	case CUDA_ERROR_INVALID_CONTEXT:
	case CUDA_ERROR_CONTEXT_IS_DESTROYED:
		return JC_EINVAL;
	default:
		return JC_EINTERNAL;
	}
}

/* cuModuleLoadDataEx of m->res into the current context; *cr gets the
 * driver's result and reason (len bytes) a message for the daemon. */
static int load(struct jc_cuda_module *m, CUresult *cr, char *reason, size_t len)
{
	size_t size;
	const char *data = jc_result_data(m->res, &size);
	char *copy = NULL;
	if (!data || !size)
		return fail(JC_EPROTO, "jitcached served an empty artifact");
	if (jc_result_output(m->res) == JC_PTX && data[size - 1] != '\0') {
		/* PTX must be NUL-terminated (cuModuleLoadDataEx). */
		if (!(copy = malloc(size + 1)))
			return fail(JC_ENOMEM, "out of memory");
		memcpy(copy, data, size);
		copy[size] = '\0';
		data = copy;
	}
	char log[4096] = "";
	CUjit_option opt[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *val[] = {log, (void *)(uintptr_t)sizeof(log)};
	uint64_t t0 = jc__now_ns();
	*cr = cu.cuModuleLoadDataEx(&m->mod, data, 2, opt, val);
	m->t[JC_CUDA_TIME_LOAD] += jc__now_ns() - t0;
	free(copy);
	if (*cr == CUDA_SUCCESS)
		return 0;
	m->mod = NULL;
	int drv = 0;
	char s[256];
	cu.cuDriverGetVersion(&drv);
	snprintf(reason, len, "cuModuleLoadDataEx: %s; driver %d; %s%s", cu_str(*cr, s, sizeof(s)),
		 drv, log[0] ? "JIT log: " : "no JIT log", log);
	return fail(load_code(*cr), "cannot load %s (key %s): %s",
		    jc__output_name(jc_result_output(m->res)) ?: "artifact", jc_result_key(m->res),
		    reason);
}

/* Reports the refused artifact of m and loads the fresh one once. */
static int report_and_reload(jc_client *c, const jc_request *r, struct jc_cuda_module *m,
			     const char *reason)
{
	jc_result *fresh = NULL;
	uint64_t t0 = jc__now_ns();
	int rc = jc_report_load_failure(c, r, m->res, reason, &fresh);
	m->t[JC_CUDA_TIME_FETCH] += jc__now_ns() - t0;
	m->reports++;
	if (rc) {
		jc_result_free(fresh);
		return fail(rc, "reporting a load failure to jitcached: %s",
			    rc == JC_ECOMPILE ? "the fresh compile failed" : jc_client_errmsg(c));
	}
	jc_result_free(m->res);
	m->res = fresh;
	CUresult cr;
	char again[1024];
	return load(m, &cr, again, sizeof(again));
}

JC_API int jc_cuda_module_load(jc_client *c, jc_request *r, jc_cuda_module **out)
{
	if (!out)
		return fail(JC_EINVAL, "jc_cuda_module_load: NULL out");
	*out = NULL;
	if (!c || !r)
		return fail(JC_EINVAL, "jc_cuda_module_load: NULL client or request");
	if (r->req.output == JC_OUTPUT_LTOIR)
		return fail(JC_EINVAL,
			    "an LTO-IR artifact cannot be loaded: link it to a cubin first");
	int rc = cu_get();
	if (rc)
		return rc;
	CUcontext ctx = NULL;
	CUresult cr = cu.cuCtxGetCurrent(&ctx);
	if (cr != CUDA_SUCCESS)
		return cu_fail(JC_EINVAL, cr, "cuCtxGetCurrent");
	if (!ctx)
		return fail(
		    JC_EINVAL,
		    "no CUDA context is current on this thread: make the caller's context "
		    "current first (cuDevicePrimaryCtxRetain + cuCtxSetCurrent, or cudaSetDevice)");
	struct jc_cuda_module *m = calloc(1, sizeof(*m));
	if (!m)
		return fail(JC_ENOMEM, "out of memory");
	m->ctx = ctx;
	int force = force_mode();
	if (!r->req.arch || force) {
		uint64_t t0 = jc__now_ns();
		CUdevice dev;
		if ((cr = cu.cuCtxGetDevice(&dev)) != CUDA_SUCCESS)
			rc = cu_fail(JC_EINVAL, cr, "cuCtxGetDevice");
		else if (!r->req.arch)
			rc = jc_cuda_request_set_target(c, r, dev);
		else
			rc = force_target(r, dev, force);
		m->t[JC_CUDA_TIME_RESOLVE] = jc__now_ns() - t0;
		if (rc)
			goto err;
	}
	uint64_t t0 = jc__now_ns();
	rc = jc_compile(c, r, &m->res);
	m->t[JC_CUDA_TIME_FETCH] = jc__now_ns() - t0;
	if (rc == JC_ECOMPILE) {
		m->ctx = NULL;
		*out = m;
		return fail(
		    rc, "the compile failed: jc_result_log(jc_cuda_module_result()) has the log");
	}
	if (rc) {
		fail(rc, "%s", jc_client_errmsg(c));
		goto err;
	}
	char reason[1024];
	rc = load(m, &cr, reason, sizeof(reason));
	if (rc && image_refused(cr))
		rc = report_and_reload(c, r, m, reason);
	if (rc)
		goto err;
	*out = m;
	return 0;
err:
	jc_result_free(m->res);
	free(m);
	return rc;
}

/* Makes ctx current; *prev gets the caller's (the ScopedContext pattern). */
static CUresult ctx_enter(CUcontext ctx, CUcontext *prev)
{
	CUresult r = cu.cuCtxGetCurrent(prev);
	if (r == CUDA_SUCCESS && *prev != ctx)
		r = cu.cuCtxSetCurrent(ctx);
	return r;
}

static void ctx_leave(CUcontext ctx, CUcontext prev)
{
	if (prev != ctx)
		cu.cuCtxSetCurrent(prev);
}

JC_API int jc_cuda_module_function(jc_cuda_module *m, const char *name, CUfunction *fn)
{
	if (!m || !name || !fn || !m->mod)
		return fail(JC_EINVAL, "jc_cuda_module_function: NULL argument or no module");
	const char *sym = jc_result_lowered_name(m->res, name);
	if (!sym)
		sym = name;
	uint64_t t0 = jc__now_ns();
	CUcontext prev;
	CUresult r = ctx_enter(m->ctx, &prev);
	if (r == CUDA_SUCCESS) {
		r = cu.cuModuleGetFunction(fn, m->mod, sym);
		ctx_leave(m->ctx, prev);
	}
	m->t[JC_CUDA_TIME_LOOKUP] += jc__now_ns() - t0;
	if (r == CUDA_ERROR_NOT_FOUND)
		return fail(JC_ENOTFOUND, "no kernel '%s'%s%s%s in the module", sym,
			    sym != name ? " (from '" : "", sym != name ? name : "",
			    sym != name ? "')" : "");
	return r == CUDA_SUCCESS ? 0 : cu_fail(JC_EINTERNAL, r, "cuModuleGetFunction");
}

JC_API CUmodule jc_cuda_module_handle(const jc_cuda_module *m)
{
	return m->mod;
}

JC_API CUcontext jc_cuda_module_context(const jc_cuda_module *m)
{
	return m->ctx;
}

JC_API const jc_result *jc_cuda_module_result(const jc_cuda_module *m)
{
	return m->res;
}

JC_API unsigned jc_cuda_module_reports(const jc_cuda_module *m)
{
	return m->reports;
}

JC_API uint64_t jc_cuda_module_time_ns(const jc_cuda_module *m, jc_cuda_phase phase)
{
	return (unsigned)phase <= JC_CUDA_TIME_LOOKUP ? m->t[phase] : 0;
}

JC_API int jc_cuda_module_free(jc_cuda_module *m)
{
	if (!m)
		return 0;
	int rc = 0;
	if (m->mod) {
		CUcontext prev;
		CUresult r = ctx_enter(m->ctx, &prev);
		if (r == CUDA_SUCCESS) {
			r = cu.cuModuleUnload(m->mod);
			ctx_leave(m->ctx, prev);
		}
		if (r != CUDA_SUCCESS)
			rc = cu_fail(JC_EINTERNAL, r, "cuModuleUnload");
	}
	jc_result_free(m->res);
	free(m);
	return rc;
}
