// SPDX-License-Identifier: MIT
// A realistic heavy kernel: per-block radix sort of keys with their values,
// then a block-wide reduction, using CUB from the toolkit's CCCL headers.
// Its cold NVRTC compile takes about a second: what a cache hit saves.
// Compile with -I /usr/local/cuda/include/cccl (and -std=c++17).
//
// The block sum is a per-thread loop, then BlockReduce over one value per
// thread: BlockReduce's array overload, Sum(vals), goes through
// cub::ThreadReduce, whose dispatch (CCCL 3.0, cub/thread/thread_reduce.cuh)
// is wrong when neither cuda_fp16.h nor cuda_bf16.h can be included, as
// under NVRTC with only the CCCL directory on the include path:
// enable_sm80_simd_reduction<T, plus, N>() then drops its "T is __half or
// __nv_bfloat16" clause and says yes for float, so the float array goes to
// ThreadReduceSimd's fallback overload for types without SIMD support,
// marked "never reached": assert(false) (a device-side assert), and with
// -DNDEBUG it returns input[0], so every thread added only its first item
// and every block sum was wrong while the sort was right. (Adding
// -I /usr/local/cuda/include to the options also avoids it; the loop here
// does not depend on the include path.)
#include <cub/block/block_load.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_store.cuh>

template <int BLOCK_THREADS, int ITEMS_PER_THREAD>
__global__ void sort_and_sum(const unsigned *keys_in, const float *vals_in, unsigned *keys_out,
			     float *vals_out, float *block_sums)
{
	using Load = cub::BlockLoad<unsigned, BLOCK_THREADS, ITEMS_PER_THREAD, cub::BLOCK_LOAD_TRANSPOSE>;
	using LoadV = cub::BlockLoad<float, BLOCK_THREADS, ITEMS_PER_THREAD, cub::BLOCK_LOAD_TRANSPOSE>;
	using Sort = cub::BlockRadixSort<unsigned, BLOCK_THREADS, ITEMS_PER_THREAD, float>;
	using Reduce = cub::BlockReduce<float, BLOCK_THREADS>;
	using Store = cub::BlockStore<unsigned, BLOCK_THREADS, ITEMS_PER_THREAD, cub::BLOCK_STORE_TRANSPOSE>;
	using StoreV = cub::BlockStore<float, BLOCK_THREADS, ITEMS_PER_THREAD, cub::BLOCK_STORE_TRANSPOSE>;
	__shared__ union {
		typename Load::TempStorage load;
		typename LoadV::TempStorage loadv;
		typename Sort::TempStorage sort;
		typename Reduce::TempStorage reduce;
		typename Store::TempStorage store;
		typename StoreV::TempStorage storev;
	} tmp;

	const int tile = BLOCK_THREADS * ITEMS_PER_THREAD;
	const int offset = blockIdx.x * tile;
	unsigned keys[ITEMS_PER_THREAD];
	float vals[ITEMS_PER_THREAD];
	Load(tmp.load).Load(keys_in + offset, keys);
	__syncthreads();
	LoadV(tmp.loadv).Load(vals_in + offset, vals);
	__syncthreads();
	Sort(tmp.sort).Sort(keys, vals);
	__syncthreads();
	float partial = 0.0f;
#pragma unroll
	for (int i = 0; i < ITEMS_PER_THREAD; i++)
		partial += vals[i];
	float sum = Reduce(tmp.reduce).Sum(partial);
	__syncthreads();
	Store(tmp.store).Store(keys_out + offset, keys);
	__syncthreads();
	StoreV(tmp.storev).Store(vals_out + offset, vals);
	if (threadIdx.x == 0)
		block_sums[blockIdx.x] = sum;
}
