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

/* The raw socket of c (for tests that send malformed frames). */
int jc__client_fd(const jc_client *c);

#endif
