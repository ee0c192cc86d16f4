/* SPDX-License-Identifier: MIT */
/*
 * The real libnvrtc behind the shim: every function of nvrtc.h, called
 * through a pointer table filled from the library opened by absolute path
 * ($JITCACHE_REAL_NVRTC, else the one found at build time). Internal to
 * libjitcache-nvrtc; see docs/ARCHITECTURE.md, "NVRTC shim".
 */
#ifndef JC_SHIM_REAL_H
#define JC_SHIM_REAL_H

#include <stddef.h>

#include "common/nvrtc_api.h"

/* The real library's entry points; valid once jc__real() returned non-NULL. */
struct jc_real_nvrtc {
#define JC_REAL_FIELD(ret, name, params, args, use) ret(*name) params;
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
