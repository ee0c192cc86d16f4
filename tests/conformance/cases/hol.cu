// SPDX-License-Identifier: MIT
// A header-only library in a user -I tree of 1,024 headers (hol/all.h
// includes every one; each defines hol_N()).
#include "conf_params.h"
#include <hol/all.h>

__global__ void hol_k(int *p)
{
	p[threadIdx.x] = hol_7() + hol_1023() + CONF_VALUE;
}

extern "C" __global__ void conf_check(int *out)
{
	if (threadIdx.x == 0) {
		out[0] = hol_7() + hol_1023(); // 7 + 1023
		out[1] = CONF_VALUE;
	}
}
