/* SPDX-License-Identifier: MIT */
/*
 * The NVRTC API as jitcache uses it: one list of every function of nvrtc.h,
 * from which the shim (shim/real.h, shim.c: every function, forwarded or
 * served), the compile job (common/nvjob.h: the worker links them, the
 * in-process fallback resolves them with dlsym) and the bench take theirs.
 */
#ifndef JC_NVRTC_API_H
#define JC_NVRTC_API_H

#include <nvrtc.h>

/*
 * X(return type, name, (parameters), (arguments), use) for every function of
 * nvrtc.h. use: JOB, a compile job calls it (so every NVRTC jitcache can
 * compile with must have it); SHIM, only the shim forwards it.
 * JC_NVRTC_IF_JOB(x) / JC_NVRTC_IF_SHIM(x) expand x for one use, so
 * JC_NVRTC_IF_##use(...) picks the job's rows. The shim defines each
 * function with exactly this signature (the compiler checks it against
 * nvrtc.h's declaration) and test_shim_symbols checks that the built
 * library exports every nvrtc* symbol the real one does.
 */
#define JC_NVRTC_FUNCTIONS(X)                                                                      \
	X(const char *, nvrtcGetErrorString, (nvrtcResult result), (result), JOB)                  \
	X(nvrtcResult, nvrtcVersion, (int *major, int *minor), (major, minor), JOB)                \
	X(nvrtcResult, nvrtcGetNumSupportedArchs, (int *numArchs), (numArchs), SHIM)               \
	X(nvrtcResult, nvrtcGetSupportedArchs, (int *supportedArchs), (supportedArchs), SHIM)      \
	X(nvrtcResult, nvrtcCreateProgram,                                                         \
	  (nvrtcProgram * prog, const char *src, const char *name, int numHeaders,                 \
	   const char *const *headers, const char *const *includeNames),                           \
	  (prog, src, name, numHeaders, headers, includeNames), JOB)                               \
	X(nvrtcResult, nvrtcDestroyProgram, (nvrtcProgram * prog), (prog), JOB)                    \
	X(nvrtcResult, nvrtcCompileProgram,                                                        \
	  (nvrtcProgram prog, int numOptions, const char *const *options),                         \
	  (prog, numOptions, options), JOB)                                                        \
	X(nvrtcResult, nvrtcGetPTXSize, (nvrtcProgram prog, size_t * ptxSizeRet),                  \
	  (prog, ptxSizeRet), JOB)                                                                 \
	X(nvrtcResult, nvrtcGetPTX, (nvrtcProgram prog, char *ptx), (prog, ptx), JOB)              \
	X(nvrtcResult, nvrtcGetCUBINSize, (nvrtcProgram prog, size_t * cubinSizeRet),              \
	  (prog, cubinSizeRet), JOB)                                                               \
	X(nvrtcResult, nvrtcGetCUBIN, (nvrtcProgram prog, char *cubin), (prog, cubin), JOB)        \
	X(nvrtcResult, nvrtcGetLTOIRSize, (nvrtcProgram prog, size_t * LTOIRSizeRet),              \
	  (prog, LTOIRSizeRet), JOB)                                                               \
	X(nvrtcResult, nvrtcGetLTOIR, (nvrtcProgram prog, char *LTOIR), (prog, LTOIR), JOB)        \
	X(nvrtcResult, nvrtcGetOptiXIRSize, (nvrtcProgram prog, size_t * optixirSizeRet),          \
	  (prog, optixirSizeRet), SHIM)                                                            \
	X(nvrtcResult, nvrtcGetOptiXIR, (nvrtcProgram prog, char *optixir), (prog, optixir), SHIM) \
	X(nvrtcResult, nvrtcGetProgramLogSize, (nvrtcProgram prog, size_t * logSizeRet),           \
	  (prog, logSizeRet), JOB)                                                                 \
	X(nvrtcResult, nvrtcGetProgramLog, (nvrtcProgram prog, char *log), (prog, log), JOB)       \
	X(nvrtcResult, nvrtcAddNameExpression,                                                     \
	  (nvrtcProgram prog, const char *const name_expression), (prog, name_expression), JOB)    \
	X(nvrtcResult, nvrtcGetLoweredName,                                                        \
	  (nvrtcProgram prog, const char *const name_expression, const char **lowered_name),       \
	  (prog, name_expression, lowered_name), JOB)                                              \
	X(nvrtcResult, nvrtcGetPCHHeapSize, (size_t * ret), (ret), SHIM)                           \
	X(nvrtcResult, nvrtcSetPCHHeapSize, (size_t size), (size), SHIM)                           \
	X(nvrtcResult, nvrtcGetPCHCreateStatus, (nvrtcProgram prog), (prog), SHIM)                 \
	X(nvrtcResult, nvrtcGetPCHHeapSizeRequired, (nvrtcProgram prog, size_t * size),            \
	  (prog, size), SHIM)                                                                      \
	X(nvrtcResult, nvrtcSetFlowCallback,                                                       \
	  (nvrtcProgram prog, int (*callback)(void *, void *), void *payload),                     \
	  (prog, callback, payload), SHIM)

#define JC_NVRTC_IF_JOB(...) __VA_ARGS__
#define JC_NVRTC_IF_SHIM(...)

#endif
