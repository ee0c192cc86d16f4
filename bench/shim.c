/* SPDX-License-Identifier: MIT */
/*
 * The NVRTC shim's figures: a SAXPY hit through libjitcache-nvrtc
 * (nvrtcCreateProgram -> nvrtcCompileProgram -> nvrtcGetCUBIN -> destroy),
 * the real NVRTC compile of the same program in this process, and what the
 * shim adds to a call it only forwards (nvrtcVersion).
 *
 * The shim is dlopen()ed by absolute path: its functions are then called
 * through the handle, while this program's own -lnvrtc stays the real one
 * (glibc matches an absolute path by file, not by soname: README).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "shim/real.h"

static void load(void *h, struct jc_real_nvrtc *t, const char *what)
{
#define JC_BENCH_LOOKUP(ret, name, params, args, use)                                              \
	if (!(*(void **)&t->name = dlsym(h, #name)))                                               \
		bench_die("%s lacks %s", what, #name);
	JC_NVRTC_FUNCTIONS(JC_BENCH_LOOKUP)
#undef JC_BENCH_LOOKUP
}

/* One create -> compile -> get CUBIN -> destroy of src through t; ns. */
static uint64_t compile_once(const struct jc_real_nvrtc *t, const char *src, const char *what)
{
	static const char *const opts[] = {"--gpu-architecture=sm_90"};
	uint64_t t0 = jc__now_ns();
	nvrtcProgram p;
	size_t n = 0;
	nvrtcResult r = t->nvrtcCreateProgram(&p, src, "saxpy.cu", 0, NULL, NULL);
	r = r ?: t->nvrtcAddNameExpression(p, "&saxpy<float>");
	r = r ?: t->nvrtcCompileProgram(p, 1, opts);
	r = r ?: t->nvrtcGetCUBINSize(p, &n);
	char *cubin = r == NVRTC_SUCCESS ? malloc(n) : NULL;
	r = r ?: t->nvrtcGetCUBIN(p, cubin);
	uint64_t dt = jc__now_ns() - t0;
	if (r != NVRTC_SUCCESS || n == 0)
		bench_die("%s: SAXPY compile failed (%d)", what, r);
	free(cubin);
	t->nvrtcDestroyProgram(&p);
	return dt;
}

static double mean_version_ns(const struct jc_real_nvrtc *t, size_t iters)
{
	int major, minor;
	uint64_t t0 = jc__now_ns();
	for (size_t i = 0; i < iters; i++)
		t->nvrtcVersion(&major, &minor);
	return (double)(jc__now_ns() - t0) / (double)iters;
}

void bench_shim(const struct bench_daemon *d, const struct bench_plan *plan, const char *saxpy_src,
		struct bench_shim *out)
{
	const char *env = getenv("JC_SHIM_LIB");
	const char *path = env && *env ? env : JC_BENCH_SHIM;
	struct jc_real_nvrtc shim, real;
	setenv("JITCACHE_SOCKET", d->core.sock, 1);
	void *hs = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!hs)
		bench_die("cannot load the shim (set JC_SHIM_LIB): %s", dlerror());
	load(hs, &shim, path);
	void *hr = dlopen(JC_BENCH_REAL_NVRTC, RTLD_NOW | RTLD_LOCAL);
	if (!hr)
		bench_die("cannot load the real NVRTC: %s", dlerror());
	load(hr, &real, JC_BENCH_REAL_NVRTC);

	/* The real compile, then the shim's first (the daemon's miss or hit). */
	double v[8];
	int n = 0;
	while (n < plan->compile_reps && n < 8)
		v[n++] = (double)compile_once(&real, saxpy_src, "real NVRTC") / 1e6;
	out->real_compile_ms = jtl_median(v, n);
	compile_once(&shim, saxpy_src, "shim");

	size_t iters = plan->hit_iters / 5 + 10;
	uint64_t *ns = malloc(iters * sizeof(*ns));
	if (!ns)
		bench_die("out of memory");
	for (size_t i = 0; i < iters; i++)
		ns[i] = compile_once(&shim, saxpy_src, "shim");
	bench_lat_of(ns, iters, &out->hit);
	free(ns);

	size_t calls = plan->hit_iters * 20 + 1000;
	mean_version_ns(&shim, calls / 10); /* warm both */
	mean_version_ns(&real, calls / 10);
	out->version_real_ns = mean_version_ns(&real, calls);
	out->version_shim_ns = mean_version_ns(&shim, calls);
	unsetenv("JITCACHE_SOCKET");
	/* The handles stay open: the shim's pool and the real library live on. */
}
