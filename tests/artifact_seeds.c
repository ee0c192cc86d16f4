/* SPDX-License-Identifier: MIT */
#include "artifact_seeds.h"

#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int jct_seed_nvrtc(const char *arch, int ltoir, struct jct_blob *out)
{
	nvrtcProgram p;
	char opt[64];
	snprintf(opt, sizeof(opt), "--gpu-architecture=%s", arch);
	const char *opts[] = {opt, "-dlto"};
	if (nvrtcCreateProgram(&p, JCT_SEED_SOURCE, "seed.cu", 0, NULL, NULL) != NVRTC_SUCCESS)
		return -1;
	nvrtcResult r = nvrtcCompileProgram(p, ltoir ? 2 : 1, opts);
	size_t n = 0;
	int cubin = !ltoir && strncmp(arch, "sm_", 3) == 0;
	if (r == NVRTC_SUCCESS)
		r = ltoir   ? nvrtcGetLTOIRSize(p, &n)
		    : cubin ? nvrtcGetCUBINSize(p, &n)
			    : nvrtcGetPTXSize(p, &n);
	out->size = n;
	if (r == NVRTC_SUCCESS && !(out->data = malloc(n)))
		r = NVRTC_ERROR_OUT_OF_MEMORY;
	if (r == NVRTC_SUCCESS)
		r = ltoir   ? nvrtcGetLTOIR(p, (char *)out->data)
		    : cubin ? nvrtcGetCUBIN(p, (char *)out->data)
			    : nvrtcGetPTX(p, (char *)out->data);
	if (r != NVRTC_SUCCESS)
		fprintf(stderr, "seed: NVRTC for %s: %s\n", arch, nvrtcGetErrorString(r));
	nvrtcDestroyProgram(&p);
	return r == NVRTC_SUCCESS ? 0 : -1;
}
