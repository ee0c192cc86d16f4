// SPDX-License-Identifier: MIT
// A symlinked include tree: the -I directory is a link to a directory, and
// sym/linked.h a link to a file outside every -I directory (a Bazel
// execroot, a conda environment, a Spack view, a Nix profile).
#include "conf_params.h"
#include <sym/linked.h>
#include <sym/local.h>

__global__ void sym_k(int *p)
{
	p[threadIdx.x] = LINKED_VALUE + LOCAL_VALUE + CONF_VALUE;
}

extern "C" __global__ void conf_check(int *out)
{
	if (threadIdx.x == 0) {
		out[0] = LINKED_VALUE + LOCAL_VALUE; // 7000 + 7
		out[1] = CONF_VALUE;
	}
}
