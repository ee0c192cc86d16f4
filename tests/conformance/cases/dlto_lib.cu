// SPDX-License-Identifier: MIT
// The device library of the -dlto case: LTO-IR linked by nvJitLink (-lto).
extern "C" __device__ float conf_softsign(float x)
{
	return x / (1.0f + fabsf(x));
}
