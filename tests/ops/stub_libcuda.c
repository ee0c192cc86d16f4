/* SPDX-License-Identifier: MIT */
/*
 * A stand-in libcuda.so.1 for test_doctor on machines without an NVIDIA
 * driver: the driver API entry points `jitcachectl doctor` uses, answering
 * as a driver whose behaviour the test sets through the environment:
 *   JC_STUB_CUDA_VERSION  cuDriverGetVersion's answer (default 13000)
 *   JC_STUB_DEVICES       device count; 0 makes cuInit fail with
 *                         CUDA_ERROR_NO_DEVICE (default 1)
 *   JC_STUB_CC            compute capability as major*10+minor (default 90)
 *   JC_STUB_REJECT_PTX    set: cuModuleLoadData answers
 *                         CUDA_ERROR_UNSUPPORTED_PTX_VERSION
 * cuModuleLoadData accepts only PTX text with a .version directive and an
 * .entry, so the test sees that doctor hands it NVRTC's real output.
 * For jitcache_cuda.h (test_forced_load): a current context on every thread
 * (device 0), cuModuleLoadDataEx taking PTX text, a cubin (ELF) or a fatbin
 * (its magic) and saying which it was last through the extra export
 * jc_stub_last_image() ("ptx", "cubin", "fatbin"; "" before any), and
 * cuModuleGetFunction finding any non-empty name.
 * Signatures and constants from cuda.h (CUDA Driver API reference); with its
 * #defines, cuDeviceGetUuid and cuDevicePrimaryCtxRelease are exported as
 * their _v2 names, as the real library does.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STUB_API __attribute__((visibility("default")))

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : dflt;
}

STUB_API CUresult CUDAAPI cuInit(unsigned int flags)
{
	return flags			       ? CUDA_ERROR_INVALID_VALUE
	       : env_int("JC_STUB_DEVICES", 1) ? CUDA_SUCCESS
					       : CUDA_ERROR_NO_DEVICE;
}

STUB_API CUresult CUDAAPI cuDriverGetVersion(int *v)
{
	*v = env_int("JC_STUB_CUDA_VERSION", 13000);
	return CUDA_SUCCESS;
}

STUB_API CUresult CUDAAPI cuDeviceGetCount(int *n)
{
	*n = env_int("JC_STUB_DEVICES", 1);
	return CUDA_SUCCESS;
}

STUB_API CUresult CUDAAPI cuDeviceGet(CUdevice *dev, int ordinal)
{
	if (ordinal < 0 || ordinal >= env_int("JC_STUB_DEVICES", 1))
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

STUB_API CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
	snprintf(name, (size_t)len, "jitcache stub GPU %d", dev);
	return CUDA_SUCCESS;
}

STUB_API CUresult CUDAAPI cuDeviceGetAttribute(int *v, CUdevice_attribute attr, CUdevice dev)
{
	(void)dev;
	if (attr == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
		*v = env_int("JC_STUB_CC", 90) / 10;
	else if (attr == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
		*v = env_int("JC_STUB_CC", 90) % 10;
	else
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

STUB_API CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	for (int i = 0; i < 16; i++)
		uuid->bytes[i] = (char)(i + 16 * dev);
	return CUDA_SUCCESS;
}

STUB_API CUresult CUDAAPI cuGetErrorName(CUresult rc, const char **name)
{
	*name = rc == CUDA_ERROR_NO_DEVICE		   ? "CUDA_ERROR_NO_DEVICE"
		: rc == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ? "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"
		: rc == CUDA_ERROR_INVALID_IMAGE	   ? "CUDA_ERROR_INVALID_IMAGE"
							   : "CUDA_ERROR_UNKNOWN";
	return CUDA_SUCCESS;
}

STUB_API CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
	*ctx = (CUcontext)(uintptr_t)(dev + 1);
	return CUDA_SUCCESS;
}

STUB_API CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
	(void)dev;
	return CUDA_SUCCESS;
}

STUB_API CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
	(void)ctx;
	return CUDA_SUCCESS;
}

STUB_API CUresult CUDAAPI cuModuleLoadData(CUmodule *mod, const void *image)
{
	if (!strstr(image, "\n.version ") || !strstr(image, ".entry "))
		return CUDA_ERROR_INVALID_IMAGE;
	if (getenv("JC_STUB_REJECT_PTX"))
		return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
	*mod = (CUmodule)(uintptr_t)1;
	return CUDA_SUCCESS;
}

static const char *last_image = "";

/* Not a driver call: what the last cuModuleLoadDataEx was given. */
STUB_API const char *jc_stub_last_image(void)
{
	return last_image;
}

STUB_API CUresult CUDAAPI cuGetErrorString(CUresult rc, const char **s)
{
	*s = rc == CUDA_SUCCESS ? "no error" : "stand-in driver error";
	return CUDA_SUCCESS;
}

STUB_API CUresult CUDAAPI cuCtxGetCurrent(CUcontext *ctx)
{
	*ctx = (CUcontext)(uintptr_t)1;
	return CUDA_SUCCESS;
}

STUB_API CUresult CUDAAPI cuCtxGetDevice(CUdevice *dev)
{
	*dev = 0;
	return CUDA_SUCCESS;
}

STUB_API CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *mod, const void *image, unsigned n,
					     CUjit_option *opts, void **vals)
{
	(void)n, (void)opts, (void)vals;
	const unsigned char *p = image;
	if (memcmp(p, "\177ELF", 4) == 0)
		last_image = "cubin";
	else if (p[0] == 0x50 && p[1] == 0xed && p[2] == 0x55 && p[3] == 0xba)
		last_image = "fatbin";
	else if (strstr(image, ".version ") && strstr(image, ".entry "))
		last_image = "ptx";
	else
		return CUDA_ERROR_INVALID_IMAGE;
	*mod = (CUmodule)(uintptr_t)2;
	return CUDA_SUCCESS;
}

STUB_API CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule mod, const char *name)
{
	if (!mod || !name || !*name)
		return CUDA_ERROR_NOT_FOUND;
	*f = (CUfunction)(uintptr_t)3;
	return CUDA_SUCCESS;
}

/* libnvrtc itself dlopens libcuda.so.1 and asks it for cuGetExportTable:
 * this stub has no private tables to give. */
STUB_API CUresult CUDAAPI cuGetExportTable(const void **table, const CUuuid *id)
{
	(void)id;
	*table = NULL;
	return CUDA_ERROR_NOT_SUPPORTED;
}

STUB_API CUresult CUDAAPI cuModuleUnload(CUmodule mod)
{
	return mod ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
