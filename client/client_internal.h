/* SPDX-License-Identifier: MIT */
/* What jitcachectl and tests use of the client library beyond the public API. */
#ifndef JC_CLIENT_INTERNAL_H
#define JC_CLIENT_INTERNAL_H

#include "jitcache/jitcache.h"
#include "proto.h"
#include "req.h"

struct jc_request {
	struct jc_req req;
};

/* Runs an admin command on the daemon. out is filled (cleared first by the
 * caller) on 0; returns the transport error otherwise (message in c). */
int jc__client_admin(jc_client *c, const struct jc_admin_req *req, struct jc_admin_reply *out);

/*
 * Test-only: asks the worker that compiles r to misbehave (JC_FAULT_CRASH,
 * JC_FAULT_HANG or JC_FAULT_ALLOC from req.h; JC_FAULT_NONE clears it). The
 * fault is not part of the cache key. A daemon started without
 * JITCACHE_TEST_FAULTS=1 in its environment refuses such requests with
 * JC_EINVAL. Returns 0, or JC_EINVAL for a value outside JC_FAULT_*.
 */
int jc__request_set_test_fault(jc_request *r, uint32_t fault);

/* The raw socket of c (for tests that send malformed frames). */
int jc__client_fd(const jc_client *c);

/*
 * The target for a device of compute capability cc (10 * major + minor)
 * given NVRTC's supported architectures as jitcached lists them ("sm_75
 * sm_80 ..."): "sm_<cc>" when cc is listed, else "compute_<N>" for the
 * highest listed N below cc (jc_cuda_resolve_target says why). arch gets
 * len (>= 16) bytes. Returns 0; JC_ENOTSUP (nothing listed at or below cc);
 * JC_EPROTO (a malformed list); JC_EINVAL (NULL, len < 16). Thread-safe.
 */
int jc__cuda_pick_target(int cc, const char *supported, char *arch, size_t len);

#endif
