/* SPDX-License-Identifier: MIT */
/*
 * The in-process fallback: NVRTC and nvJitLink loaded with dlopen (the
 * library never links them) and driven by common/nvjob.c, the same code the
 * daemon's compile workers run. See jitcache.h, step 6.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "client/client_internal.h"
#include "common/nvjob.h"
#include "common/util.h"
#include "config.h"

#define TOOLKIT_MAJOR (CUDA_VERSION / 1000)
#define TOOLKIT_MINOR (CUDA_VERSION % 1000 / 10)

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static struct jc_nv nv;
static int loaded;	       /* 1: nv is filled; kept for the process's life */
static char nvrtc_where[4200]; /* the library it came from */

/* dlopen of name, refusing the jitcache NVRTC shim (it would call us back). */
static void *open_lib(const char *name, char *why, size_t whylen)
{
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(why, whylen, "%s", e ? e : name);
		return NULL;
	}
	/* The shim has NVRTC's soname, so dlopen by name finds it when it is
	 * loaded: a library holding this very code is not NVRTC. */
	Dl_info self, lib;
	void *sym = dlsym(h, "nvrtcCompileProgram");
	if (sym && dladdr((void *)open_lib, &self) && dladdr(sym, &lib) &&
	    self.dli_fbase == lib.dli_fbase) {
		snprintf(why, whylen,
			 "%s is the jitcache NVRTC shim, not NVRTC (set "
			 "JITCACHE_REAL_NVRTC or jc_options_set_nvrtc to the real library)",
			 name);
		dlclose(h);
		return NULL;
	}
	return h;
}

/* The first of: path (given), libNAME.so.MAJOR on the search path, then in
 * the toolkit's lib64. why gets the last failure. */
static void *open_toolkit_lib(const char *given, const char *base, char *where, size_t wherelen,
			      char *why, size_t whylen)
{
	char name[4200];
	if (given) {
		snprintf(where, wherelen, "%s", given);
		return open_lib(given, why, whylen);
	}
	snprintf(name, sizeof(name), "%s.so.%d", base, TOOLKIT_MAJOR);
	void *h = open_lib(name, why, whylen);
	if (!h) {
		snprintf(name, sizeof(name), "%s/%s.so.%d", JC_CUDA_LIBDIR, base, TOOLKIT_MAJOR);
		h = open_lib(name, why, whylen);
	}
	snprintf(where, wherelen, "%s", name);
	return h;
}

/* Fills nv from the two libraries; 0 or JC_ENOTSUP (message in err). */
static int load(const char *nvrtc_path, char *err, size_t errlen)
{
	char why[4400], where[4200];
	void *h = open_toolkit_lib(nvrtc_path, "libnvrtc", nvrtc_where, sizeof(nvrtc_where), why,
				   sizeof(why));
	if (!h)
		return jc__fail(err, errlen, JC_ENOTSUP, "no NVRTC to compile with: %s", why);
	struct jc_nv t = {0};
#define RESOLVE(f)                                                                                 \
	if (!(t.f = (__typeof__(t.f))dlsym(h, #f))) {                                              \
		dlclose(h);                                                                        \
		return jc__fail(err, errlen, JC_ENOTSUP, "%s lacks %s", nvrtc_where, #f);          \
	}
#define RESOLVE_NVRTC(ret, name, params, args, use) JC_NVRTC_IF_##use(RESOLVE(name))
	JC_NVRTC_FUNCTIONS(RESOLVE_NVRTC)
#undef RESOLVE_NVRTC
#undef RESOLVE
	void *l = open_toolkit_lib(NULL, "libnvJitLink", where, sizeof(where), why, sizeof(why));
	int ok = l != NULL;
	char sym[128];
	/* nvJitLink.h's calls are inline wrappers of versioned symbols. */
#define RESOLVE_VERSIONED(f)                                                                       \
	snprintf(sym, sizeof(sym), "__%s_%d_%d", #f, TOOLKIT_MAJOR, TOOLKIT_MINOR);                \
	if (ok && !(t.f = (__typeof__(t.f))dlsym(l, sym))) {                                       \
		ok = 0;                                                                            \
		snprintf(why, sizeof(why), "%s lacks %s", where, sym);                             \
	}
	JC_NVJITLINK_FNS(RESOLVE_VERSIONED)
#undef RESOLVE_VERSIONED
#define RESOLVE_PLAIN(f)                                                                           \
	if (ok && !(t.f = (__typeof__(t.f))dlsym(l, #f))) {                                        \
		ok = 0;                                                                            \
		snprintf(why, sizeof(why), "%s lacks %s", where, #f);                              \
	}
	JC_NVJITLINK_UNVERSIONED_FNS(RESOLVE_PLAIN)
#undef RESOLVE_PLAIN
	t.has_nvjitlink = ok;
	if (!ok) {
		snprintf(t.why_no_nvjitlink, sizeof(t.why_no_nvjitlink), "no nvJitLink: %.200s",
			 why);
		if (l)
			dlclose(l);
	}
	nv = t;
	return 0;
}

int jc__fallback_load(const char *nvrtc_path, char *desc, size_t desclen, char *err, size_t errlen)
{
	int rc = 0;
	pthread_mutex_lock(&load_lock);
	if (!loaded && (rc = load(nvrtc_path, err, errlen)) == 0)
		loaded = 1;
	if (loaded) {
		int maj = 0, min = 0;
		nv.nvrtcVersion(&maj, &min);
		snprintf(desc, desclen, "NVRTC %d.%d from %s%s", maj, min, nvrtc_where,
			 nv.has_nvjitlink ? "" : " (no nvJitLink: link jobs fail)");
	}
	pthread_mutex_unlock(&load_lock);
	return rc;
}

int jc__fallback_run(const struct jc_req *req, struct jc_res *res)
{
	/* nv is written once, under the lock, before loaded is set; callers
	 * have seen jc__fallback_load() succeed. */
	if (!req->arch || !*req->arch)
		jc__nv_set_message(res, JC_EINVAL,
				   "no target architecture: use jc_request_set_arch");
	else if (req->job != JC_JOB_LINK && !req->source)
		jc__nv_set_message(res, JC_EINVAL, "no source: use jc_request_set_source");
	else
		jc__nv_run_job(&nv, req, res);
	res->cache = JC_CACHE_UNCACHED;
	return res->status;
}
