/* SPDX-License-Identifier: MIT */
/*
 * A stand-in libnvidia-ml.so.1 for test_doctor: the NVML calls doctor makes
 * for the MIG mode (nvmlInit_v2, nvmlDeviceGetCount_v2,
 * nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetMigMode, nvmlShutdown; NVML
 * API reference), answering as the environment says:
 *   JC_STUB_DEVICES      device count (default 1)
 *   JC_STUB_MIG          "1" enabled, "0" disabled, unset: not supported
 *                        (NVML_ERROR_NOT_SUPPORTED, 3)
 *   JC_STUB_MIG_PENDING  the pending mode (default: the current one)
 * nvmlReturn_t is an enum, 0 = NVML_SUCCESS.
 */
#include <stdint.h>
#include <stdlib.h>

#define STUB_API __attribute__((visibility("default")))

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : dflt;
}

STUB_API int nvmlInit_v2(void)
{
	return 0;
}

STUB_API int nvmlShutdown(void)
{
	return 0;
}

STUB_API int nvmlDeviceGetCount_v2(unsigned *n)
{
	*n = (unsigned)env_int("JC_STUB_DEVICES", 1);
	return 0;
}

STUB_API int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h)
{
	if (i >= (unsigned)env_int("JC_STUB_DEVICES", 1))
		return 2; /* NVML_ERROR_INVALID_ARGUMENT */
	*h = (void *)(uintptr_t)(i + 1);
	return 0;
}

STUB_API int nvmlDeviceGetMigMode(void *h, unsigned *current, unsigned *pending)
{
	(void)h;
	if (!getenv("JC_STUB_MIG"))
		return 3;
	*current = (unsigned)env_int("JC_STUB_MIG", 0);
	*pending = (unsigned)env_int("JC_STUB_MIG_PENDING", (int)*current);
	return 0;
}
