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

/* The forced load paths of jitcache_cuda.h: JITCACHE_FORCE_PTX=1 or
 * JITCACHE_FORCE_CUBIN=1 in the environment. */
enum { JC__FORCE_NONE = 0, JC__FORCE_PTX = 1, JC__FORCE_CUBIN = 2 };

/*
 * The target for a device of compute capability cc (10 * major + minor)
 * given NVRTC's supported architectures as jitcached lists them ("sm_75
 * sm_80 ..."). force JC__FORCE_NONE: "sm_<cc>" when cc is listed, else
 * "compute_<N>" for the highest listed N below cc (jc_cuda_resolve_target
 * says why); JC__FORCE_PTX: "compute_<N>" for the highest listed N at or
 * below cc; JC__FORCE_CUBIN: "sm_<cc>" only. arch gets len (>= 16) bytes.
 * Returns 0; JC_ENOTSUP (nothing fits); JC_EPROTO (a malformed list);
 * JC_EINVAL (NULL, len < 16). Thread-safe.
 */
int jc__cuda_pick_target(int cc, const char *supported, int force, char *arch, size_t len);

/*
 * The one target a forced load fetches for a request that names its
 * targets (requested: "sm_90", "compute_90" or a list "sm_80,sm_90,compute_90"):
 * JC__FORCE_PTX: "compute_<N>" for the highest N at or below cc among the
 * compute_N and sm_N[a|f] of requested (a cubin's own architecture's PTX);
 * JC__FORCE_CUBIN: "sm_<cc>" (with the a/f of a listed sm_<cc>a/f) when
 * requested holds sm_<cc>[a|f] or compute_<cc>. Returns 0, JC_ENOTSUP (no
 * target fits), JC_EINVAL (NULL, len < 16, a malformed item). Thread-safe.
 */
int jc__cuda_pick_forced(int cc, const char *requested, int force, char *arch, size_t len);

#endif
