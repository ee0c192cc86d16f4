// SPDX-License-Identifier: MIT
// Templated SAXPY (docs/ARCHITECTURE.md, "Examples", exercise 1): instantiate saxpy<float> and
// saxpy<double> through name expressions and load them by lowered name.
template <typename T>
__global__ void saxpy(T a, const T *__restrict__ x, T *__restrict__ y, unsigned long long n)
{
	unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = a * x[i] + y[i];
}
