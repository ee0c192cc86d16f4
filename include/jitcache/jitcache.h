/* SPDX-License-Identifier: MIT */
/*
 * jitcache client API: ask a running jitcached for the artifact (cubin, PTX or
 * LTO-IR) of an NVRTC compile or an nvJitLink link, compiling it at most once
 * per cache key across all processes of the machine.
 *
 * Conventions for every function below:
 *  - int results are 0 on success or a negative JC_E* code; jc_strerror()
 *    names a code and jc_client_errmsg() gives the last detailed message.
 *  - Strings and buffers passed in are borrowed: they are copied before the
 *    call returns, the caller keeps ownership.
 *  - Pointers returned by accessors are owned by the object they come from
 *    and stay valid until that object is freed.
 *  - A handle is not thread-safe: use one jc_client per thread, or serialise
 *    calls on it. Distinct handles may be used from distinct threads at once.
 *  - The library never prints, never exits and never links libcuda.
 */
#ifndef JITCACHE_H
#define JITCACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(JC_BUILDING_LIB)
#define JC_API __attribute__((visibility("default")))
#else
#define JC_API
#endif

#define JC_VERSION_MAJOR 0
#define JC_VERSION_MINOR 1
#define JC_VERSION_PATCH 0
#define JC_VERSION_STRING "0.1.0"

/* Error codes: 0 is success, every failure is one of these (negative). */
enum {
	JC_OK = 0,
	JC_EINVAL = -1,     /* bad argument or bad request field */
	JC_ENOMEM = -2,     /* out of memory */
	JC_EIO = -3,        /* read/write/socket failure (errno in message) */
	JC_ECONNECT = -4,   /* no daemon answers on the socket */
	JC_EPROTO = -5,     /* malformed, truncated or unexpected frame */
	JC_ETOOBIG = -6,    /* frame or field over its limit */
	JC_ECOMPILE = -7,   /* compile or link failed: see the result log */
	JC_ECRASH = -8,     /* the compile worker crashed */
	JC_ETIMEOUT = -9,   /* the compile ran past --compile-timeout */
	JC_ENOSPC = -10,    /* cache disk full: nothing was stored */
	JC_ECORRUPT = -11,  /* an object failed its size/hash check */
	JC_EVERSION = -12,  /* protocol, schema or toolchain version mismatch */
	JC_EDENIED = -13,   /* peer not allowed to do this */
	JC_ELOCKED = -14,   /* cache directory held by another daemon */
	JC_ENOTFOUND = -15, /* no such entry */
	JC_EBUSY = -16,     /* daemon overloaded or shutting down */
	JC_EINTERNAL = -17, /* bug or unexpected state; message says where */
	JC_ENOTSUP = -18,   /* not supported here (no driver, no GPU, ...) */
};

/* Returns a static, never-NULL string naming code (e.g. "JC_ETIMEOUT: ..."). */
JC_API const char *jc_strerror(int code);
/* Returns JC_VERSION_STRING of the loaded library. */
JC_API const char *jc_version(void);

#ifdef __cplusplus
}
#endif
#endif
