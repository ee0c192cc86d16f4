// SPDX-License-Identifier: MIT
// cuda_fp16.h and cuda_bf16.h arithmetic.
#include "conf_params.h"
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__global__ void hscale(__half *h, __nv_bfloat16 *b, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		h[i] = __hmul(h[i], __float2half((float)CONF_VALUE));
		b[i] = __hadd(b[i], __float2bfloat16(0.5f));
	}
}

extern "C" __global__ void conf_check(int *out)
{
	__half h = __hmul(__float2half(1.5f), __float2half(2.25f));
	__nv_bfloat16 b = __hmul(__float2bfloat16(2.0f), __float2bfloat16(3.0f));
	if (threadIdx.x == 0) {
		out[0] = (int)(__half2float(h) * 1000) + (int)(__bfloat162float(b) * 10) * 10000; // 603375
		out[1] = CONF_VALUE;
	}
}
