/* SPDX-License-Identifier: MIT */
/*
 * `jitcachectl doctor`'s driver checks (doctor.c runs them): the CUDA
 * runtime, the driver and its devices (name, compute capability, UUID),
 * whether the user-space driver matches the kernel module, MIG and MPS,
 * and whether this driver can JIT the PTX this NVRTC emits.
 *
 * libcuda is dlopen()ed, never linked, so doctor runs (and says so) on
 * machines without a driver. The driver calls used, all from the CUDA Driver
 * API reference (docs.nvidia.com/cuda/cuda-driver-api): cuInit,
 * cuDriverGetVersion, cuDeviceGetCount, cuDeviceGet, cuDeviceGetName,
 * cuDeviceGetAttribute (CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/_MINOR),
 * cuDeviceGetUuid (exported as cuDeviceGetUuid_v2 since CUDA 11.4, as
 * cuda.h's #define says), cuGetErrorName, cuDevicePrimaryCtxRetain,
 * cuDevicePrimaryCtxRelease(_v2), cuCtxSetCurrent, cuModuleLoadData and
 * cuModuleUnload. cuda.h is included for its types and constants only.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client/doctor_check.h"
#include "core/toolchain.h"

/* --- the driver, through dlopen ----------------------------------------------- */

struct cu {
	void *lib;
	int version; /* cuDriverGetVersion: 1000 * major + 10 * minor; 0 = no driver */
	__typeof__(cuInit) *init;
	__typeof__(cuDriverGetVersion) *driver_version;
	__typeof__(cuDeviceGetCount) *device_count;
	__typeof__(cuDeviceGet) *device_get;
	__typeof__(cuDeviceGetName) *device_name;
	__typeof__(cuDeviceGetAttribute) *device_attribute;
	__typeof__(cuDeviceGetUuid) *device_uuid;
	__typeof__(cuGetErrorName) *error_name;
	__typeof__(cuDevicePrimaryCtxRetain) *ctx_retain;
	__typeof__(cuDevicePrimaryCtxRelease) *ctx_release;
	__typeof__(cuCtxSetCurrent) *ctx_set_current;
	__typeof__(cuModuleLoadData) *module_load_data;
	__typeof__(cuModuleUnload) *module_unload;
};

/* The first of the names that libcuda exports, or NULL. */
static void *sym(void *lib, const char *name, const char *fallback)
{
	void *p = dlsym(lib, name);
	return p || !fallback ? p : dlsym(lib, fallback);
}

static const char *cu_err(const struct cu *cu, CUresult rc)
{
	static char buf[48];
	const char *name = NULL;
	if (cu->error_name && cu->error_name(rc, &name) == CUDA_SUCCESS && name)
		return name;
	snprintf(buf, sizeof(buf), "CUresult %d", (int)rc);
	return buf;
}

