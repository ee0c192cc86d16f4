// SPDX-License-Identifier: MIT
// libcu++: <cuda/std/type_traits> and <cuda/std/complex>.
#include "conf_params.h"
#include <cuda/std/complex>
#include <cuda/std/type_traits>

template <typename T>
__global__ void cmul(const cuda::std::complex<T> *a, const cuda::std::complex<T> *b, cuda::std::complex<T> *c)
{
	static_assert(cuda::std::is_floating_point_v<T>, "floating point only");
	c[threadIdx.x] = a[threadIdx.x] * b[threadIdx.x] * T(CONF_VALUE);
}

extern "C" __global__ void conf_check(int *out)
{
	cuda::std::complex<float> p = cuda::std::complex<float>(1, 2) * cuda::std::complex<float>(3, 4);
	if (threadIdx.x == 0) {
		out[0] = (int)p.real() * 100 + (int)p.imag(); // (-5, 10): -490
		out[1] = CONF_VALUE;
	}
}
