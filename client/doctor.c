/* SPDX-License-Identifier: MIT */
/*
 * `jitcachectl doctor`: the run-time checklist (docs/ARCHITECTURE.md,
 * "Doctor"), one line per check: the toolchain (NVRTC, nvJitLink, supported
 * architectures), the driver and its devices (name, compute capability,
 * UUID), the CUDA runtime, whether this driver can JIT the PTX this NVRTC
 * emits, the cache directory and the daemon's socket.
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
#include "client/doctor.h"

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <nvrtc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "client/client_internal.h"
#include "common/util.h"
#include "core/tier.h"
#include "core/toolchain.h"
#include "jitcache/jitcache.h"

struct report {
	int fails, warns;
};

enum verdict { OK, INFO, WARN, FAIL };

static void say(struct report *r, enum verdict v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void say(struct report *r, enum verdict v, const char *fmt, ...)
{
	static const char *const words[] = {"ok", "info", "warn", "FAIL"};
	va_list ap;
	printf("%-5s ", words[v]);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	r->warns += v == WARN;
	r->fails += v == FAIL;
}

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

/* --- cache directory and daemon -------------------------------------------------- */

/*
 * Whether the entries were made by the toolchain the daemon runs (identity:
 * its summary, toolchain.h): after an NVRTC, nvJitLink or driver change
 * most are another's, every request misses until `jitcachectl warm` (or
 * the daemon's own re-warm at start) has made them again.
 */
static void check_identity(struct report *r, struct jc_cachedir *cd, const char *identity)
{
	struct jc_tier_health h;
	uint64_t mine = 0;
	if (cd->ops->health(cd, &h) != 0 || cd->ops->count_versions(cd, identity, &mine) != 0) {
		say(r, WARN, "cannot count the entries by toolchain: %s", jc__cachedir_errmsg(cd));
		return;
	}
	const uint64_t entries = h.entries, kept = h.requests;
	if (entries && mine * 2 < entries)
		say(r, WARN,
		    "%" PRIu64 " of %" PRIu64 " entries were made by another toolchain than the "
		    "daemon's (%s): they miss until made again; run `jitcachectl warm` (%" PRIu64
		    " requests kept%s)",
		    entries - mine, entries, identity, kept,
		    kept ? "" : ": none to re-warm, they fill again as clients ask");
	else if (entries)
		say(r, OK,
		    "%" PRIu64 " of %" PRIu64 " entries are the daemon's toolchain's; %" PRIu64
		    " requests kept for re-warm and export",
		    mine, entries, kept);
}