static int cu_open(struct cu *cu, struct report *r)
{
	memset(cu, 0, sizeof(*cu));
	cu->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cu->lib) {
		say(r, WARN,
		    "no CUDA driver (%s): compiling and caching work; loading kernels "
		    "and the PTX JIT check need the NVIDIA driver",
		    dlerror());
		return -1;
	}
	cu->init = (__typeof__(cu->init))sym(cu->lib, "cuInit", NULL);
	cu->driver_version =
	    (__typeof__(cu->driver_version))sym(cu->lib, "cuDriverGetVersion", NULL);
	cu->device_count = (__typeof__(cu->device_count))sym(cu->lib, "cuDeviceGetCount", NULL);
	cu->device_get = (__typeof__(cu->device_get))sym(cu->lib, "cuDeviceGet", NULL);
	cu->device_name = (__typeof__(cu->device_name))sym(cu->lib, "cuDeviceGetName", NULL);
	cu->device_attribute =
	    (__typeof__(cu->device_attribute))sym(cu->lib, "cuDeviceGetAttribute", NULL);
	cu->device_uuid =
	    (__typeof__(cu->device_uuid))sym(cu->lib, "cuDeviceGetUuid_v2", "cuDeviceGetUuid");
	cu->error_name = (__typeof__(cu->error_name))sym(cu->lib, "cuGetErrorName", NULL);
	cu->ctx_retain = (__typeof__(cu->ctx_retain))sym(cu->lib, "cuDevicePrimaryCtxRetain", NULL);
	cu->ctx_release = (__typeof__(cu->ctx_release))sym(cu->lib, "cuDevicePrimaryCtxRelease_v2",
							   "cuDevicePrimaryCtxRelease");
	cu->ctx_set_current =
	    (__typeof__(cu->ctx_set_current))sym(cu->lib, "cuCtxSetCurrent", NULL);
	cu->module_load_data =
	    (__typeof__(cu->module_load_data))sym(cu->lib, "cuModuleLoadData", NULL);
	cu->module_unload = (__typeof__(cu->module_unload))sym(cu->lib, "cuModuleUnload", NULL);
	if (!cu->init || !cu->driver_version || !cu->device_count || !cu->device_get ||
	    !cu->device_name || !cu->device_attribute || !cu->device_uuid) {
		say(r, FAIL, "libcuda.so.1 loads but lacks driver API entry points (%s)",
		    dlerror());
		return -1;
	}
	int v = 0;
	CUresult rc = cu->driver_version(&v);
	if (rc != CUDA_SUCCESS || v <= 0) {
		say(r, FAIL, "cuDriverGetVersion failed: %s", cu_err(cu, rc));
		return -1;
	}
	cu->version = v;
	return 0;
}

/* --- PTX: what this NVRTC emits and whether this driver takes it ---------------- */

/*
 * PTX ISA version (10 * major + minor) -> the first CUDA release whose driver
 * JIT-compiles it (1000 * major + 10 * minor), from the PTX ISA "Release
 * History" table (docs.nvidia.com/cuda/parallel-thread-execution, "Release
 * Notes"). A driver older than that refuses the PTX with
 * CUDA_ERROR_UNSUPPORTED_PTX_VERSION.
 */
static const struct {
	int ptx, cuda;
} ptx_isa[] = {
    {70, 11000}, {71, 11010}, {72, 11020}, {73, 11030}, {74, 11040}, {75, 11050}, {76, 11060},
    {77, 11070}, {78, 11080}, {80, 12000}, {81, 12010}, {82, 12020}, {83, 12030}, {84, 12040},
    {85, 12050}, {86, 12070}, {87, 12080}, {88, 12090}, {90, 13000}, {91, 13010},
};

static int ptx_needs_cuda(int ptx)
{
	for (size_t i = 0; i < sizeof(ptx_isa) / sizeof(ptx_isa[0]); i++)
		if (ptx_isa[i].ptx == ptx)
			return ptx_isa[i].cuda;
	return 0;
}

/* The highest PTX ISA (10 * major + minor) a driver of CUDA version v
 * JIT-compiles (the table read backwards); 0 for one older than the table. */
static int driver_ptx_isa(int v)
{
	int top = 0;
	for (size_t i = 0; i < sizeof(ptx_isa) / sizeof(ptx_isa[0]); i++)
		if (ptx_isa[i].cuda <= v && ptx_isa[i].ptx > top)
			top = ptx_isa[i].ptx;
	return top;
}

/* Compiles a one-line kernel to PTX for arch (compute_XY); malloc'd PTX or NULL. */
static char *tiny_ptx(const char *arch, char *err, size_t errlen)
{
	static const char src[] = "extern \"C\" __global__ void jc_doctor(int *p) { *p = 1; }\n";
	char opt[64];
	const char *opts[] = {opt};
	void *prog;
	size_t size = 0;
	char *ptx = NULL;
	const struct jc_nvrtc_api *nv = jc__nvrtc_api(err, errlen);
	if (!nv)
		return NULL;
	snprintf(opt, sizeof(opt), "--gpu-architecture=%s", arch);
	int rc = nv->create_program(&prog, src, "jc_doctor.cu", 0, NULL, NULL);
	if (rc != NVRTC_SUCCESS) {
		snprintf(err, errlen, "nvrtcCreateProgram: %s", nv->error_string(rc));
		return NULL;
	}
	rc = nv->compile_program(prog, 1, opts);
	if (rc == NVRTC_SUCCESS)
		rc = nv->get_ptx_size(prog, &size);
	if (rc == NVRTC_SUCCESS && (ptx = malloc(size + 1)) != NULL) {
		rc = nv->get_ptx(prog, ptx);
		ptx[size] = '\0';
	}
	if (rc != NVRTC_SUCCESS || !ptx) {
		snprintf(err, errlen, "NVRTC could not compile a test kernel for %s: %s", arch,
			 rc != NVRTC_SUCCESS ? nv->error_string(rc) : "out of memory");
		free(ptx);
		ptx = NULL;
	}
	nv->destroy_program(&prog);
	return ptx;
}

