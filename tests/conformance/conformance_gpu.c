/* SPDX-License-Identifier: MIT */
/*
 * The GPU part of the conformance suite: loads a case's cubin (as a
 * jitcache path served it) into the primary context of device 0, launches
 * its conf_check(int *out) kernel on one block of 128 threads and checks
 * out[0] (the case's own result: a sort, a reduction, complex, half and
 * bfloat16 arithmetic, a linked device function...) and out[1] (the
 * CONF_VALUE of the header version compiled).
 *
 * Usage: conformance_gpu CUBIN EXPECT0 EXPECT1. Exit 0 when both hold.
 */
#include <stdio.h>
#include <stdlib.h>

#include "gpu_common.h"
#include "tests/lib/core.h"

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: conformance_gpu CUBIN EXPECT0 EXPECT1\n");
		return 2;
	}
	size_t size;
	uint8_t *image = jtl_read_file(argv[1], &size);
	if (!image) {
		fprintf(stderr, "cannot read %s\n", argv[1]);
		return 1;
	}
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction f;
	CUdeviceptr out;
	int got[2] = {0, 0};
	jcx_primary_ctx(0, &dev, &ctx);
	CU_CHECK(cuModuleLoadData(&mod, image));
	CU_CHECK(cuModuleGetFunction(&f, mod, "conf_check"));
	CU_CHECK(cuMemAlloc(&out, sizeof(got)));
	CU_CHECK(cuMemsetD8(out, 0, sizeof(got)));
	void *args[] = {&out};
	CU_CHECK(cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
	CU_CHECK(cuCtxSynchronize());
	CU_CHECK(cuMemcpyDtoH(got, out, sizeof(got)));
	int ok = got[0] == atoi(argv[2]) && got[1] == atoi(argv[3]);
	printf("conf_check: out[0]=%d (want %s), out[1]=%d (want %s): %s\n", got[0], argv[2],
	       got[1], argv[3], ok ? "ok" : "WRONG");
	cuMemFree(out);
	cuModuleUnload(mod);
	free(image);
	return ok ? 0 : 1;
}
