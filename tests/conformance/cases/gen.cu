// SPDX-License-Identifier: MIT
// A header generated per run (gen_run.h: GEN_RUN, written just before the
// compile, as code generators do).
#include "conf_params.h"
#include "gen_run.h"

__global__ void gen_k(int *p)
{
	p[threadIdx.x] = GEN_RUN + CONF_VALUE;
}

extern "C" __global__ void conf_check(int *out)
{
	if (threadIdx.x == 0) {
		out[0] = GEN_RUN;
		out[1] = CONF_VALUE;
	}
}