/* The ".version X.Y" directive of ptx as 10 * X + Y, or -1. */
static int ptx_version(const char *ptx)
{
	const char *v = strstr(ptx, "\n.version ");
	int major, minor;
	if (!v || sscanf(v, "\n.version %d.%d", &major, &minor) != 2 || minor < 0 || minor > 9)
		return -1;
	return major * 10 + minor;
}

/* The compute_XY NVRTC should emit for a device of compute capability cc
 * (10 * major + minor), or for the oldest architecture it supports when cc
 * is 0 or newer than any it supports (PTX of the newest is then JIT-compiled
 * forward by the driver). */
static void pick_arch(const struct jc_toolchain *tc, int cc, char *out, size_t outlen)
{
	int best = -1, lowest = -1;
	for (const char *p = tc->supported_archs; (p = strstr(p, "sm_")); p += 3) {
		int n = atoi(p + 3);
		if (lowest < 0 || n < lowest)
			lowest = n;
		if (cc && n <= cc && n > best)
			best = n;
	}
	snprintf(out, outlen, "compute_%d", cc && best > 0 ? best : lowest > 0 ? lowest : 75);
}

static void check_ptx(struct report *r, const struct jc_toolchain *tc, struct cu *cu, int cc,
		      CUdevice dev, int have_device)
{
	char arch[32], err[256];
	pick_arch(tc, cc, arch, sizeof(arch));
	char *ptx = tiny_ptx(arch, err, sizeof(err));
	if (!ptx) {
		say(r, FAIL, "%s", err);
		return;
	}
	int isa = ptx_version(ptx), needs = isa > 0 ? ptx_needs_cuda(isa) : 0;
	int nvrtc_major = 0, nvrtc_minor = 0;
	sscanf(tc->nvrtc_version, "%d.%d", &nvrtc_major, &nvrtc_minor);
	if (isa < 0) {
		say(r, WARN, "PTX from NVRTC has no .version directive");
	} else if (!cu->version) {
		if (!needs)
			needs = nvrtc_major * 1000 + nvrtc_minor * 10;
		say(r, WARN,
		    "NVRTC %s emits PTX ISA %d.%d (for %s); without a driver it cannot be "
		    "checked that it JIT-compiles (needs a driver of CUDA >= %d.%d)",
		    tc->nvrtc_version, isa / 10, isa % 10, arch, needs / 1000, needs % 1000 / 10);
	} else if (needs && cu->version < needs) {
		say(r, FAIL,
		    "driver CUDA %d.%d cannot JIT-compile PTX ISA %d.%d from NVRTC %s (needs "
		    "CUDA >= %d.%d): request cubins (sm_XY) or update the driver",
		    cu->version / 1000, cu->version % 1000 / 10, isa / 10, isa % 10,
		    tc->nvrtc_version, needs / 1000, needs % 1000 / 10);
	} else if (!needs && cu->version < nvrtc_major * 1000 + nvrtc_minor * 10) {
		say(r, WARN,
		    "PTX ISA %d.%d is newer than this doctor knows; the driver (CUDA %d.%d) "
		    "is older than NVRTC %s and may refuse it",
		    isa / 10, isa % 10, cu->version / 1000, cu->version % 1000 / 10,
		    tc->nvrtc_version);
	} else {
		say(r, OK, "driver CUDA %d.%d accepts PTX ISA %d.%d, which NVRTC %s emits",
		    cu->version / 1000, cu->version % 1000 / 10, isa / 10, isa % 10,
		    tc->nvrtc_version);
	}
	if (cu->version && isa > 0) {
		int top = driver_ptx_isa(cu->version);
		say(r, INFO,
		    "driver CUDA %d.%d JIT-compiles PTX ISA up to %s%d.%d; NVRTC %s emits %d.%d",
		    cu->version / 1000, cu->version % 1000 / 10,
		    cu->version > ptx_isa[sizeof(ptx_isa) / sizeof(ptx_isa[0]) - 1].cuda
			? "at least "
			: "",
		    top / 10, top % 10, tc->nvrtc_version, isa / 10, isa % 10);
	}
	/* With a GPU: load it for real. */
	CUcontext ctx = NULL;
	if (have_device && cu->ctx_retain && cu->ctx_release && cu->ctx_set_current &&
	    cu->module_load_data && cu->module_unload) {
		CUmodule mod = NULL;
		CUresult rc = cu->ctx_retain(&ctx, dev);
		if (rc == CUDA_SUCCESS)
			rc = cu->ctx_set_current(ctx);
		if (rc == CUDA_SUCCESS)
			rc = cu->module_load_data(&mod, ptx);
		if (rc == CUDA_SUCCESS) {
			say(r, OK, "cuModuleLoadData JIT-compiled PTX ISA %d.%d (%s) on device 0",
			    isa / 10, isa % 10, arch);
			cu->module_unload(mod);
		} else {
			say(r, FAIL, "cuModuleLoadData of PTX ISA %d.%d (%s) on device 0: %s",
			    isa / 10, isa % 10, arch, cu_err(cu, rc));
		}
		if (ctx) {
			cu->ctx_set_current(NULL);
			cu->ctx_release(dev);
		}
	}
	free(ptx);
}

