// SPDX-License-Identifier: MIT
// The user's specialisation: an operator the application supplies as PTX
// (here compiled to PTX through the daemon with -rdc=true, so that the
// function stays visible to the linker).
extern "C" __device__ float user_op(float x, float y)
{
	return fmaf(x, y, 0.5f * y);
}
