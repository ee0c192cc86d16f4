// SPDX-License-Identifier: MIT
// #pragma unroll and __launch_bounds__.
#include "conf_params.h"

__global__ void __launch_bounds__(128, 2) unrolled(const float *in, float *out)
{
	float acc = 0.0f;
#pragma unroll 4
	for (int i = 0; i < 16; i++)
		acc += in[threadIdx.x * 16 + i] * (float)(i + CONF_VALUE);
	out[threadIdx.x] = acc;
}

extern "C" __global__ void __launch_bounds__(128) conf_check(int *out)
{
	int s = 0;
#pragma unroll
	for (int i = 0; i < 16; i++)
		s += i;
	if (threadIdx.x == 0) {
		out[0] = s; // 120
		out[1] = CONF_VALUE;
	}
}