/* --- the driver's files: user space against the kernel module ------------------ */

/* The first "N.N[.N]" token of s into out. Returns 1 when there is one. */
static int version_token(const char *s, char *out, size_t len)
{
	for (const char *p = s; *p; p++) {
		size_t n = strspn(p, "0123456789.");
		if (n >= 3 && (p == s || p[-1] == ' ' || p[-1] == '\t') && strchr(p, '.') &&
		    memchr(p, '.', n) && p[0] != '.' &&
		    (p[n] == '\0' || p[n] == ' ' || p[n] == '\t' || p[n] == '\n')) {
			snprintf(out, len, "%.*s", (int)n, p);
			return 1;
		}
		if (n)
			p += n - 1;
	}
	return 0;
}

/*
 * The classic container mistake: a libcuda (user space) of another release
 * than the kernel module, because the image ships its own driver library
 * instead of mounting the host's. Compares the version in the name of the
 * libcuda file loaded (libcuda.so.580.159.04, found with dladdr and
 * realpath) with the kernel module's in /proc/driver/nvidia/version (or
 * $JITCACHE_TEST_PROC_NVIDIA_VERSION, a file standing for it in tests).
 */
static void check_driver_files(struct report *r, const struct cu *cu)
{
	Dl_info di;
	char real[4096], lib_ver[64] = "", mod_ver[64] = "", line[512] = "";
	if (!dladdr((void *)cu->init, &di) || !di.dli_fname) {
		say(r, WARN, "cannot tell which file libcuda.so.1 was loaded from (dladdr)");
		return;
	}
	if (!realpath(di.dli_fname, real))
		snprintf(real, sizeof(real), "%s", di.dli_fname);
	const char *base = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
	int named = strncmp(base, "libcuda.so.", 11) == 0 &&
		    version_token(base + 11, lib_ver, sizeof(lib_ver));
	say(r, INFO, "libcuda loaded from %s%s%s", di.dli_fname,
	    strcmp(real, di.dli_fname) ? " -> " : "", strcmp(real, di.dli_fname) ? real : "");
	const char *test = getenv("JITCACHE_TEST_PROC_NVIDIA_VERSION");
	const char *proc = test ? test : "/proc/driver/nvidia/version";
	FILE *f = fopen(proc, "re");
	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = '\0';
		fclose(f);
	}
	const char *km = strstr(line, "Kernel Module");
	if (!f || !version_token(km ? km : line, mod_ver, sizeof(mod_ver))) {
		say(r, WARN,
		    "no NVIDIA kernel module version (%s: %s): cannot check that libcuda "
		    "matches the kernel driver",
		    proc, f ? "no version in it" : strerror(errno));
		return;
	}
	if (!named)
		say(r, INFO, "kernel module %s; the version of %s is not in its name: not compared",
		    mod_ver, real);
	else if (strcmp(lib_ver, mod_ver) == 0)
		say(r, OK, "user-space driver (libcuda %s) matches the kernel module %s", lib_ver,
		    mod_ver);
	else
		say(r, FAIL,
		    "user-space driver libcuda %s (%s) does not match the kernel module %s (%s): "
		    "the container or image ships its own libcuda; use the host's (the NVIDIA "
		    "Container Toolkit mounts it) or install the matching driver",
		    lib_ver, real, mod_ver, proc);
}

