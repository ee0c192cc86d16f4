// SPDX-License-Identifier: MIT
// CUB block radix sort + reduce: examples/cub_sort.cu (the README's heavy
// kernel, name expression "sort_and_sum<128, 8>") and a one-block check.
#include "conf_params.h"
#include "cub_sort.cu"

extern "C" __global__ void conf_check(int *out)
{
	using Sort = cub::BlockRadixSort<unsigned, 128, 4>;
	using Reduce = cub::BlockReduce<int, 128>;
	__shared__ union {
		typename Sort::TempStorage sort;
		typename Reduce::TempStorage reduce;
	} tmp;
	unsigned keys[4];
	for (int i = 0; i < 4; i++)
		keys[i] = 511u - (threadIdx.x * 4 + i); // descending
	Sort(tmp.sort).Sort(keys); // blocked arrangement, ascending
	int ok = 1;
	for (int i = 0; i < 4; i++)
		ok &= keys[i] == threadIdx.x * 4 + i;
	__syncthreads();
	int all = Reduce(tmp.reduce).Sum(ok);
	if (threadIdx.x == 0) {
		out[0] = all; // 128 when every thread's keys are in place
		out[1] = CONF_VALUE;
	}
}
