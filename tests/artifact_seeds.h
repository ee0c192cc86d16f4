/* SPDX-License-Identifier: MIT */
/*
 * Real inputs for the artifact parser's tests (tests/unit/test_artifact.c)
 * and fuzz target (tests/fuzz/fuzz_artifact.c): NVRTC's cubin, PTX and
 * LTO-IR of a small source with two kernels (static shared memory, a stack
 * frame, launch bounds), and fatbin containers built here in the layout
 * common/artifact.h describes. Not thread-safe (NVRTC is, this is not
 * needed to be).
 */
#ifndef JC_ARTIFACT_SEEDS_H
#define JC_ARTIFACT_SEEDS_H

#include <stddef.h>
#include <stdint.h>

struct jct_blob {
	uint8_t *data; /* malloc'd */
	size_t size;
};

/* The source's kernel names, registers/shared/stack known from ptxas -v. */
#define JCT_SEED_SOURCE                                                                            \
	"extern \"C\" __global__ void shared_k(float *x) { __shared__ float s[128];\n"             \
	"  s[threadIdx.x] = x[threadIdx.x]; __syncthreads(); x[threadIdx.x] = s[127 - "            \
	"threadIdx.x]; }\n"                                                                        \
	"extern \"C\" __global__ void __launch_bounds__(64) stack_k(double *y) { double v[40];\n"  \
	"  for (int j = 0; j < 40; j++) v[j] = y[j * threadIdx.x]; y[threadIdx.x] = "              \
	"v[(int)y[0]]; }\n"

/* NVRTC output of JCT_SEED_SOURCE for arch ("sm_90" cubin, "compute_90"
 * PTX with its NUL, ltoir != 0: -dlto LTO-IR). Returns 0 or -1 (message on
 * stderr). */
int jct_seed_nvrtc(const char *arch, int ltoir, struct jct_blob *out);

/* One image for jct_seed_fatbin: kind 1 PTX, 2 ELF, 8 LTO-IR. */
struct jct_fb_image {
	unsigned kind, arch;
	const struct jct_blob *bytes;
	int zstd; /* store it zstd-compressed (flag 0x8000) */
};

/* A fatbin of the images, in order (tests/fatbin_write.c, which needs only
 * libzstd). Returns 0 or -1. */
int jct_seed_fatbin(const struct jct_fb_image *images, size_t n, struct jct_blob *out);

#endif
