/* SPDX-License-Identifier: MIT */
/*
 * A compile request (common/req.h), checked once before it is keyed
 * (docs/ARCHITECTURE.md, "The key"): jc__req_validate for what any request
 * must be (names, options, architecture syntax, options that touch files,
 * include options, client-read trees), jc__req_admit for what this daemon
 * can and may do with it (the toolchain supports the architecture, a fatbin
 * tool exists, test faults are enabled, the requester may have the daemon
 * read paths it names). The daemon calls both on the loop thread, before
 * the key is used (cache.c, jc__cache_request); jc__key_compute validates
 * too, for tools that key a request themselves (jitcache-bench).
 */
#ifndef JC_REQUEST_H
#define JC_REQUEST_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/req.h"
#include "core/toolchain.h"

/*
 * Checks a request before it is keyed or sent. JC_EINVAL for:
 *  - job not an enum jc_job, output not an enum jc_output; a link job
 *    (JC_JOB_LINK, JC_JOB_COMPILE_LINK) asking for LTO-IR (nvJitLink produces
 *    cubin or PTX only: nvJitLink API reference, nvJitLinkGetLinkedCubin /
 *    nvJitLinkGetLinkedPtx); JC_JOB_LINK without link inputs;
 *  - arch NULL or not ^(sm|compute)_[0-9]{2,3}[af]?$; for fatbin output a
 *    target list jc__targets_parse() refuses (fatbin.h), or a job that is not
 *    a compile; a list (a comma) with another output;
 *  - a compile job (JC_JOB_COMPILE, JC_JOB_COMPILE_LINK) without a source name;
 *    source NULL with source_size > 0 (same for every blob);
 *  - a header name that is NULL, empty, absolute, contains a backslash or a
 *    ".." component; two headers with the same name;
 *  - a NULL or empty option, include dir, name expression, link input name
 *    or link option; a link input type that is not an enum jc_input_type;
 *  - an option or link option naming the architecture ("-arch", "-arch=...",
 *    "--gpu-architecture", "--gpu-architecture=..."): the architecture is set
 *    by the arch field only, and the daemon passes it to NVRTC and nvJitLink;
 *  - include options jc__inc_path_parse() refuses: an -I or pre-include
 *    option without its value, a relative -I directory, include_dirs not
 *    exactly the -I directories in order.
 * JC_ENOMEM when sorting the header names fails to allocate.
 * err: out, errlen bytes (may be 0), gets a one-line message naming the field.
 * req is borrowed and not changed. Thread-safe (no globals).
 */
int jc__req_validate(const struct jc_req *req, char *err, size_t errlen);

/*
 * The headers of req in name order (strcmp): *out a malloc'd array of
 * req->n_headers pointers into req->headers (caller frees; NULL when there
 * are none). 0 or JC_ENOMEM (message in err). Thread-safe.
 */
int jc__req_sorted_headers(const struct jc_req *req, const struct jc_blob ***out, char *err,
			   size_t errlen);

/* What a daemon admits (jc__req_admit); set once at start-up. */
#define JC_OTHER_BUILDS 8

struct jc_req_policy {
	const struct jc_toolchain *tc; /* borrowed */
	int test_faults;	       /* JITCACHE_TEST_FAULTS=1: test faults honoured */
	uid_t self; /* the daemon's uid, its privileges dropped (no syscall per request) */
	/* The NVRTC builds applications loaded that are not tc's (the nvrtc_id
	 * of requests refused with JC_EVERSION), the first JC_OTHER_BUILDS, for
	 * `version` and `doctor`: written by jc__req_admit (serving threads), read
	 * by jc__req_builds (admin commands, thread pool) under builds_lock
	 * (pthread_mutex_init'ed by the daemon). */
	pthread_mutex_t builds_lock;
	char other_builds[JC_OTHER_BUILDS][80];
	int n_other_builds;
};

/*
 * The NVRTC builds this daemon answered requests of, into out[len]: "ID
 * (compiles here)" for its own, then "; ID (another build: compiled in the
 * application)" for each other build an application loaded (what the
 * shim's requests said, refused). Thread-safe.
 */
void jc__req_builds(struct jc_req_policy *p, char *out, size_t len);

/*
 * Checks a request that passed jc__req_validate against this daemon:
 * JC_EINVAL when it asks for a test fault and they are disabled, when NVRTC
 * does not support its architecture (or one of its fatbin targets; the
 * message lists what it supports); JC_ENOTSUP for fatbin output without a
 * fatbin tool; JC_EDENIED when reads_disk (the request reads include
 * directories or absolute #include paths, jc__inc_needed) and peer is
 * neither the daemon's uid (p->self) nor root: the trust model (docs/ARCHITECTURE.md)
 * has other uids' clients send the headers instead. Message in err.
 * Thread-safe (its memo is per thread; p is not changed but for the
 * other builds, under builds_lock).
 */
int jc__req_admit(struct jc_req_policy *p, const struct jc_req *req, int reads_disk, uid_t peer,
		  char *err, size_t errlen);

#endif