static void check_cache_dir(struct report *r, const char *dir, uint64_t budget, uint64_t used,
			    const char *identity)
{
	struct stat st;
	char err[512], path[4200];
	if (stat(dir, &st) != 0) {
		say(r, errno == ENOENT ? WARN : FAIL, "cache directory %s: %s%s", dir,
		    strerror(errno),
		    errno == ENOENT ? " (jitcached creates it at its first start)" : "");
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		say(r, FAIL, "cache directory %s is not a directory", dir);
		return;
	}
	int ours = st.st_uid == geteuid();
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		say(r, WARN,
		    "cache directory %s is writable by group or others (mode %04o): its "
		    "jitcached sets it to 0700 at start, and refuses what others put in it",
		    dir, (unsigned)(st.st_mode & 07777));
	else if (ours)
		say(r, OK, "cache directory %s: ours, mode %04o%s", dir,
		    (unsigned)(st.st_mode & 07777), access(dir, W_OK) == 0 ? ", writable" : "");
	else
		say(r, INFO, "cache directory %s belongs to uid %u (a system daemon's?): mode %04o",
		    dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	int rc = jc__cachedir_check_local(dir, err, sizeof(err));
	if (rc == 0)
		say(r, OK, "cache directory is on a local filesystem (SQLite WAL works)");
	else if (rc != JC_EIO || ours)
		say(r, FAIL, "%s", err);
	struct statvfs vfs;
	if (statvfs(dir, &vfs) == 0) {
		uint64_t free_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
		uint64_t room = budget > used ? budget - used : 0;
		if (budget && free_bytes < room)
			say(r, WARN,
			    "%" PRIu64 " MiB free, less than the %" PRIu64 " MiB the budget still "
			    "allows: the disk fills before eviction starts; lower --max-size",
			    free_bytes >> 20, room >> 20);
		else if (free_bytes < (1ull << 30))
			say(r, WARN, "only %" PRIu64 " MiB free on the cache filesystem",
			    free_bytes >> 20);
		else
			say(r, OK, "%" PRIu64 " MiB free on the cache filesystem",
			    free_bytes >> 20);
	}
	snprintf(path, sizeof(path), "%s/index.sqlite", dir);
	struct jc_cachedir *cd = NULL;
	rc = ours ? jc__cachedir_open(dir, JC_CACHEDIR_INSPECT, 0, &cd, err, sizeof(err)) : 0;
	if (rc == 0 && cd)
		say(r, OK, "index %s opens (schema current)", path);
	if (rc == 0 && cd && *identity)
		check_identity(r, cd, identity);
	else if (rc == JC_ENOTFOUND)
		say(r, INFO, "no index yet (%s): created at the first start", path);
	else if (rc != 0)
		say(r, rc == JC_EVERSION ? WARN : FAIL, "index %s: %s", path, err);
	jc__cachedir_close(cd);
}

/* The daemon's remote tier, from its stats: the daemon probes it (PING for
 * reach and round trip, a SET for write permission unless read-only). */
static void check_remote(struct report *r, const struct jc_record *s)
{
	const struct jc_kv *state = jc__record_get(s, "remote_state");
	const struct jc_kv *url = jc__record_get(s, "remote_url");
	const struct jc_kv *rtt = jc__record_get(s, "remote_probe_rtt_us");
	const struct jc_kv *wr = jc__record_get(s, "remote_write_ok");
	const struct jc_kv *ro = jc__record_get(s, "remote_read_only");
	const struct jc_kv *last = jc__record_get(s, "remote_last_error");
	if (!state || state->is_int || strcmp(state->s, "off") == 0) {
		say(r, INFO, "no remote tier (--remote URL shares compiles between machines)");
		return;
	}
	const char *u = url && !url->is_int ? url->s : "?";
	const char *err = last && !last->is_int && last->s[0] ? last->s : "no error recorded";
	if (strcmp(state->s, "down") == 0)
		say(r, FAIL, "remote tier %s is down: %s (requests compile locally meanwhile)", u,
		    err);
	else if (strcmp(state->s, "degraded") == 0)
		say(r, WARN, "remote tier %s is degraded: %s", u, err);
	else if (rtt && rtt->is_int && rtt->i >= 0)
		say(r, OK, "remote tier %s answers: round trip %" PRId64 " us", u, rtt->i);
	else
		say(r, INFO, "remote tier %s: not probed yet", u);
	if (ro && ro->is_int && ro->i)
		say(r, INFO, "remote tier is read-only here: nothing is written");
	else if (wr && wr->is_int && wr->i == 0)
		say(r, FAIL, "remote tier refuses writes: %s", err);
	else if (wr && wr->is_int && wr->i == 1)
		say(r, OK, "remote tier accepts writes");
	const struct jc_kv *uns = jc__record_get(s, "remote_unsigned");
	if (uns && uns->is_int && uns->i)
		say(r, WARN,
		    "remote tier values are unsigned (--remote-unsigned): anyone who can write "
		    "to %s can forge one; give every daemon of the fleet --remote-secret-file",
		    u);
	else if (uns && uns->is_int)
		say(r, OK, "remote tier values are signed (--remote-secret-file)");
}

/* Asks the daemon this user's programs reach (the client's search, steps
 * 1-4: --socket, --cache-dir, $JITCACHE_SOCKET, the per-user and the system
 * socket; no auto-start) for its version and compares its NVRTC with ours
 * (tc, NULL when unknown); fills *budget and *used from its stats, dir
 * (len bytes) with the cache directory it serves ("" when none answers),
 * and identity (idlen bytes) with its toolchain identity (left as it is
 * when it does not say). */
static void check_daemon(struct report *r, const char *socket_path, const char *cache_dir,
			 const struct jc_toolchain *tc, uint64_t *budget, uint64_t *used, char *dir,
			 size_t len, char *identity, size_t idlen)
{
	jc_client *c = NULL;
	jc_options *o = NULL;
	dir[0] = '\0';
	int rc = jc_options_new(&o);
	rc = rc ?: jc_options_set_socket(o, socket_path);
	rc = rc ?: jc_options_set_cache_dir(o, cache_dir);
	rc = rc ?: jc__client_new(o, &c);
	if (rc == 0 && jc__client_search(c) != 0) {
		say(r, WARN,
		    "no daemon answers%s%s: %s (start jitcached, or the jitcached.socket unit)",
		    socket_path ? " on " : "", socket_path ? socket_path : "", jc_client_errmsg(c));
		jc_client_close(c);
		jc_options_free(o);
		return;
	}
	if (rc != 0) {
		say(r, WARN, "client settings: %s", jc_client_errmsg(NULL));
		jc_options_free(o);
		return;
	}
	socket_path = jc__client_socket(c);
	if (jc__client_daemon_dir(c))
		snprintf(dir, len, "%s", jc__client_daemon_dir(c));
	struct jc_admin_req version = {.command = (char *)"version"},
			    stats = {.command = (char *)"stats"};
	struct jc_admin_reply v = {0}, s = {0};
	if (jc__client_admin(c, &version, &v) == 0 && v.status == 0 && v.n_rec) {
		const struct jc_kv *pid = jc__record_get(&v.rec[0], "daemon_pid");
		const struct jc_kv *id = jc__record_get(&v.rec[0], "nvrtc_id");
		const struct jc_kv *ver = jc__record_get(&v.rec[0], "jitcache");
		say(r, OK, "daemon answers on %s: pid %" PRId64 ", jitcache %s", socket_path,
		    pid && pid->is_int ? pid->i : -1, ver && !ver->is_int ? ver->s : "?");
		if (tc && id && !id->is_int && strcmp(id->s, tc->nvrtc_id) != 0)
			say(r, WARN, "the daemon's NVRTC (%s) is not this jitcachectl's (%s)",
			    id->s, tc->nvrtc_id);
		const struct jc_kv *builds = jc__record_get(&v.rec[0], "nvrtc_builds");
		if (builds && !builds->is_int)
			say(r, OK, "NVRTC builds applications asked the daemon for: %s", builds->s);
	} else {
		say(r, FAIL, "daemon on %s does not answer admin commands: %s", socket_path,
		    jc_client_errmsg(c));
	}
	if (jc__client_admin(c, &stats, &s) == 0 && s.status == 0 && s.n_rec) {
		const struct jc_kv *b = jc__record_get(&s.rec[0], "max_size");
		const struct jc_kv *u = jc__record_get(&s.rec[0], "bytes");
		*budget = b && b->is_int ? (uint64_t)b->i : 0;
		*used = u && u->is_int ? (uint64_t)u->i : 0;
		/* Which kernel confinement the compile workers apply (confine.h). */
		const struct jc_kv *cf = jc__record_get(&s.rec[0], "confinement");
		if (cf && !cf->is_int && strcmp(cf->s, "none") == 0)
			say(r, WARN,
			    "compile workers are not confined by the kernel (confinement none): "
			    "NVRTC's file access is limited by the worker's own checks only");
		else if (cf && !cf->is_int)
			say(r, OK,
			    "compile workers confined: %s (NVRTC reads only the toolkit tree and "
			    "each request's include directories)",
			    cf->s);
		const struct jc_kv *full = jc__record_get(&s.rec[0], "disk_full");
		const struct jc_kv *fb = jc__record_get(&s.rec[0], "disk_free_bytes");
		if (full && full->is_int && full->i)
			say(r, FAIL,
			    "disk full: %" PRId64
			    " KiB free on the cache's file system; the daemon "
			    "serves hits but stores nothing until space returns (free space, or "
			    "`jitcachectl purge`)",
			    fb && fb->is_int ? fb->i >> 10 : -1);
		check_remote(r, &s.rec[0]);
		const struct jc_kv *id = jc__record_get(&s.rec[0], "identity");
		if (id && !id->is_int)
			snprintf(identity, idlen, "%s", id->s);
	}
	jc__admin_reply_clear(&v);
	jc__admin_reply_clear(&s);
	jc_client_close(c);
	jc_options_free(o);
}

/* 1 when this process's groups include gid. */
static int in_group(gid_t gid)
{
	gid_t groups[1024];
	int n = getgroups(1024, groups);
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return 1;
	return getegid() == gid;
}

/*
 * Which daemon this user's programs reach (the client library's search:
 * jitcache.h) and, for the system daemon's socket, whether they may use it:
 * a socket is usable with write permission, which the system unit gives to
 * its group (docs/team-daemon.md).
 */
static void check_reach(struct report *r)
{
	jc_client *c = NULL;
	if (jc__client_new(NULL, &c) != 0) {
		say(r, WARN, "client settings: %s", jc_client_errmsg(NULL));
		return;
	}
	const char *sys = jc__client_system_socket(c);
	struct stat st;
	if (sys && stat(sys, &st) == 0) {
		struct group *g = getgrgid(st.st_gid);
		char gname[64];
		snprintf(gname, sizeof(gname), "%s", g ? g->gr_name : "?");
		int may = geteuid() == 0 || (st.st_uid == geteuid() ? st.st_mode & 0200
					     : in_group(st.st_gid)  ? st.st_mode & 0020
								    : st.st_mode & 0002);
		if (may)
			say(r, OK,
			    "system daemon socket %s (group %s, mode %04o): this user may use it",
			    sys, gname, (unsigned)(st.st_mode & 07777));
		else
			say(r, WARN,
			    "system daemon socket %s (group %s, mode %04o): this user may not use "
			    "it "
			    "(not in group %s: an admin runs `usermod -aG %s %s`, then log in "
			    "again)",
			    sys, gname, (unsigned)(st.st_mode & 07777), gname, gname,
			    getenv("USER") ? getenv("USER") : "USER");
	} else if (sys) {
		say(r, INFO, "no system daemon socket at %s", sys);
	}
	if (jc__client_search(c) != 0) {
		say(r, INFO, "this user's programs reach no daemon now: %s", jc_client_errmsg(c));
	} else {
		struct ucred cred;
		socklen_t cl = sizeof(cred);
		int other =
		    getsockopt(jc__client_fd(c), SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 ||
		    cred.uid != geteuid();
		say(r, OK, "this user's programs reach the daemon on %s (pid %u%s%s)",
		    jc__client_socket(c), (unsigned)jc__client_daemon_pid(c),
		    sys && strcmp(jc__client_socket(c), sys) == 0 ? ", the system daemon" : "",
		    other ? ", another uid: the client reads and sends the "
			    "include files, the daemon opens none of this user's paths"
			  : ", this uid");
	}
	jc_client_close(c);
}

int jc__doctor(const char *socket_path, const char *cache_dir)
{
	struct report r = {0};
	struct jc_toolchain tc;
	struct cu cu;
	char err[256], dir[4096];
	uint64_t budget = 0, used = 0;
	int have_tc = jc__toolchain_probe(&tc, err, sizeof(err)) == 0;
	if (have_tc) {
		say(&r, OK, "NVRTC %s (%s, builtins %s)", tc.nvrtc_version, tc.nvrtc_id,
		    tc.nvrtc_builtins_id);
		say(&r, OK, "nvJitLink %s (%s)", tc.nvjitlink_version, tc.nvjitlink_id);
		say(&r, INFO, "supported architectures: %s", tc.supported_archs);
		say(&r, INFO, "toolkit headers %s (%s)",
		    tc.toolkit_include[0] ? tc.toolkit_include : "(none)", tc.toolkit_include_id);
		if (tc.fatbin_tool == JC_FATBIN_NONE)
			say(&r, WARN,
			    "no fatbin tool (nvFatbin or fatbinary) in this toolkit: requests for "
			    "several architectures (--arch sm_80,sm_90,...) are refused");
		else
			say(&r, OK, "fatbins by %s (%s)", tc.fatbin_path, tc.fatbin_id);
	} else {
		say(&r, FAIL, "toolchain: %s", err);
	}
	check_runtime(&r);
	int cc = 0, have_device = 0;
	CUdevice dev = 0;
	if (cu_open(&cu, &r) == 0) {
		say(&r, OK, "driver CUDA %d.%d (%s)", cu.version / 1000, cu.version % 1000 / 10,
		    have_tc ? tc.driver_build : "?");
		check_driver_files(&r, &cu);
		if (have_tc)
			have_device = check_devices(&r, &tc, &cu, &cc, &dev);
		check_mig_mps(&r);
	}
	if (have_tc)
		check_ptx(&r, &tc, &cu, cc, dev, have_device);
	if (cu.lib)
		dlclose(cu.lib);
	/* The cache directory checked: --cache-dir, else the one the daemon
	 * reached serves, else the default (offline use); the daemon's
	 * toolchain, else (no daemon) the one this machine has. */
	char identity[sizeof(tc.summary)] = "";
	if (have_tc)
		snprintf(identity, sizeof(identity), "%s", tc.summary);
	check_daemon(&r, socket_path, cache_dir, have_tc ? &tc : NULL, &budget, &used, dir,
		     sizeof(dir), identity, sizeof(identity));
	if (!socket_path)
		check_reach(&r);
	if (!cache_dir && (dir[0] || jc__default_cache_dir(dir, sizeof(dir)) == 0))
		cache_dir = dir;
	if (cache_dir)
		check_cache_dir(&r, cache_dir, budget, used, identity);
	else
		say(&r, FAIL, "no cache directory: set JITCACHE_DIR or HOME, or pass --cache-dir");
	printf("%d failed, %d warnings\n", r.fails, r.warns);
	return r.fails ? 1 : 0;
}