/*
 * MIG mode of each device through NVML (libnvidia-ml.so.1, dlopen'ed;
 * nvmlDeviceGetMigMode: NVML API reference), and MPS: whether an MPS control
 * daemon's pipe is in $CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps),
 * so that CUDA processes here run as its clients.
 */
static void check_mig_mps(struct report *r)
{
	void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!nvml) {
		say(r, INFO, "MIG mode unknown: no NVML (libnvidia-ml.so.1)");
	} else {
		int (*init)(void) = (int (*)(void))dlsym(nvml, "nvmlInit_v2");
		int (*shutdown)(void) = (int (*)(void))dlsym(nvml, "nvmlShutdown");
		int (*count)(unsigned *) =
		    (int (*)(unsigned *))dlsym(nvml, "nvmlDeviceGetCount_v2");
		int (*handle)(unsigned, void **) =
		    (int (*)(unsigned, void **))dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2");
		int (*mig)(void *, unsigned *, unsigned *) =
		    (int (*)(void *, unsigned *, unsigned *))dlsym(nvml, "nvmlDeviceGetMigMode");
		unsigned n = 0;
		if (!init || !shutdown || !count || !handle || !mig || init() != 0) {
			say(r, INFO, "MIG mode unknown: NVML does not initialise");
		} else {
			if (count(&n) != 0)
				n = 0;
			for (unsigned i = 0; i < n; i++) {
				void *h;
				unsigned cur = 0, pend = 0;
				/* NVML_ERROR_NOT_SUPPORTED is 3: a GPU without MIG. */
				int rc = handle(i, &h) ?: mig(h, &cur, &pend);
				if (rc == 3)
					say(r, INFO, "GPU %u: MIG not supported", i);
				else if (rc)
					say(r, WARN, "GPU %u: nvmlDeviceGetMigMode failed (%d)", i,
					    rc);
				else
					say(r, cur ? WARN : INFO, "GPU %u: MIG mode %s%s%s", i,
					    cur ? "enabled (CUDA sees MIG instances, not the whole "
						  "GPU)"
						: "disabled",
					    pend != cur ? ", pending " : "",
					    pend != cur ? (pend ? "enabled" : "disabled") : "");
			}
			shutdown();
		}
		dlclose(nvml);
	}
	const char *dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
	char pipe[4200];
	struct stat st;
	snprintf(pipe, sizeof(pipe), "%s/control", dir && *dir ? dir : "/tmp/nvidia-mps");
	if (stat(pipe, &st) == 0 && S_ISFIFO(st.st_mode))
		say(r, INFO,
		    "MPS: a control daemon's pipe is at %s: CUDA processes here run as MPS "
		    "clients%s%s",
		    pipe,
		    getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") ? ", active thread percentage "
								: "",
		    getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") ?: "");
	else
		say(r, INFO, "MPS: no control daemon (%s absent)", pipe);
}

/* --- devices ------------------------------------------------------------------ */

