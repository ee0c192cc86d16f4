/* SPDX-License-Identifier: MIT */
/*
 * Which real libnvrtc the shim compiles with, shared between the shim
 * (shim/real.c) and the rtld-audit module of jitcache-run --by-path
 * (shim/audit.c). The audit module lives in a link namespace of its own,
 * with its own libc (rtld-audit(7)): an environment variable it set would not
 * be seen by the shim. It finds this slot instead, exported by the shim
 * under JC_BYPATH_SLOT, with dlsym() on the shim's link map, and writes
 * the path of the library the application asked for into it before naming
 * the shim in that library's place. Internal to libjitcache-nvrtc.
 *
 * One path per process: the first to claim the slot (the audit module for
 * the first library opened by path, else the shim from $JITCACHE_REAL_NVRTC
 * or the build's default, at its first need or at start when that variable
 * is set) fixes it for the process's life. A later open by path of another
 * file is not redirected: the application gets that library itself,
 * uncached, never the first one's compiler under its name.
 */
#ifndef JC_SHIM_BYPATH_H
#define JC_SHIM_BYPATH_H

#include <limits.h>

#define JC_BYPATH_SLOT "jc__bypath_slot"

enum { JC_BYPATH_FREE, JC_BYPATH_WRITING, JC_BYPATH_SET };

struct jc_bypath_slot {
	int state; /* JC_BYPATH_*, read and written with __atomic builtins */
	/* 1 while the shim itself dlopen()s the real library: the audit module
	 * lets that open through whoever the loader says asks for it (under
	 * AddressSanitizer, dlopen is its interceptor's call, not the shim's) */
	int opening_real;
	char path[PATH_MAX]; /* absolute, NUL-terminated; valid once state is SET */
};

#endif
