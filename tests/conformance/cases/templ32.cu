// SPDX-License-Identifier: MIT
// One template, 32 instantiations by name expression (tk<0> ... tk<31>).
#include "conf_params.h"

template <int N>
__device__ int sq()
{
	return N * N;
}

template <int N>
__global__ void tk(int *p)
{
	p[N] = sq<N>() + CONF_VALUE;
}

extern "C" __global__ void conf_check(int *out)
{
	if (threadIdx.x == 0) {
		out[0] = sq<31>(); // 961
		out[1] = CONF_VALUE;
	}
}