/* Reports every device; returns 1 and the first device's CC (10 * major +
 * minor) when there is one, 0 when there is none. */
static int check_devices(struct report *r, const struct jc_toolchain *tc, struct cu *cu, int *cc0,
			 CUdevice *dev0)
{
	CUresult rc = cu->init(0);
	if (rc != CUDA_SUCCESS) {
		say(r, WARN, "cuInit failed: %s (no usable GPU: kernels cannot be loaded here)",
		    cu_err(cu, rc));
		return 0;
	}
	int n = 0;
	rc = cu->device_count(&n);
	if (rc != CUDA_SUCCESS || n == 0) {
		say(r, WARN, "no CUDA device visible (%s)",
		    rc ? cu_err(cu, rc) : "cuDeviceGetCount: 0");
		return 0;
	}
	for (int i = 0; i < n; i++) {
		CUdevice dev;
		char name[256] = "?", arch[16];
		int major = 0, minor = 0;
		CUuuid uuid;
		const unsigned char *u = (const unsigned char *)uuid.bytes;
		rc = cu->device_get(&dev, i);
		rc = rc ?: cu->device_name(name, sizeof(name), dev);
		rc = rc
			 ?: cu->device_attribute(&major,
						 CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
		rc = rc
			 ?: cu->device_attribute(&minor,
						 CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
		rc = rc ?: cu->device_uuid(&uuid, dev);
		if (rc != CUDA_SUCCESS) {
			say(r, FAIL, "device %d: query failed: %s", i, cu_err(cu, rc));
			continue;
		}
		/* nvidia-smi's spelling of the UUID. */
		say(r, OK,
		    "device %d: %s, compute capability %d.%d, "
		    "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-"
		    "%02x%02x-%02x%02x%02x%02x%02x%02x",
		    i, name, major, minor, u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8],
		    u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
		snprintf(arch, sizeof(arch), "sm_%d%d", major, minor);
		if (jc__toolchain_supports_arch(tc, arch))
			say(r, OK, "device %d: NVRTC %s can target %s", i, tc->nvrtc_version, arch);
		else
			say(r, WARN,
			    "device %d: NVRTC %s cannot target %s: only PTX of an older "
			    "architecture, JIT-compiled by the driver, will run there",
			    i, tc->nvrtc_version, arch);
		if (i == 0) {
			*cc0 = major * 10 + minor;
			*dev0 = dev;
		}
	}
	return 1;
}

/* The CUDA runtime is not used by jitcache; its version is reported for the
 * applications that use both (cudaRuntimeGetVersion, CUDA Runtime API). */
static void check_runtime(struct report *r)
{
	char name[32];
	snprintf(name, sizeof(name), "libcudart.so.%d", CUDA_VERSION / 1000);
	void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	int (*get)(int *) = lib ? (int (*)(int *))dlsym(lib, "cudaRuntimeGetVersion") : NULL;
	int v = 0;
	if (get && get(&v) == 0 && v > 0)
		say(r, INFO,
		    "CUDA runtime %d.%d (%s); jitcache itself uses NVRTC, nvJitLink and the "
		    "driver API only",
		    v / 1000, v % 1000 / 10, name);
	else
		say(r, INFO,
		    "CUDA runtime: %s not found (jitcache does not need it); built against "
		    "CUDA %d.%d headers",
		    name, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
	if (lib)
		dlclose(lib);
}

void jc__doctor_driver(struct report *r, const struct jc_toolchain *tc)
{
	struct cu cu;
	check_runtime(r);
	int cc = 0, have_device = 0;
	CUdevice dev = 0;
	if (cu_open(&cu, r) == 0) {
		say(r, OK, "driver CUDA %d.%d (%s)", cu.version / 1000, cu.version % 1000 / 10,
		    tc ? tc->driver_build : "?");
		check_driver_files(r, &cu);
		if (tc)
			have_device = check_devices(r, tc, &cu, &cc, &dev);
		check_mig_mps(r);
	}
	if (tc)
		check_ptx(r, tc, &cu, cc, dev, have_device);
	if (cu.lib)
		dlclose(cu.lib);
}
