// SPDX-License-Identifier: MIT
// -dlto: LTO-IR of this kernel linked with the LTO-IR of a device library
// (dlto_lib.cu) by nvJitLink -lto into one cubin.
#include "conf_params.h"
extern "C" __device__ float conf_softsign(float x);

extern "C" __global__ void act(float *x)
{
	x[threadIdx.x] = conf_softsign(x[threadIdx.x]) * CONF_VALUE;
}

extern "C" __global__ void conf_check(int *out)
{
	if (threadIdx.x == 0) {
		out[0] = (int)(conf_softsign(3.0f) * 1000.0f); // 750
		out[1] = CONF_VALUE;
	}
}
