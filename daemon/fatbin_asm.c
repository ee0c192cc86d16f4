/* SPDX-License-Identifier: MIT */
/*
 * The worker's JC_JOB_FATBIN job (fatbin.h): the parts into one fatbin with
 * nvFatbin, loaded with dlopen from the path the daemon found (CUDA 12.4+;
 * the function types are those of nvFatbin.h, which toolkits without
 * nvFatbin lack, so they are declared here).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/fatbin.h"
#include "core/key.h"
#include "jitcache/jitcache.h"

typedef struct _nvFatbinHandle *nvFatbinHandle;

/* nvFatbin.h: nvFatbinResult is an enum, 0 = NVFATBIN_SUCCESS. */
#define NVFATBIN_FUNCS(X)                                                                          \
	X(nvFatbinCreate, int, (nvFatbinHandle *, const char **, size_t))                          \
	X(nvFatbinAddCubin, int,                                                                   \
	  (nvFatbinHandle, const void *, size_t, const char *, const char *))                      \
	X(nvFatbinAddPTX, int,                                                                     \
	  (nvFatbinHandle, const char *, size_t, const char *, const char *, const char *))        \
	X(nvFatbinSize, int, (nvFatbinHandle, size_t *))                                           \
	X(nvFatbinGet, int, (nvFatbinHandle, void *))                                              \
	X(nvFatbinDestroy, int, (nvFatbinHandle *))                                                \
	X(nvFatbinGetErrorString, const char *, (int))

struct nvfatbin {
#define X(name, ret, args) ret(*name) args;
	NVFATBIN_FUNCS(X)
#undef X
};

const char *jc__fatbin_library(const struct jc_req *req)
{
	static const char opt[] = "-nvfatbin-library=";
	for (size_t i = 0; i < req->link_options.n; i++)
		if (strncmp(req->link_options.v[i], opt, sizeof(opt) - 1) == 0)
			return req->link_options.v[i] + sizeof(opt) - 1;
	return NULL;
}

int jc__fatbin_assemble(const struct jc_req *req, struct jc_res *res, char *err, size_t errlen)
{
	const char *lib = jc__fatbin_library(req);
	struct nvfatbin nf;
	void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_LOCAL) : NULL;
	if (!h)
		return jc__fail(err, errlen, JC_ENOTSUP, "cannot load nvFatbin (%s): %s",
				lib ? lib : "no library named", lib ? dlerror() : "");
#define X(name, ret, args)                                                                         \
	if (!(nf.name = (ret(*) args)dlsym(h, #name))) {                                           \
		dlclose(h);                                                                        \
		return jc__fail(err, errlen, JC_ENOTSUP,                                           \
				"%s lacks %s: nvFatbin older than "                                \
				"CUDA 12.4",                                                       \
				lib, #name);                                                       \
	}
	NVFATBIN_FUNCS(X)
#undef X
	/* "-compress=<bool>" (nvFatbin API reference, nvFatbinCreate): stored
	 * as they are, as with fatbinary --compress=false; 64-bit entries are
	 * the default. */
	const char *opts[] = {"-compress=false"};
	nvFatbinHandle fb = NULL;
	int r = nf.nvFatbinCreate(&fb, opts, 1);
	const char *step = "nvFatbinCreate", *target = "";
	for (size_t i = 0; r == 0 && i < req->n_link_inputs; i++) {
		const struct jc_blob *in = &req->link_inputs[i];
		char num[8];
		target = in->name;
		/* "the numerical architecture ... (the XX of any sm_XX, lto_XX or
		 * compute_XX)": nvFatbin API reference, nvFatbinAddCubin. */
		int n = jc__arch_number(in->name);
		const char *suffix = in->name + strlen(in->name) - 1;
		snprintf(num, sizeof(num), "%d%s", n,
			 *suffix == 'a' || *suffix == 'f' ? suffix : "");
		if (in->type == JC_INPUT_PTX) {
			step = "nvFatbinAddPTX";
			/* NVRTC's PTX and size, its NUL included, as nvFatbin's own
			 * example passes nvrtcGetPTXSize (the decoded blob has a NUL
			 * after its bytes either way). */
			r = nf.nvFatbinAddPTX(fb, (const char *)in->data, in->size, num, in->name,
					      "");
		} else {
			step = "nvFatbinAddCubin";
			r = nf.nvFatbinAddCubin(fb, in->data, in->size, num, in->name);
		}
	}
	size_t size = 0;
	if (r == 0) {
		step = "nvFatbinSize";
		target = "";
		r = nf.nvFatbinSize(fb, &size);
	}
	int rc = 0;
	if (r == 0 && !(res->data = malloc(size ? size : 1))) {
		rc = jc__fail(err, errlen, JC_ENOMEM, "worker out of memory for a %zu-byte fatbin",
			      size);
	} else if (r == 0) {
		step = "nvFatbinGet";
		r = nf.nvFatbinGet(fb, res->data);
	}
	if (r != 0) {
		const char *why = nf.nvFatbinGetErrorString(r);
		rc = jc__fail(err, errlen, JC_EINVAL, "%s%s%s failed: %s (%d)", step,
			      target[0] ? " of " : "", target, why ? why : "unknown nvFatbin error",
			      r);
	} else if (rc == 0) {
		res->size = size;
		res->output = JC_OUTPUT_FATBIN;
	}
	if (fb)
		nf.nvFatbinDestroy(&fb);
	dlclose(h);
	return rc;
}
