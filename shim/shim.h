/* SPDX-License-Identifier: MIT */
/* Internal interfaces of libjitcache-nvrtc (see docs/ARCHITECTURE.md, "NVRTC shim"). */
#ifndef JC_SHIM_H
#define JC_SHIM_H

#include <stddef.h>

#include "jitcache/jitcache.h"

/*
 * Turns the n NVRTC options of an nvrtcCompileProgram call (borrowed) into
 * r's options, architecture and output: the architecture option becomes
 * the request's arch (nvrtc.h's default, JC_SHIM_DEFAULT_ARCH, when there is
 * none), -dlto selects LTO-IR output, an sm_ arch cubin, a compute_ arch PTX;
 * -I in each of NVRTC's spellings becomes --include-path=DIR (the client
 * library declares and resolves include directories from those); -D/-U
 * given as two strings become one. Returns NULL when the compile can be
 * asked of jitcached, else why it cannot (an option the shim does not know
 * or that reads/writes files or makes no artifact: PCH, --time, -optix-ir,
 * ...); the reason may be written into buf (len bytes), which is also
 * scratch space. *name_matters is set to 1 when an option puts the program's
 * name into the artifact (-G, -lineinfo, -dlto and their long forms), else 0.
 * Not thread-safe for one r.
 */
const char *jc__shim_plan(const char *const *opts, int n, jc_request *r, int *name_matters,
			  char *buf, size_t len);

#endif
