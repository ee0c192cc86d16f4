/* SPDX-License-Identifier: MIT */
/*
 * `jitcachectl doctor`: on this machine as it is (with or without a driver),
 * with a daemon and without, with a cache directory it must refuse; and
 * against a stand-in libcuda.so.1 (stub_libcuda.c) that plays drivers this
 * machine lacks: one that takes NVRTC's PTX, one too old for it, one without
 * devices, one with a GPU newer than NVRTC knows. The expected PTX ISA is
 * read from PTX this test compiles with the same NVRTC.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nvrtc.h>
#include <cmocka.h>

#include "tests/lib/test.h"

/* The library path the tests were started with (a machine without system
 * libraries, like the GPU host, needs it for the daemon to start at all). */
static char *saved_ld_path;

static int teardown(void **state)
{
	static const char *const vars[] = {"JC_STUB_CUDA_VERSION",
					   "JC_STUB_DEVICES",
					   "JC_STUB_CC",
					   "JC_STUB_REJECT_PTX",
					   "JC_STUB_MIG",
					   "JC_STUB_MIG_PENDING",
					   "JITCACHE_TEST_PROC_NVIDIA_VERSION",
					   "CUDA_MPS_PIPE_DIRECTORY"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	if (saved_ld_path)
		setenv("LD_LIBRARY_PATH", saved_ld_path, 1);
	else
		unsetenv("LD_LIBRARY_PATH");
	return jct_teardown(state);
}

static char *doctor(const struct jtl_daemon *d, int want_exit)
{
	const char *args[] = {"doctor", NULL};
	return jct_ctl_expect(d, want_exit, NULL, args);
}

static void test_this_machine(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	assert_int_equal(jct_compile_tiny(d, 1, "sm_90", NULL), JC_MISS);
	char *out = doctor(d, 0);
	jct_assert_has(out, "ok    NVRTC ");
	jct_assert_has(out, "ok    nvJitLink ");
	jct_assert_has(out, "info  supported architectures: sm_");
	jct_assert_has(out, "ok    daemon answers on ");
	jct_assert_has(out, "ok    cache directory ");
	jct_assert_has(out, "ok    cache directory is on a local filesystem");
	jct_assert_has(out, " MiB free on the cache filesystem");
	jct_assert_has(out, "ok    index ");
	jct_assert_has(out, "0 failed, ");
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (cuda) {
		dlclose(cuda);
		jct_assert_has(out, "ok    driver CUDA ");
	} else {
		/* No driver: said plainly, and only a warning. */
		jct_assert_has(out, "warn  no CUDA driver (");
		jct_assert_has(out, "compiling and caching work");
		jct_assert_has(out, "without a driver it cannot be checked that it JIT-compiles");
	}
	free(out);
	assert_int_equal(jtl_daemon_stop(d), 0);
	out = doctor(d, 0);
	jct_assert_has(out, "warn  no daemon answers on ");
	free(out);
}

/* doctor --socket PATH (no --cache-dir): the cache directory checked is the
 * one that daemon serves, not this user's default. */
static void test_daemon_reached(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	char def[300], want[300];
	snprintf(def, sizeof(def), "%s/default-cache", d->dir);
	setenv("JITCACHE_DIR", def, 1);
	char *out = NULL;
	const char *argv[] = {getenv("JITCACHECTL"), "--socket", d->sock, "doctor", NULL};
	jct_run(d, argv, &out, NULL);
	unsetenv("JITCACHE_DIR");
	printf("%s", out);
	snprintf(want, sizeof(want), "ok    daemon answers on %s", d->sock);
	jct_assert_has(out, want);
	snprintf(want, sizeof(want), "ok    cache directory %s: ours", d->cache);
	jct_assert_has(out, want);
	assert_null(strstr(out, def));
	free(out);
	assert_int_equal(jtl_daemon_stop(d), 0);
}

static void test_bad_cache_dir(void **state)
{
	struct jtl_daemon *d = *state;
	jct_daemon_start(d, NULL);
	assert_int_equal(jtl_daemon_stop(d), 0);
	assert_int_equal(chmod(d->cache, 0777), 0);
	char *out = doctor(d, 0);
	jct_assert_has(out, "warn  cache directory ");
	jct_assert_has(out,
		       "is writable by group or others (mode 0777): its jitcached sets it to 0700");
	free(out);
	/* As it does. */
	jct_daemon_start(d, NULL);
	assert_int_equal(jtl_daemon_stop(d), 0);
	struct stat st;
	assert_int_equal(stat(d->cache, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
}

/* The ".version X.Y" of PTX from this NVRTC, as "X.Y". */
static void nvrtc_ptx_isa(char isa[16])
{
	static const char src[] = "extern \"C\" __global__ void k(int *p) { *p = 1; }\n";
	nvrtcProgram prog;
	const char *opts[] = {"--gpu-architecture=compute_90"};
	size_t size;
	assert_int_equal(nvrtcCreateProgram(&prog, src, "k.cu", 0, NULL, NULL), NVRTC_SUCCESS);
	assert_int_equal(nvrtcCompileProgram(prog, 1, opts), NVRTC_SUCCESS);
	assert_int_equal(nvrtcGetPTXSize(prog, &size), NVRTC_SUCCESS);
	char *ptx = malloc(size);
	assert_int_equal(nvrtcGetPTX(prog, ptx), NVRTC_SUCCESS);
	const char *v = strstr(ptx, "\n.version ");
	assert_non_null(v);
	assert_int_equal(sscanf(v, "\n.version %15s", isa), 1);
	free(ptx);
	nvrtcDestroyProgram(&prog);
}

static void test_stub_drivers(void **state)
{
	struct jtl_daemon *d = *state;
	char lib[600], want[256], isa[16], ver[16];
	snprintf(lib, sizeof(lib), "%s/tests/ops", getenv("JC_BUILD_ROOT"));
	char stub[700];
	snprintf(stub, sizeof(stub), "%s/libcuda.so.1", lib);
	struct stat st;
	assert_int_equal(stat(stub, &st), 0);
	/* The stand-in driver first; whatever the path held after it. */
	if (saved_ld_path) {
		size_t n = strlen(lib);
		snprintf(lib + n, sizeof(lib) - n, ":%s", saved_ld_path);
	}
	setenv("LD_LIBRARY_PATH", lib, 1);
	int major, minor;
	assert_int_equal(nvrtcVersion(&major, &minor), NVRTC_SUCCESS);
	nvrtc_ptx_isa(isa);
	jct_daemon_start(d, NULL);

	/* A driver as new as NVRTC with a GPU NVRTC targets: all good. */
	snprintf(ver, sizeof(ver), "%d", major * 1000 + minor * 10);
	setenv("JC_STUB_CUDA_VERSION", ver, 1);
	setenv("JC_STUB_CC", "90", 1);
	char *out = doctor(d, 0);
	snprintf(want, sizeof(want), "ok    driver CUDA %d.%d", major, minor);
	jct_assert_has(out, want);
	jct_assert_has(out, "ok    device 0: jitcache stub GPU 0, compute capability 9.0, "
			    "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f");
	snprintf(want, sizeof(want), "ok    device 0: NVRTC %d.%d can target sm_90", major, minor);
	jct_assert_has(out, want);
	snprintf(want, sizeof(want), "accepts PTX ISA %s, which NVRTC %d.%d emits", isa, major,
		 minor);
	jct_assert_has(out, want);
	snprintf(want, sizeof(want), "ok    cuModuleLoadData JIT-compiled PTX ISA %s (compute_90)",
		 isa);
	jct_assert_has(out, want);
	jct_assert_has(out, "0 failed, ");
	free(out);

	/* A driver of the previous major release: too old for this PTX. */
	snprintf(ver, sizeof(ver), "%d", (major - 1) * 1000 + 40);
	setenv("JC_STUB_CUDA_VERSION", ver, 1);
	setenv("JC_STUB_REJECT_PTX", "1", 1);
	out = doctor(d, 1);
	snprintf(want, sizeof(want),
		 "FAIL  driver CUDA %d.4 cannot JIT-compile PTX ISA %s from NVRTC %d.%d", major - 1,
		 isa, major, minor);
	jct_assert_has(out, want);
	jct_assert_has(out, "request cubins (sm_XY) or update the driver");
	jct_assert_has(out, "FAIL  cuModuleLoadData of PTX ISA ");
	jct_assert_has(out, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION");
	jct_assert_has(out, "2 failed, ");
	free(out);
	unsetenv("JC_STUB_REJECT_PTX");

	/* A driver without devices: a warning, exit 0. */
	snprintf(ver, sizeof(ver), "%d", major * 1000 + minor * 10);
	setenv("JC_STUB_CUDA_VERSION", ver, 1);
	setenv("JC_STUB_DEVICES", "0", 1);
	out = doctor(d, 0);
	jct_assert_has(out, "warn  cuInit failed: CUDA_ERROR_NO_DEVICE");
	assert_null(strstr(out, "cuModuleLoadData"));
	jct_assert_has(out, "0 failed, ");
	free(out);
	unsetenv("JC_STUB_DEVICES");

	/* A GPU newer than NVRTC knows: PTX of the newest it does, JIT-compiled. */
	setenv("JC_STUB_CC", "990", 1);
	out = doctor(d, 0);
	snprintf(want, sizeof(want), "warn  device 0: NVRTC %d.%d cannot target sm_990", major,
		 minor);
	jct_assert_has(out, want);
	jct_assert_has(out, "ok    cuModuleLoadData JIT-compiled PTX ISA ");
	free(out);
	setenv("JC_STUB_CC", "90", 1);

	/* The driver's highest PTX ISA; MIG (stand-in NVML) and MPS. */
	setenv("JC_STUB_MIG", "1", 1);
	setenv("JC_STUB_MIG_PENDING", "0", 1);
	snprintf(want, sizeof(want), "%s/mps", d->dir);
	assert_int_equal(mkdir(want, 0700), 0);
	setenv("CUDA_MPS_PIPE_DIRECTORY", want, 1);
	snprintf(want, sizeof(want), "%s/mps/control", d->dir);
	assert_int_equal(mkfifo(want, 0600), 0);
	out = doctor(d, 0);
	snprintf(want, sizeof(want),
		 "info  driver CUDA %d.%d JIT-compiles PTX ISA up to %s; NVRTC "
		 "%d.%d emits %s",
		 major, minor, isa, major, minor, isa);
	jct_assert_has(out, want);
	jct_assert_has(
	    out, "warn  GPU 0: MIG mode enabled (CUDA sees MIG instances, not the whole GPU), "
		 "pending disabled");
	snprintf(want, sizeof(want), "info  MPS: a control daemon's pipe is at %s/mps/control",
		 d->dir);
	jct_assert_has(out, want);
	free(out);
	unsetenv("JC_STUB_MIG");
	out = doctor(d, 0);
	jct_assert_has(out, "info  GPU 0: MIG not supported");
	free(out);
}

/* User-space driver against kernel module: a libcuda file named for its
 * version (the stand-in, copied), and a file standing for
 * /proc/driver/nvidia/version. */
static void test_driver_mismatch(void **state)
{
	struct jtl_daemon *d = *state;
	char lib[200], path[4400], proc[200], want[1024];
	snprintf(lib, sizeof(lib), "%s/lib", d->dir);
	assert_int_equal(mkdir(lib, 0700), 0);
	assert_int_equal(jct_sh("cp %s/tests/ops/libcuda.so.1 %s/libcuda.so.575.57.08 && "
				"ln -s libcuda.so.575.57.08 %s/libcuda.so.1",
				getenv("JC_BUILD_ROOT"), lib, lib),
			 0);
	snprintf(path, sizeof(path), "%s%s%s", lib, saved_ld_path ? ":" : "",
		 saved_ld_path ? saved_ld_path : "");
	setenv("LD_LIBRARY_PATH", path, 1);
	snprintf(proc, sizeof(proc), "%s/nvidia-version", d->dir);
	static const char mod[] =
	    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  "
	    "Release Build  (nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC) \n";
	jct_write_file(proc, mod, sizeof(mod) - 1);
	setenv("JITCACHE_TEST_PROC_NVIDIA_VERSION", proc, 1);
	jct_daemon_start(d, NULL);
	char *out = doctor(d, 1);
	snprintf(want, sizeof(want), "info  libcuda loaded from %s/libcuda.so.1 -> ", lib);
	jct_assert_has(out, want);
	snprintf(want, sizeof(want),
		 "FAIL  user-space driver libcuda 575.57.08 (%s/libcuda.so.575.57.08) "
		 "does not match the kernel module 580.159.04 (%s)",
		 lib, proc);
	jct_assert_has(out, want);
	jct_assert_has(out, "the container or image ships its own libcuda");
	free(out);
	static const char same[] =
	    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  575.57.08  Sat May 24 2025\n";
	jct_write_file(proc, same, sizeof(same) - 1);
	out = doctor(d, 0);
	jct_assert_has(
	    out, "ok    user-space driver (libcuda 575.57.08) matches the kernel module 575.57.08");
	free(out);
	assert_int_equal(unlink(proc), 0);
	out = doctor(d, 0);
	jct_assert_has(out, "warn  no NVIDIA kernel module version");
	free(out);
}

int main(void)
{
	const char *ld = getenv("LD_LIBRARY_PATH");
	saved_ld_path = ld ? strdup(ld) : NULL;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_this_machine, jct_setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_cache_dir, jct_setup, teardown),
	    cmocka_unit_test_setup_teardown(test_daemon_reached, jct_setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stub_drivers, jct_setup, teardown),
	    cmocka_unit_test_setup_teardown(test_driver_mismatch, jct_setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
