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

/* --- process.c: what the shim keeps per process --- */

/* The counters of jitcache-run --check (JITCACHE_RUN_REPORT: one line per
 * process that compiled, written at exit; a forked child starts from zero). */
enum jc_shim_counter {
	JC_SHIM_COMPILES,     /* nvrtcCompileProgram calls on the shim's programs */
	JC_SHIM_HITS,	      /* served from the cache (local or remote) */
	JC_SHIM_MISSES,	      /* served after jitcached compiled them */
	JC_SHIM_JOINED,	      /* served from another client's compile */
	JC_SHIM_LAZY,	      /* PTX fetched beside a served cubin */
	JC_SHIM_PASSTHROUGH,  /* compiled by the real library: the shim did not ask */
	JC_SHIM_UNAVAILABLE,  /* no jitcached: the real library compiled it */
	JC_SHIM_REFUSED,      /* jitcached refused the request */
	JC_SHIM_FAILED,	      /* the compile failed in jitcached */
	JC_SHIM_MATERIALISED, /* served programs compiled again by the real library */
	JC_SHIM_N_COUNTERS
};
/* Adds one to ctr and, when reason is not NULL and not listed yet, lists it
 * among the report's reasons (while they fit). Thread-safe. */
void jc__shim_count(enum jc_shim_counter ctr, const char *reason);

/* 1 when a call must go straight to the real library: this thread is inside
 * the client library (whose fallback reaching NVRTC by soname would land
 * here), or this process is one of jitcache's own that could not shed the
 * shim. Thread-safe. */
int jc__shim_bypass(void);

/* Asks jitcached for r's artifact through a pooled client handle (the
 * client library's in-process fallback compiles with the real library
 * when there is no daemon). 0 and *out (free with jc_result_free), or the
 * client library's code and *out NULL. Thread-safe. */
int jc__shim_ask(const jc_request *r, jc_result **out);

#endif
