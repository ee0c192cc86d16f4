/* SPDX-License-Identifier: MIT */
/*
 * The real libnvrtc behind the shim: every function of nvrtc.h, called
 * through a pointer table filled from the library opened by absolute path
 * ($JITCACHE_REAL_NVRTC, else the one found at build time). Internal to
 * libjitcache-nvrtc; see docs/ARCHITECTURE.md, "NVRTC shim".
 */
#ifndef JC_SHIM_REAL_H
#define JC_SHIM_REAL_H

#include <nvrtc.h>
#include <stddef.h>

/*
 * Every function of nvrtc.h: X(return type, name, (parameters), (arguments)).
 * The shim defines each one with exactly this signature (the compiler checks
 * it against nvrtc.h's declaration) and test_shim_symbols checks that the
 * built library exports every nvrtc* symbol the real one does.
 */
#define JC_NVRTC_FUNCTIONS(X)                                                                      \
	X(const char *, nvrtcGetErrorString, (nvrtcResult result), (result))                       \
	X(nvrtcResult, nvrtcVersion, (int *major, int *minor), (major, minor))                     \
	X(nvrtcResult, nvrtcGetNumSupportedArchs, (int *numArchs), (numArchs))                     \
	X(nvrtcResult, nvrtcGetSupportedArchs, (int *supportedArchs), (supportedArchs))            \
	X(nvrtcResult, nvrtcCreateProgram,                                                         \
	  (nvrtcProgram * prog, const char *src, const char *name, int numHeaders,                 \
	   const char *const *headers, const char *const *includeNames),                           \
	  (prog, src, name, numHeaders, headers, includeNames))                                    \
	X(nvrtcResult, nvrtcDestroyProgram, (nvrtcProgram * prog), (prog))                         \
	X(nvrtcResult, nvrtcCompileProgram,                                                        \
	  (nvrtcProgram prog, int numOptions, const char *const *options),                         \
	  (prog, numOptions, options))                                                             \
	X(nvrtcResult, nvrtcGetPTXSize, (nvrtcProgram prog, size_t * ptxSizeRet),                  \
	  (prog, ptxSizeRet))                                                                      \
	X(nvrtcResult, nvrtcGetPTX, (nvrtcProgram prog, char *ptx), (prog, ptx))                   \
	X(nvrtcResult, nvrtcGetCUBINSize, (nvrtcProgram prog, size_t * cubinSizeRet),              \
	  (prog, cubinSizeRet))                                                                    \
	X(nvrtcResult, nvrtcGetCUBIN, (nvrtcProgram prog, char *cubin), (prog, cubin))             \
	X(nvrtcResult, nvrtcGetLTOIRSize, (nvrtcProgram prog, size_t * LTOIRSizeRet),              \
	  (prog, LTOIRSizeRet))                                                                    \
	X(nvrtcResult, nvrtcGetLTOIR, (nvrtcProgram prog, char *LTOIR), (prog, LTOIR))             \
	X(nvrtcResult, nvrtcGetOptiXIRSize, (nvrtcProgram prog, size_t * optixirSizeRet),          \
	  (prog, optixirSizeRet))                                                                  \
	X(nvrtcResult, nvrtcGetOptiXIR, (nvrtcProgram prog, char *optixir), (prog, optixir))       \
	X(nvrtcResult, nvrtcGetProgramLogSize, (nvrtcProgram prog, size_t * logSizeRet),           \
	  (prog, logSizeRet))                                                                      \
	X(nvrtcResult, nvrtcGetProgramLog, (nvrtcProgram prog, char *log), (prog, log))            \
	X(nvrtcResult, nvrtcAddNameExpression,                                                     \
	  (nvrtcProgram prog, const char *const name_expression), (prog, name_expression))         \
	X(nvrtcResult, nvrtcGetLoweredName,                                                        \
	  (nvrtcProgram prog, const char *const name_expression, const char **lowered_name),       \
	  (prog, name_expression, lowered_name))                                                   \
	X(nvrtcResult, nvrtcGetPCHHeapSize, (size_t * ret), (ret))                                 \
	X(nvrtcResult, nvrtcSetPCHHeapSize, (size_t size), (size))                                 \
	X(nvrtcResult, nvrtcGetPCHCreateStatus, (nvrtcProgram prog), (prog))                       \
	X(nvrtcResult, nvrtcGetPCHHeapSizeRequired, (nvrtcProgram prog, size_t * size),            \
	  (prog, size))                                                                            \
	X(nvrtcResult, nvrtcSetFlowCallback,                                                       \
	  (nvrtcProgram prog, int (*callback)(void *, void *), void *payload),                     \
	  (prog, callback, payload))

/* The real library's entry points; valid once jc__real() returned non-NULL. */
struct jc_real_nvrtc {
#define JC_REAL_FIELD(ret, name, params, args) ret(*name) params;
	JC_NVRTC_FUNCTIONS(JC_REAL_FIELD)
#undef JC_REAL_FIELD
};

/*
 * Opens the real library once per process (thread-safe; later calls cost
 * one atomic load) and returns its table, or NULL when it cannot be loaded
 * or lacks a function (a message goes to stderr once: the application
 * would have had no NVRTC either). Where the real library has no RUNPATH,
 * libnvrtc-builtins.so.<major>.<minor> of its directory is opened first, so
 * NVRTC's own dlopen of the builtins by soname finds that one.
 */
const struct jc_real_nvrtc *jc__real(void);

/* The real library's path, fixed once per process (shim/bypath.h): the one
 * the application opened by path under jitcache-run --by-path, else
 * $JITCACHE_REAL_NVRTC, else the one found at build time. Loads nothing;
 * thread-safe; the string lives as long as the process. */
const char *jc__real_path(void);

#endif
