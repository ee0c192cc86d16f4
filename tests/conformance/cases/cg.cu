// SPDX-License-Identifier: MIT
// Cooperative groups: a tiled partition and cg::reduce.
#include "conf_params.h"
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

__global__ void warp_sums(const int *in, int *out)
{
	cg::thread_block block = cg::this_thread_block();
	cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
	int v = cg::reduce(warp, in[block.thread_rank()] * CONF_VALUE, cg::plus<int>());
	if (warp.thread_rank() == 0)
		out[block.thread_rank() / 32] = v;
}

extern "C" __global__ void conf_check(int *out)
{
	cg::thread_block_tile<32> warp = cg::tiled_partition<32>(cg::this_thread_block());
	int v = cg::reduce(warp, (int)warp.thread_rank(), cg::plus<int>());
	if (threadIdx.x == 0) {
		out[0] = v; // 0 + ... + 31 = 496
		out[1] = CONF_VALUE;
	}
}
